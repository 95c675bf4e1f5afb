"""What ``fit()`` returns (Ray Train's Result) and raises
(TrainingFailedError), read back from the run's folder: the reports rank 0
made (``.berth/reports.jsonl``), the kept checkpoints (the snapshot), and
the failed ranks' exceptions (``.berth/failures/``), in a folder or an
object store.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from berth.train._checkpoint import Checkpoint, load_snapshot
from berth.train._storage import is_uri, storage_for


class TrainingFailedError(RuntimeError):
    """The run failed for good. ``worker_failures`` maps a failed rank of the
    last attempt to its exception (also the error's ``__cause__``: the rank
    that failed first); empty when no rank raised (a node was lost, a
    process was killed): the message then says why."""

    def __init__(self, message: str, worker_failures: Optional[Dict[int, BaseException]] = None) -> None:
        super().__init__(message)
        self.worker_failures = worker_failures or {}


class WorkerGroupError(TrainingFailedError):
    """Ray Train V2's: ranks raised (``worker_failures`` has them)."""


class ControllerError(TrainingFailedError):
    """Ray Train V2's: the run failed without a rank raising (a node was
    lost, a process was killed, the job could not be placed)."""


@dataclass
class Result:
    """A run's outcome: rank 0's last reported ``metrics``, the latest
    ``checkpoint``, the ``error`` if it failed, the run folder (``path``),
    and the kept checkpoints with their metrics (``best_checkpoints``)."""

    metrics: Optional[Dict[str, Any]]
    checkpoint: Optional[Checkpoint]
    error: Optional[BaseException]
    path: str
    best_checkpoints: List[Tuple[Checkpoint, Dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def from_path(cls, path: str) -> "Result":
        """The result of the run in this folder (storage_path/name)."""
        if not storage_for(path).is_dir(path):
            raise ValueError(f"path: {path!r} is not a run folder")
        reports = _reports(path)
        kept = [(Checkpoint(e["path"]), e["metrics"]) for e in load_snapshot(path)]
        return cls(metrics=reports[-1]["metrics"] if reports else None,
                   checkpoint=kept[-1][0] if kept else None, error=None, path=path, best_checkpoints=kept)

    @property
    def metrics_dataframe(self):
        """Every report rank 0 made in this run folder, one row each (pandas)."""
        import pandas

        return pandas.DataFrame([r["metrics"] for r in _reports(self.path)])

    def get_best_checkpoint(self, metric: str, mode: str) -> Optional[Checkpoint]:
        """The kept checkpoint with the best ``metric`` ("max" or "min");
        None if none reported it."""
        if mode not in ("max", "min"):
            raise ValueError(f"mode: 'max' or 'min', not {mode!r}")
        scored = [(m[metric], c) for c, m in self.best_checkpoints
                  if isinstance(m.get(metric), (int, float)) and not isinstance(m.get(metric), bool)]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda s: s[0])[1]


def append_json_line(path: str, line: Dict[str, Any]) -> None:
    """Appends ``line`` to the JSON-lines file ``path`` in one write, so a
    reader never sees half a line."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, default=str) + "\n")


def append_report(run_dir: str, line: Dict[str, Any]) -> None:
    """Keeps one of rank 0's reports in the run folder: a line of
    .berth/reports.jsonl in a folder, one object each in an object store
    (which cannot append)."""
    if is_uri(run_dir):
        storage = storage_for(run_dir)
        storage.write_bytes(storage.join(run_dir, ".berth", "reports", f"{time.time_ns():020d}.json"),
                            (json.dumps(line, default=str) + "\n").encode())
        return
    append_json_line(os.path.join(run_dir, ".berth", "reports.jsonl"), line)


def _reports(run_dir: str) -> List[Dict[str, Any]]:
    storage = storage_for(run_dir)
    if is_uri(run_dir):
        folder = storage.join(run_dir, ".berth", "reports")
        texts = [storage.read_bytes(storage.join(folder, name)) for name in storage.list_names(folder)]
    else:
        texts = [storage.read_bytes(os.path.join(run_dir, ".berth", "reports.jsonl"))]
    return [json.loads(line) for text in texts if text for line in text.decode().splitlines() if line.strip()]


def failures_dir(run_dir: str, job_id: str) -> str:
    return storage_for(run_dir).join(run_dir, ".berth", "failures", job_id)


def record_failure(run_dir: str, job_id: str, failure: Dict[str, Any]) -> None:
    """Keeps a failed rank's {"attempt", "rank", "time", "exception",
    "traceback"} for the driver's TrainingFailedError."""
    try:
        data = pickle.dumps(failure)
    except Exception:  # an exception that does not pickle: its text does
        error = failure["exception"]
        data = pickle.dumps({**failure, "exception": RuntimeError(f"{type(error).__name__}: {error}")})
    storage = storage_for(run_dir)
    name = f"attempt-{failure['attempt']}-rank-{failure['rank']}.pkl"
    storage.write_bytes(storage.join(failures_dir(run_dir, job_id), name), data)


def worker_failures(run_dir: str, job_id: str) -> List[Dict[str, Any]]:
    """The last failed attempt's failures, the first to fail first: each
    {"rank", "exception", "traceback"}."""
    storage = storage_for(run_dir)
    folder = failures_dir(run_dir, job_id)
    found = []
    for name in storage.list_names(folder):
        try:
            found.append(pickle.loads(storage.read_bytes(storage.join(folder, name))))
        except Exception as e:  # a pickle the driver cannot load: say which
            found.append({"attempt": -1, "rank": -1, "time": 0, "traceback": "",
                          "exception": RuntimeError(f"{name}: cannot load the rank's exception: {e}")})
    last = max((f["attempt"] for f in found), default=0)
    return sorted((f for f in found if f["attempt"] in (last, -1)), key=lambda f: f["time"])
