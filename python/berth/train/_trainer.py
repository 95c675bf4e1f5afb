"""The driver side of TorchTrainer: ``fit()`` runs a training function on
every rank of a berth job and returns Ray Train's Result.

The function goes by value (cloudpickle: functions of ``__main__``,
closures and lambdas travel; functions of importable modules go by
reference) into a payload in the run's folder, ``storage_path/name/.berth``,
which every rank reads: a folder every node reaches, or an object store,
as in Ray Train. Each rank runs ``python -m berth.train._worker PAYLOAD`` in the
driver's Python and working directory unless ``worker_runtime_env`` says
otherwise. fit() prints the ranks' output as it comes, and Ctrl-C stops the
job. Only this module (and only in fit()) needs grpc: a rank imports none.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import uuid
from typing import Any, Dict, Optional

from berth.config import ScalingConfig
from berth.errors import InvalidArgumentError
from berth.train._checkpoint import Checkpoint
from berth.train._config import RunConfig
from berth.train._storage import storage_for
from berth.train._result import ControllerError, Result, TrainingFailedError, WorkerGroupError, worker_failures


def _takes_config(function: Any) -> bool:
    """Whether the training function takes the config: 0 or 1 argument."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return True  # a builtin or C callable: call it as Ray would, with the config
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) > 1 or any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in parameters):
        raise InvalidArgumentError("train_loop_per_worker: a function of no argument or of one (the "
                                   f"train_loop_config), not {inspect.signature(function)}")
    return bool(positional) or any(p.kind == p.VAR_POSITIONAL for p in parameters)


def _asks_gpu(scaling: ScalingConfig) -> bool:
    per_worker = scaling.resources_per_worker
    entries = per_worker if isinstance(per_worker, list) else [per_worker or {}]
    return scaling.use_gpu or any((e or {}).get("GPU", 0) > 0 for e in entries)


