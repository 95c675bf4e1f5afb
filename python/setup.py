"""Builds the berth package: generates berth/v1/*_pb2*.py from ../proto.

The stubs are generated with the protoc that grpcio-tools bundles (the
build requirement); where it is missing (``pip install --no-build-isolation``
on a machine with only Debian's packages) with ``protoc`` and
``grpc_python_plugin`` from PATH. The runtime requirements follow the
generator, so the generated code always runs on what gets installed.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "proto")


def generator():
    """(command prefix, install requirements) of the stub generator."""
    try:
        import grpc_tools
        from google import protobuf
        from importlib.metadata import version

        tools = version("grpcio-tools")
        return ([sys.executable, "-m", "grpc_tools.protoc"],
                [f"grpcio>={tools}", f"protobuf>={protobuf.__version__}"])
    except ImportError:
        protoc = shutil.which("protoc")
        plugin = shutil.which("grpc_python_plugin")
        if protoc is None or plugin is None:
            raise SystemExit("berth: building needs grpcio-tools, or protoc and grpc_python_plugin "
                             "(Debian: protobuf-compiler protobuf-compiler-grpc)")
        return ([protoc, f"--plugin=protoc-gen-grpc_python={plugin}"], ["grpcio>=1.51", "protobuf>=3.21"])


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        command, _ = generator()
        protos = sorted(glob.glob(os.path.join(PROTO_ROOT, "berth", "v1", "*.proto")))
        if not protos:
            raise SystemExit(f"berth: no .proto files under {PROTO_ROOT}/berth/v1")
        out = self.build_lib
        subprocess.run(command + [f"-I{PROTO_ROOT}", f"--python_out={out}",
                                  f"--grpc_python_out={out}"] + protos, check=True)


setup(cmdclass={"build_py": BuildWithStubs}, install_requires=generator()[1] + ["pyyaml>=5.4", "cloudpickle>=2.0"])
