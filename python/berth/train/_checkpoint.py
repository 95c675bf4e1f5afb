"""Checkpoints as Ray Train keeps them: a directory (``Checkpoint``: a
folder, or a prefix of an object store) and, per run folder, the record of
the persisted ones (``checkpoint_manager_snapshot.json``: every kept
checkpoint with the metrics reported beside it, the latest last) that a
restarted attempt and a re-run of the same ``RunConfig(storage_path, name)``
resume from.

Only the standard library for folders: this runs on every rank. The
snapshot is written by rank 0 alone, atomically (a reader sees the old one
or the new one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from berth.train._storage import is_uri, storage_for

SNAPSHOT = "checkpoint_manager_snapshot.json"
_METADATA = ".metadata.json"


class Checkpoint:
    """A directory of files a run saved: a folder, or an object-store URI
    (``s3://bucket/run/checkpoint_...``). Also a path (``os.fspath``), so a
    script that treated berth's checkpoints as paths keeps working."""

    def __init__(self, path: "str | os.PathLike", filesystem: Any = None) -> None:
        if filesystem is not None:
            raise ValueError("filesystem: berth finds the filesystem from the path (a folder, or a URI such "
                             "as s3://bucket/x); give none")
        path = os.fspath(path)
        self.path = path if is_uri(path) else os.path.abspath(path)

    @classmethod
    def from_directory(cls, path: "str | os.PathLike") -> "Checkpoint":
        """The checkpoint in this directory (it must exist)."""
        if not storage_for(os.fspath(path)).is_dir(os.fspath(path)):
            raise ValueError(f"path: {os.fspath(path)!r} is not a directory")
        return cls(path)

    def to_directory(self, path: "Optional[str | os.PathLike]" = None) -> str:
        """Copies the checkpoint's files into the local ``path`` (a new
        temporary directory if None) and returns it."""
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint-")
        storage_for(self.path).get_dir(self.path, target)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint as a local directory, to read (not to change): the
        folder itself, or a temporary copy of an object store's."""
        if not is_uri(self.path):
            yield self.path
            return
        copy = self.to_directory()
        try:
            yield copy
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def get_metadata(self) -> Dict[str, Any]:
        data = storage_for(self.path).read_bytes(self._metadata_path())
        return json.loads(data) if data is not None else {}

    def set_metadata(self, metadata: Dict[str, Any]) -> None:
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata: a dict, not {type(metadata).__name__}")
        storage_for(self.path).write_bytes(self._metadata_path(), json.dumps(metadata, default=str).encode())

    def update_metadata(self, metadata: Dict[str, Any]) -> None:
        self.set_metadata({**self.get_metadata(), **metadata})

    def _metadata_path(self) -> str:
        return storage_for(self.path).join(self.path, _METADATA)

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


def new_checkpoint_name() -> str:
    """Ray Train V2's folder name: checkpoint_<local time, microseconds>."""
    now = time.time()
    return time.strftime("checkpoint_%Y-%m-%d_%H-%M-%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"


def load_snapshot(run_dir: str) -> List[Dict[str, Any]]:
    """The run's kept checkpoints, oldest first: {"path", "metrics"}."""
    if not run_dir:
        return []
    storage = storage_for(run_dir)
    data = storage.read_bytes(storage.join(run_dir, SNAPSHOT))
    if data is None:
        return []
    try:
        entries = json.loads(data).get("checkpoints", [])
    except ValueError as e:
        raise RuntimeError(f"{storage.join(run_dir, SNAPSHOT)}: not a checkpoint snapshot: {e}") from None
    # A path in the snapshot is relative to the run folder, so a run folder
    # that moved (or is mounted elsewhere) still resumes.
    return [{"path": storage.join(run_dir, e["path"]), "metrics": e.get("metrics", {})} for e in entries]


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
    """Adds a persisted checkpoint (in `run_dir`) to the run's snapshot, then
    deletes the ones CheckpointConfig does not keep: the best
    ``num_to_keep`` by ``checkpoint_score_attribute`` (the newest without
    one); the latest is always kept, as a restart resumes from it. Also
    deletes the checkpoint folders a failed attempt left unrecorded."""
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
    storage = storage_for(run_dir)
    relative = [{"path": storage.relative(run_dir, e["path"]), "metrics": e["metrics"]} for e in entries]
    storage.write_bytes(storage.join(run_dir, SNAPSHOT), json.dumps({"checkpoints": relative}, default=str).encode())
    for e in dropped:  # after the snapshot no longer names them
        storage.remove_dir(e["path"])
    # A checkpoint an attempt wrote and never recorded (it failed within
    # report(): a peer died, or berth stopped it) is no one's; report()
    # records one at a time, so any other such folder is one of those.
    named = {storage.relative(run_dir, e["path"]) for e in entries}
    for name in storage.list_names(run_dir):
        if name.startswith("checkpoint_") and name != SNAPSHOT and name not in named:
            storage.remove_dir(storage.join(run_dir, name))