class _RankPrinter:
    """Prints the ranks' output line by line, each prefixed by its rank as
    Ray's driver prefixes its workers'."""

    def __init__(self) -> None:
        self._partial: Dict[tuple, str] = {}

    def piece(self, rank: int, stream: str, text: str) -> None:
        key = (rank, stream)
        lines = (self._partial.pop(key, "") + text).split("\n")
        if lines[-1]:
            self._partial[key] = lines[-1]
        out = sys.stderr if stream == "stderr" else sys.stdout
        for line in lines[:-1]:
            print(f"(rank {rank}) {line}", file=out, flush=True)

    def flush(self) -> None:
        for (rank, stream), line in sorted(self._partial.items()):
            print(f"(rank {rank}) {line}", file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)
        self._partial.clear()


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on every rank (the base of TorchTrainer)."""

    def __init__(self, train_loop_per_worker, *, train_loop_config: Optional[Dict[str, Any]] = None,
                 backend: Optional[str] = None, timeout_s: int = 1800,
                 scaling_config: Optional[ScalingConfig] = None, run_config: Optional[RunConfig] = None,
                 resume_from_checkpoint: Optional[Checkpoint] = None, **unsupported: Any) -> None:
        if unsupported:
            raise InvalidArgumentError(f"{', '.join(sorted(unsupported))}: not supported by berth's "
                                       f"{type(self).__name__} (docs/train.md lists Ray Train's names)")
        if not callable(train_loop_per_worker):
            raise InvalidArgumentError("train_loop_per_worker: a function, not "
                                       f"{type(train_loop_per_worker).__name__}")
        self._takes_config = _takes_config(train_loop_per_worker)
        if train_loop_config is not None and not self._takes_config:
            raise InvalidArgumentError("train_loop_config: given, but train_loop_per_worker takes no argument")
        if scaling_config is not None and not isinstance(scaling_config, ScalingConfig):
            raise InvalidArgumentError(f"scaling_config: a berth.train.ScalingConfig, not "
                                       f"{type(scaling_config).__name__}")
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise InvalidArgumentError(f"run_config: a berth.train.RunConfig, not {type(run_config).__name__}")
        if resume_from_checkpoint is not None and not isinstance(resume_from_checkpoint, Checkpoint):
            raise InvalidArgumentError("resume_from_checkpoint: a berth.train.Checkpoint, not "
                                       f"{type(resume_from_checkpoint).__name__}")
        self._function = train_loop_per_worker
        self._config = train_loop_config
        self._backend, self._timeout_s = backend, timeout_s
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self._resume_from = resume_from_checkpoint

    def _write_payload(self, storage, fit_dir: str) -> str:
        import cloudpickle

        payload = storage.join(fit_dir, "payload.pkl")
        storage.write_bytes(payload, cloudpickle.dumps(
            {"function": self._function, "config": self._config, "takes_config": self._takes_config,
             "backend": self._backend, "timeout_s": self._timeout_s, "use_gpu": _asks_gpu(self.scaling_config)}))
        # Loading the payload needs cloudpickle: the ranks get the driver's.
        storage.put_dir(os.path.dirname(cloudpickle.__file__), storage.join(fit_dir, "site", "cloudpickle"))
        return payload

    def fit(self) -> Result:
        """Runs the job to its end: the Result, or TrainingFailedError once
        the run fails for good (FailureConfig's max_failures spent)."""
        from berth.client import Client  # the driver side: grpc

        run = self.run_config
        storage = storage_for(run.run_dir)
        fit_dir = storage.join(run.run_dir, ".berth", "fit-" + uuid.uuid4().hex[:12])
        payload = self._write_payload(storage, fit_dir)
        marker = storage.join(fit_dir, "marker")
        storage.write_bytes(marker, b"")
        runtime_env = run.worker_runtime_env or {}
        # Ranks fork from a warm Python per node (berth.train._zygote) unless
        # env_vars turn it off.
        env = {"BERTH_TRAIN_ZYGOTE": "1", **runtime_env.get("env_vars", {})}
        env.update(BERTH_TRAIN_RUN_DIR=run.run_dir, BERTH_TRAIN_NAME=run.name, BERTH_TRAIN_MARKER=marker)
        if run.checkpoint_config is not None:
            env["BERTH_TRAIN_CHECKPOINT_CONFIG"] = json.dumps(run.checkpoint_config.to_dict())
        if self._resume_from is not None:
            env["BERTH_TRAIN_RESUME_FROM"] = self._resume_from.path
        python = os.fspath(runtime_env.get("py_executable") or sys.executable)
        with Client() as client:
            where = {"working_dir": os.getcwd()}  # a shared filesystem's, as Slurm's
            if "working_dir" in runtime_env:
                where = {"working_dir_package": client.upload_working_dir(runtime_env["working_dir"],
                                                                          runtime_env.get("excludes", ()))}
            job = client.submit([python, "-m", "berth.train._worker", payload], scaling_config=self.scaling_config,
                                failure_config=run.failure_config, name=run.name, env=env, **where)
            print(f"berth: run {run.name} is job {job.id}; results in {run.run_dir}", file=sys.stderr, flush=True)
            status = self._follow(job)
        if status.state == "SUCCEEDED":
            return Result.from_path(run.run_dir)
        raise self._failure(job.id, status)

    @staticmethod
    def _follow(job) -> Any:
        printer = _RankPrinter()

        def relay() -> None:
            try:
                for rank, stream, text in job.log_pieces(follow=True):
                    printer.piece(rank, stream, text)
            except Exception as e:  # the output is a convenience: the job goes on
                print(f"berth: stopped following the ranks' output: {e}", file=sys.stderr)

        follower = threading.Thread(target=relay, daemon=True)
        follower.start()
        try:
            status = job.wait()
        except KeyboardInterrupt:
            print(f"berth: stopping job {job.id}", file=sys.stderr, flush=True)
            job.stop()
            raise
        follower.join(timeout=5)
        printer.flush()
        return status

    def _failure(self, job_id: str, status: Any) -> TrainingFailedError:
        failures = worker_failures(self.run_config.run_dir, job_id)
        message = f"job {job_id} {status.state} after {status.attempt + 1} attempt(s): {status.message}"
        if failures:
            first = failures[0]
            message += f"\nrank {first['rank']} failed first:\n{first['traceback'].rstrip()}"
        elif status.failure_causes:
            message += "\n" + "\n".join(status.failure_causes)
        error = (WorkerGroupError if failures else ControllerError)(
            message, {f["rank"]: f["exception"] for f in failures})
        if failures:
            error.__cause__ = failures[0]["exception"]
        return error
