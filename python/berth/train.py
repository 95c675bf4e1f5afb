"""Inside a berth job: the run's context, progress reports, checkpoints.

A script that runs under berth calls these like Ray Train's
``ray.train.get_context()``, ``ray.train.report()`` and
``ray.train.get_checkpoint()``. They read the environment berth gives
every rank (docs/train.md) and need no connection: rank 0's reports are
appended to BERTH_REPORT_FILE, which the job's trainer relays to the head,
so they do not depend on the script's torch, grpcio or Python version.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

_latest_reported_checkpoint: Optional[str] = None


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
    storage_path: str  # the job's folder for checkpoints ("" outside berth)

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
        return self.job_id

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
        storage_path=os.environ.get("BERTH_STORAGE_PATH", ""),
    )


def report(metrics: Dict[str, Any], checkpoint: Optional[str] = None) -> None:
    """Reports this step's metrics and, optionally, a checkpoint (a path on
    storage every node can read) to the head: ``berth job`` shows rank 0's
    step, metrics and checkpoint, and a restarted job's
    get_checkpoint() returns the latest one. Call it on every rank, as in
    Ray; only rank 0's reports are kept. ``metrics["step"]`` (an int) is
    the step; without it, the count of reports. Numeric metrics reach the
    head; others stay in the report file."""
    global _latest_reported_checkpoint
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics: a dict, not {type(metrics).__name__}")
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"checkpoint: a path, not {type(checkpoint).__name__}")
    if _int_env("RANK", 0) != 0:
        return
    if checkpoint is not None:
        checkpoint = os.path.abspath(os.fspath(checkpoint))
        _latest_reported_checkpoint = checkpoint
    path = os.environ.get("BERTH_REPORT_FILE")
    if not path:
        return  # not under berth: nothing to report to
    line: Dict[str, Any] = {"metrics": {k: _plain(v) for k, v in metrics.items()},
                            "checkpoint": checkpoint, "time": time.time()}
    step = metrics.get("step")
    if isinstance(step, numbers.Integral) and not isinstance(step, bool) and step >= 0:
        line["step"] = int(step)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # One write of one line: the trainer never sees half a report.
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, default=str) + "\n")


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


def get_checkpoint() -> Optional[str]:
    """The latest checkpoint reported by this job: the one reported in this
    attempt, else the one a restarted attempt resumes from; None if none."""
    if _latest_reported_checkpoint is not None:
        return _latest_reported_checkpoint
    return os.environ.get("BERTH_LATEST_CHECKPOINT") or None
