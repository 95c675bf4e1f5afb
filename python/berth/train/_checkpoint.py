"""Checkpoints as Ray Train keeps them: a directory (``Checkpoint``) and,
per run folder, the record of the persisted ones
(``checkpoint_manager_snapshot.json``: every kept checkpoint with the
metrics reported beside it, the latest last) that a restarted attempt and a
re-run of the same ``RunConfig(storage_path, name)`` resume from.

Only the standard library: this runs on every rank. The snapshot is written
by rank 0 alone, atomically (a reader sees the old one or the new one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

SNAPSHOT = "checkpoint_manager_snapshot.json"
_METADATA = ".metadata.json"


class Checkpoint:
    """A directory of files a run saved. Also a path (``os.fspath``), so a
    script that treated berth's checkpoints as paths keeps working."""

    def __init__(self, path: "str | os.PathLike", filesystem: Any = None) -> None:
        if filesystem is not None:
            raise ValueError("filesystem: berth's checkpoints are paths (local or a shared filesystem); "
                             "give none")
        self.path = os.path.abspath(os.fspath(path))

    @classmethod
    def from_directory(cls, path: "str | os.PathLike") -> "Checkpoint":
        """The checkpoint in this directory (it must exist)."""
        if not os.path.isdir(os.fspath(path)):
            raise ValueError(f"path: {os.fspath(path)!r} is not a directory")
        return cls(path)

    def to_directory(self, path: "Optional[str | os.PathLike]" = None) -> str:
        """Copies the checkpoint's files into ``path`` (a new temporary
        directory if None) and returns it."""
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint-")
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint as a local directory, to read (not to change)."""
        yield self.path

    def get_metadata(self) -> Dict[str, Any]:
        try:
            with open(os.path.join(self.path, _METADATA), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def set_metadata(self, metadata: Dict[str, Any]) -> None:
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata: a dict, not {type(metadata).__name__}")
        _write_json(os.path.join(self.path, _METADATA), metadata)

    def update_metadata(self, metadata: Dict[str, Any]) -> None:
        self.set_metadata({**self.get_metadata(), **metadata})

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


def _write_json(path: str, value: Any) -> None:
    """Atomically: a temporary file in the same folder, then rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, default=str)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def new_checkpoint_name() -> str:
    """Ray Train V2's folder name: checkpoint_<local time, microseconds>."""
    now = time.time()
    return time.strftime("checkpoint_%Y-%m-%d_%H-%M-%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"


def load_snapshot(run_dir: str) -> List[Dict[str, Any]]:
    """The run's kept checkpoints, oldest first: {"path", "metrics"}."""
    if not run_dir:
        return []
    try:
        with open(os.path.join(run_dir, SNAPSHOT), encoding="utf-8") as f:
            entries = json.load(f).get("checkpoints", [])
    except FileNotFoundError:
        return []
    except ValueError as e:
        raise RuntimeError(f"{os.path.join(run_dir, SNAPSHOT)}: not a checkpoint snapshot: {e}") from None
    # A path in the snapshot is relative to the run folder, so a run folder
    # that moved (or is mounted elsewhere) still resumes.
    return [{"path": os.path.join(run_dir, e["path"]), "metrics": e.get("metrics", {})} for e in entries]


def latest_checkpoint(run_dir: str) -> Optional[Checkpoint]:
    entries = load_snapshot(run_dir)
    return Checkpoint(entries[-1]["path"]) if entries else None


def _score(entry: Dict[str, Any], attribute: Optional[str], order: str) -> Tuple[int, float]:
    """Higher is better; an entry without the attribute ranks below all."""
    value = entry["metrics"].get(attribute) if attribute else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return (0, 0.0)
    return (1, float(value) if order == "max" else -float(value))


def record_checkpoint(run_dir: str, path: str, metrics: Dict[str, Any],
                      checkpoint_config: Optional[Dict[str, Any]]) -> None:
    """Adds a persisted checkpoint to the run's snapshot, then deletes the
    ones CheckpointConfig does not keep: the best ``num_to_keep`` by
    ``checkpoint_score_attribute`` (the newest without one); the latest is
    always kept, as a restart resumes from it."""
    entries = load_snapshot(run_dir)
    entries = [e for e in entries if e["path"] != path] + [{"path": path, "metrics": metrics}]
    config = checkpoint_config or {}
    num_to_keep = config.get("num_to_keep")
    dropped: List[Dict[str, Any]] = []
    if num_to_keep is not None and len(entries) > num_to_keep:
        attribute, order = config.get("checkpoint_score_attribute"), config.get("checkpoint_score_order", "max")
        # Stable sort: among equals (no attribute), the newer ranks higher.
        ranked = sorted(range(len(entries)), key=lambda i: (_score(entries[i], attribute, order), i), reverse=True)
        keep = set(ranked[:num_to_keep]) | {len(entries) - 1}
        dropped = [e for i, e in enumerate(entries) if i not in keep]
        entries = [e for i, e in enumerate(entries) if i in keep]
    _write_json(os.path.join(run_dir, SNAPSHOT),
                {"checkpoints": [{"path": os.path.relpath(e["path"], run_dir), "metrics": e["metrics"]}
                                 for e in entries]})
    for e in dropped:  # after the snapshot no longer names them
        shutil.rmtree(e["path"], ignore_errors=True)
