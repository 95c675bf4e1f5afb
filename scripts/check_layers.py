#!/usr/bin/env python3
"""Fails when a C++ file includes across the layers the wrong way.

The folders are the layers (see the top CMakeLists.txt and README.md):

    proto, common  <-  placement  <-  queueing  <-  auth  <-  wire  <-  train  <-  scheduler
                                                      <-  raylet, autoscaler, worker
                                                                    <-  client

A folder may include its own files and those of the folders it lists below.
The pure cores are held tighter: the placement core may include, besides
itself, only absl and the standard library; the queueing core that and the
placement core; neither takes threads or clocks (each is a pure function of
its inputs; the daemons own time and concurrency). One file is let use
atomics: the resource name interner (placement/resource_name.cc), an
insert-only table no result depends on, which lets resource sets name
their resources by pointer from any thread. Tests
(*_test.cc, *_test_util.h) keep the arrows and may add gtest and the protos.

    check_layers.py [--root DIR] [--stamp FILE] [FILE...]

With no FILE it checks every .h/.cc under the layered folders of --root.
The build runs it before compiling the placement core, so a bad include
fails the build, not only a test.
"""

import argparse
import pathlib
import re
import sys

BELOW = {
    "common": set(),
    "placement": set(),
    "queueing": {"placement"},
    "auth": {"common"},
    "wire": {"auth", "common", "placement", "queueing", "proto"},
    "train": {"wire", "auth", "common", "placement", "queueing", "proto"},
    "scheduler": {"train", "wire", "auth", "common", "placement", "queueing", "proto"},
    "raylet": {"wire", "auth", "common", "placement", "queueing", "proto"},
    "autoscaler": {"wire", "auth", "common", "placement", "queueing", "proto"},
    "worker": {"auth", "common", "proto"},
    "client": {"train", "wire", "auth", "common", "placement", "queueing", "proto"},
}
# The first path component of an include that names a berth folder. The
# generated protos are included as "berth/v1/...".
FOLDER_OF_PREFIX = {name: name for name in BELOW} | {"berth": "proto", "tests": "tests"}

PLACEMENT_EXTERNAL = re.compile(r"absl/")
# The pure cores and the berth folders each may include besides itself.
PURE = {"placement": set(), "queueing": {"placement"}}
# absl's own threads and clocks are as impure as the standard library's.
PLACEMENT_FORBIDDEN = re.compile(
    r"^(absl/(synchronization|time)/|thread$|mutex$|shared_mutex$|condition_variable$|"
    r"future$|atomic$|chrono$|ctime$)")
# The one shared state of the pure cores, and what it may include for it.
SHARED_STATE = {"placement/resource_name.cc": {"atomic"}}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def problems(root, path):
    rel = path.relative_to(root)
    folder = rel.parts[0]
    if folder not in BELOW or len(rel.parts) < 2:
        return
    allowed = BELOW[folder] | {folder}
    # Tests keep the arrows but may use gtest, and the protos to talk to a
    # real service.
    is_test = re.search(r"_test(_util)?\.(cc|h)$", path.name) is not None
    if is_test:
        allowed = allowed | {"proto"}
    text = path.read_text(errors="replace")
    for match in INCLUDE.finditer(text):
        kind, name = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        where = f"{rel}:{line}: #include {kind}{name}{'>' if kind == '<' else kind}"
        first = name.split("/", 1)[0]
        if folder in PURE and not is_test:
            own = {folder} | PURE[folder]
            only = ", ".join(sorted(own - {folder}) + ["absl", "the standard library"])
            if name in SHARED_STATE.get(rel.as_posix(), set()):
                continue
            if PLACEMENT_FORBIDDEN.search(name):
                yield f"{where}: the {folder} core takes no threads or clocks"
            elif kind == "<" and ("/" in name or "." in name):
                yield f"{where}: the {folder} core includes only {only}"
            elif kind == '"' and first not in own and not PLACEMENT_EXTERNAL.match(name):
                yield f"{where}: the {folder} core includes only {only}"
            continue
        owner = FOLDER_OF_PREFIX.get(first) if kind == '"' and "/" in name else None
        if owner is not None and owner not in allowed:
            yield f"{where}: {folder}/ may include only {', '.join(sorted(allowed))}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent,
                        type=pathlib.Path)
    parser.add_argument("--stamp", type=pathlib.Path, help="written when every file passes")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    root = args.root.absolute()
    files = [f.absolute() for f in args.files] or sorted(
        p for folder in BELOW for pattern in ("*.h", "*.cc")
        for p in (root / folder).rglob(pattern))
    found = [p for f in files for p in problems(root, f)]
    for p in found:
        print(f"check_layers: {p}", file=sys.stderr)
    if found:
        return 1
    if args.stamp:
        args.stamp.write_text(f"{len(files)} files checked\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
