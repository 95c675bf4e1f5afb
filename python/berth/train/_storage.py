"""Where a run keeps its files: a folder (local, or a filesystem every node
mounts) or an object store (``s3://``, ``gs://``: any fsspec URI). The
checkpoint snapshot, report() and the trainer use this one small interface
and do not care which. A folder needs only the standard library; a URI
needs fsspec and its protocol's package (s3fs, gcsfs) on the driver and on
every rank, configured as fsspec is (credentials, and e.g.
FSSPEC_S3_ENDPOINT_URL for an S3-protocol server of one's own).

Paths are strings: absolute paths, or URIs under the store's root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import List, Optional


def is_uri(path: str) -> bool:
    return "://" in path


class LocalStorage:
    """A folder: local, or a filesystem every node mounts."""

    shared_by_nature = False

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def contains(self, folder: str, path: str) -> bool:
        real_folder = os.path.realpath(folder)
        return os.path.commonpath([os.path.realpath(path), real_folder]) == real_folder

    def relative(self, folder: str, path: str) -> str:
        """`path` (in `folder`) relative to it."""
        return os.path.relpath(os.path.realpath(path), os.path.realpath(folder))

    def read_bytes(self, path: str) -> Optional[bytes]:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        """Atomically: a temporary file in the same folder, then rename."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def put_dir(self, source: str, target: str) -> None:
        shutil.copytree(source, target, dirs_exist_ok=True)

    def get_dir(self, source: str, target: str) -> None:
        shutil.copytree(source, target, dirs_exist_ok=True)

    def remove_dir(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def list_names(self, folder: str) -> List[str]:
        try:
            return sorted(os.listdir(folder))
        except FileNotFoundError:
            return []

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)


class ObjectStorage:
    """An fsspec URI (s3://bucket/prefix, gs://..., memory://...)."""

    shared_by_nature = True

    def __init__(self, uri: str) -> None:
        try:
            import fsspec
        except ImportError:
            raise ImportError(f"storage_path {uri!r}: object-store URIs need fsspec (and s3fs for s3://, "
                              "gcsfs for gs://) in this Python") from None
        self.fs, _ = fsspec.core.url_to_fs(uri)

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") for p in parts)

    def contains(self, folder: str, path: str) -> bool:
        return path.rstrip("/").startswith(folder.rstrip("/") + "/")

    def relative(self, folder: str, path: str) -> str:
        return path.rstrip("/")[len(folder.rstrip("/")) + 1:]

    def read_bytes(self, path: str) -> Optional[bytes]:
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)  # one object: readers see all of it or none

    def put_dir(self, source: str, target: str) -> None:
        for folder, _, files in os.walk(source):
            for name in files:
                local = os.path.join(folder, name)
                self.fs.put_file(local, self.join(target, os.path.relpath(local, source).replace(os.sep, "/")))

    def get_dir(self, source: str, target: str) -> None:
        for remote in self.fs.find(source):
            local = os.path.join(target, *remote[len(self._bare(source)):].strip("/").split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            self.fs.get_file(remote, local)

    def remove_dir(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)

    def list_names(self, folder: str) -> List[str]:
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False))
        except FileNotFoundError:
            return []

    def is_dir(self, path: str) -> bool:
        return bool(self.fs.find(path))

    def _bare(self, path: str) -> str:
        """The path as fsspec lists it (without the protocol)."""
        return self.fs._strip_protocol(path)


def storage_for(path: str):
    """The storage that holds `path`."""
    return ObjectStorage(path) if is_uri(path) else LocalStorage()
