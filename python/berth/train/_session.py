"""Inside a berth job: the run's context, progress reports, checkpoints.

A script that runs under berth calls these as Ray Train's
``ray.train.get_context()``, ``ray.train.report()`` and
``ray.train.get_checkpoint()``. They read the environment berth gives
every rank (docs/train.md) and need no connection: rank 0's reports are
appended to BERTH_REPORT_FILE, which the job's trainer relays to the head,
so they do not depend on the script's torch, grpcio or Python version.

Under ``TorchTrainer`` (the rank runs ``berth.train._worker``) every rank
calls report(), as in Ray: it is a barrier, every rank's checkpoint folder
is copied into one ``checkpoint_<time>`` folder of the run, and rank 0
records it. In a command job only rank 0's report counts, and nothing waits
for the other ranks (a torchrun script often reports from rank 0 alone).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from berth.train._checkpoint import Checkpoint, latest_checkpoint, new_checkpoint_name, record_checkpoint
from berth.train._result import append_json_line, append_report
from berth.train._storage import is_uri, storage_for

_latest_reported_checkpoint: Optional[str] = None
# The Gloo group reports coordinate over, under TorchTrainer; None in a
# command job.
_group: Any = None


def _int_env(name: str, default: Optional[int] = None) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise RuntimeError(f"berth.train: ${name} is not set: not running as a berth (or torchrun) rank")
        return default
    return int(value)


@dataclass(frozen=True)
class TrainContext:
    """Where this process is in its job (Ray's TrainContext getters too)."""

    world_rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_world_size: int
    job_id: str
    attempt: int
    storage_path: str  # the run's folder for checkpoints ("" outside berth)

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_node_rank(self) -> int:
        return self.node_rank

    def get_world_size(self) -> int:
        return self.world_size

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_experiment_name(self) -> str:
        """RunConfig's name under TorchTrainer, else the job's id."""
        return os.environ.get("BERTH_TRAIN_NAME") or self.job_id

    def get_storage_path(self) -> str:
        return self.storage_path


def get_context() -> TrainContext:
    """This rank's context. Also works under plain torchrun (job_id is then
    TORCHELASTIC_RUN_ID). RuntimeError outside a distributed run."""
    world_size = _int_env("WORLD_SIZE")
    return TrainContext(
        world_rank=_int_env("RANK"),
        local_rank=_int_env("LOCAL_RANK", 0),
        node_rank=_int_env("NODE_RANK", _int_env("GROUP_RANK", 0)),
        world_size=world_size,
        local_world_size=_int_env("LOCAL_WORLD_SIZE", world_size),
        job_id=os.environ.get("BERTH_JOB_ID") or os.environ.get("TORCHELASTIC_RUN_ID", ""),
        attempt=_int_env("TORCHELASTIC_RESTART_COUNT", 0),
        storage_path=_run_dir(),
    )


def report(metrics: Dict[str, Any], checkpoint: "Optional[Checkpoint | str | os.PathLike]" = None,
           checkpoint_dir_name: Optional[str] = None) -> None:
    """Reports this step's metrics and, optionally, a checkpoint (a
    ``Checkpoint`` or a directory) to the head: ``berth job`` shows rank 0's
    step, metrics and checkpoint. The checkpoint's files are copied into the
    run's folder before it returns (so a temporary directory may go), unless
    it is in the run's folder already; a restarted attempt's get_checkpoint()
    returns the latest one. ``metrics["step"]`` (an int) is the step;
    without it, the count of reports. Numeric metrics reach the head; others
    stay in the report file."""
    global _latest_reported_checkpoint
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics: a dict, not {type(metrics).__name__}")
    source = _checked_source(checkpoint, checkpoint_dir_name)
    rank = _int_env("RANK", 0)
    run_dir = _run_dir()
    if _group is not None:
        persisted = _persist_together(source, run_dir, checkpoint_dir_name)
    elif rank == 0 and source is not None:
        persisted = _persist(source, run_dir, checkpoint_dir_name or new_checkpoint_name())
    else:
        persisted = source
    if persisted is not None and (rank == 0 or _group is not None):
        _latest_reported_checkpoint = persisted  # every rank's get_checkpoint() sees it at once
    if rank != 0:
        return
    if persisted is not None:
        if run_dir and _inside(persisted, run_dir):
            record_checkpoint(run_dir, persisted, _plain_metrics(metrics), _checkpoint_config())
    line: Dict[str, Any] = {"metrics": _plain_metrics(metrics), "checkpoint": persisted, "time": time.time()}
    step = metrics.get("step")
    if isinstance(step, numbers.Integral) and not isinstance(step, bool) and step >= 0:
        line["step"] = int(step)
    if run_dir and _group is not None:
        append_report(run_dir, line)
    path = os.environ.get("BERTH_REPORT_FILE")
    if path:
        append_json_line(path, line)


def _checked_source(checkpoint: Any, checkpoint_dir_name: Optional[str]) -> Optional[str]:
    """The checkpoint's directory, absolute; errors name the argument."""
    if checkpoint_dir_name is not None and (not isinstance(checkpoint_dir_name, str) or not checkpoint_dir_name
                                            or os.sep in checkpoint_dir_name or checkpoint_dir_name in (".", "..")):
        raise ValueError(f"checkpoint_dir_name: a folder name, not {checkpoint_dir_name!r}")
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"checkpoint: a Checkpoint or a path, not {type(checkpoint).__name__}")
    source = os.fspath(checkpoint)
    source = source if is_uri(source) else os.path.abspath(source)
    if not storage_for(source).is_dir(source):
        raise ValueError(f"checkpoint: {source!r} is not a directory")
    return source


