#!/usr/bin/env bash
# The Python SDK's tests as a user installs it: `pip install ./python` into a
# fresh venv over Debian's torch (system site packages; grpcio and protobuf
# come from PyPI with the generated stubs; s3fs, and moto's S3 server for the
# object-store tests), then pytest python/tests against clusters of
# BUILD_DIR's binaries.
#
#   tests/python/run_pytest.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$BUILD/venv-sdk-test
rm -rf "$VENV"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$ROOT/python" s3fs "moto[server]"
# Away from python/, whose berth (without stubs) would shadow the installed one.
cd "$BUILD"
BERTH_BUILD_DIR=$BUILD exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --import-mode=importlib \
  "$ROOT/python/tests"
