"""A job's working directory as one package: a gzip'd tar named by the
SHA-256 of its bytes ("sha256:<hex>"), as berth's CLI makes it
(common/working_dir_package.h) and as Ray's runtime_env packs a
working_dir. The same files pack to the same bytes (sorted, no owners, no
gzip timestamp), so an unchanged folder is not uploaded again.

``excludes`` are globs: one without a "/" leaves out every file or folder
of that name at any depth ("*.ckpt", "data"); one with a "/" is matched
against the path from the folder ("logs/*.txt"). ``.git``, ``__pycache__``
and ``.berth`` are always left out.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import tarfile
from typing import Iterable, List, Tuple

from berth.errors import InvalidArgumentError

DEFAULT_EXCLUDES = (".git", "__pycache__", ".berth")


def _excluded(relative: str, patterns: List[str]) -> bool:
    name = os.path.basename(relative)
    return any(fnmatch.fnmatchcase(relative if "/" in p else name, p) for p in patterns)


def _entries(root: str, patterns: List[str]) -> List[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(dirs + files):
            relative = name if rel_folder == "." else f"{rel_folder}/{name}"
            if _excluded(relative, patterns):
                if name in dirs:
                    dirs.remove(name)
                continue
            found.append(relative)
    return sorted(found)


def pack(working_dir: str, excludes: Iterable[str] = ()) -> Tuple[bytes, str, int]:
    """(archive bytes, digest, files packed) of the folder ``working_dir``."""
    root = os.path.abspath(os.path.expanduser(os.fspath(working_dir)))
    if not os.path.isdir(root):
        raise InvalidArgumentError(f"working_dir: {working_dir!r} is not a directory")
    excludes = list(excludes)
    if not all(isinstance(p, str) and p for p in excludes):
        raise InvalidArgumentError(f"excludes: a list of glob strings, not {excludes!r}")
    raw = io.BytesIO()
    files = 0
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative in _entries(root, list(DEFAULT_EXCLUDES) + excludes):
            info = tar.gettarinfo(os.path.join(root, relative), arcname=relative)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                files += 1
                with open(os.path.join(root, relative), "rb") as f:
                    tar.addfile(info, f)
            elif info.isdir() or info.issym():
                tar.addfile(info)
    data = raw.getvalue()
    return data, "sha256:" + hashlib.sha256(data).hexdigest(), files
