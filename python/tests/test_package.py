"""berth._package: a working directory packed as the head stores it."""

import hashlib
import io
import os
import tarfile

import pytest

from berth import _package
from berth.errors import InvalidArgumentError


def _names(data):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return sorted(tar.getnames())


def test_packs_sorted_without_excluded_files_and_names_it_by_its_hash(tmp_path):
    for path in ("train.py", "lib/model.py", "data/big.bin", "logs/a.txt", "logs/b.log", "m.ckpt",
                 ".git/HEAD", "lib/__pycache__/model.pyc", ".berth/fit-1/payload.pkl"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(path)
    data, digest, files = _package.pack(str(tmp_path), ["data", "logs/*.txt", "*.ckpt"])
    assert _names(data) == ["lib", "lib/model.py", "logs", "logs/b.log", "train.py"]
    assert files == 3
    assert digest == "sha256:" + hashlib.sha256(data).hexdigest()


def test_the_same_files_pack_to_the_same_bytes(tmp_path):
    (tmp_path / "a.py").write_text("a")
    first = _package.pack(str(tmp_path))
    assert _package.pack(str(tmp_path)) == first
    assert first[0][4:8] == b"\0\0\0\0"  # gzip's header keeps no time
    (tmp_path / "a.py").write_text("b")
    assert _package.pack(str(tmp_path))[1] != first[1]


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(InvalidArgumentError, match="working_dir"):
        _package.pack(str(tmp_path / "missing"))
    with pytest.raises(InvalidArgumentError, match="excludes"):
        _package.pack(str(tmp_path), [""])
