#!/usr/bin/env bash
# The PyPI PyTorch 2.x line that most users run, with current Lightning and
# Accelerate, in a virtualenv cached per machine (about 4.5 GB the first
# time: torch's CUDA wheels are required even on CPU). Idempotent and quiet
# when the venv is there; prints the venv's python on stdout. --with-ray
# also installs the Ray Train that the side-by-side benchmarks pin.
#
#   PY=$(scripts/torch2-venv.sh [--with-ray])    (BERTH_TORCH2_VENV overrides the place)
set -euo pipefail
VENV=${BERTH_TORCH2_VENV:-$HOME/.cache/berth/venv-torch2}
# Lower bounds, not pins: the point is the line users install today.
REQUIREMENTS=("torch>=2.1" "lightning>=2.1" "accelerate>=0.30" "grpcio>=1.51" "protobuf>=4.21" "pyyaml" "pytest"
              "cloudpickle" "pandas")
if ! "$VENV/bin/python" -c "import torch, lightning, accelerate, grpc, yaml, pytest, cloudpickle, pandas" 2>/dev/null; then
  echo "torch2-venv: installing ${REQUIREMENTS[*]} into $VENV (once per machine)" >&2
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
fi
RAY_VERSION=2.60.0
if [[ ${1:-} == --with-ray ]] &&
   ! "$VENV/bin/python" -c "import ray, ray.train.torch, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  echo "torch2-venv: installing ray[train]==$RAY_VERSION into $VENV (once per machine)" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "ray[train]==$RAY_VERSION" >&2
fi
echo "$VENV/bin/python"