def _plain_metrics(metrics: Dict[str, Any]) -> Dict[str, Any]:
    return {str(k): _plain(v) for k, v in metrics.items()}


def _inside(path: str, folder: str) -> bool:
    return is_uri(path) == is_uri(folder) and storage_for(folder).contains(folder, path)


def _persist(source: str, run_dir: str, name: str) -> str:
    """The checkpoint's place in the run folder, its files copied there
    (merged with what other ranks copied); the source itself when it is in
    the run folder already, is not a local folder, or there is no run
    folder."""
    if not run_dir or is_uri(source) or _inside(source, run_dir):
        return source
    storage = storage_for(run_dir)
    target = storage.join(run_dir, name)
    storage.put_dir(source, target)
    return target


def _persist_together(source: Optional[str], run_dir: str, name: Optional[str]) -> Optional[str]:
    """Every rank's part of one checkpoint: rank 0 names the folder, each
    rank copies its files, and all wait until every copy is done. The
    checkpoint (or None when no rank gave one), the same on every rank."""
    import torch.distributed as dist

    names = [name or new_checkpoint_name()]
    dist.broadcast_object_list(names, src=0, group=_group)
    persisted = _persist(source, run_dir, names[0]) if source is not None else None
    everyone: List[Optional[str]] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, persisted, group=_group)
    given = [p for p in everyone if p is not None]
    return given[0] if given else None


def _plain(value: Any) -> Any:
    """Numbers as JSON numbers (0-d tensors and numpy scalars included)."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (TypeError, ValueError, RuntimeError):
            return str(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Real):
        value = float(value) if not isinstance(value, numbers.Integral) else int(value)
        return value if not isinstance(value, float) or math.isfinite(value) else str(value)
    return value if isinstance(value, (str, type(None))) else str(value)


def get_checkpoint() -> Optional[Checkpoint]:
    """The latest checkpoint of this run: the one reported in this attempt,
    else the latest the run's folder keeps (a restarted attempt, or a re-run
    of the same RunConfig name), else the head's record, else the trainer's
    resume_from_checkpoint; None if none."""
    if _latest_reported_checkpoint is not None:
        return Checkpoint(_latest_reported_checkpoint)
    kept = latest_checkpoint(_run_dir())
    if kept is not None:
        return kept
    given = os.environ.get("BERTH_LATEST_CHECKPOINT") or os.environ.get("BERTH_TRAIN_RESUME_FROM")
    return Checkpoint(given) if given else None


def _run_dir() -> str:
    """The run's folder: the trainer's storage_path/name, else the job's
    storage folder; "" outside berth."""
    return os.environ.get("BERTH_TRAIN_RUN_DIR") or os.environ.get("BERTH_STORAGE_PATH", "")


def _checkpoint_config() -> Optional[Dict[str, Any]]:
    text = os.environ.get("BERTH_TRAIN_CHECKPOINT_CONFIG")
    return json.loads(text) if text else None


def _start(group: Any) -> None:
    """Called by berth.train._worker once the process group is up: reports
    coordinate over ``group`` (Gloo, whatever the training backend)."""
    global _group
    _group = group


def _coordination_group() -> Any:
    if _group is None:
        raise RuntimeError("berth.train.collective: only inside a TorchTrainer's train_loop_per_worker")
    return _group
