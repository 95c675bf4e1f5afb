#!/usr/bin/env bash
# GPU check for berth-worker: on a machine with an NVIDIA GPU and a CUDA
# build of libtorch (found through python3's torch), builds berth-worker and
# runs a 1-rank NCCL group for a few training steps, printing the NCCL
# version, the GPU name and the losses.
#
#   bash scripts/gpu-check.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}

command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: no NVIDIA GPU here" >&2; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
torch_prefix=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)")
python3 - <<'PY'
import torch
assert torch.cuda.is_available(), "torch sees no CUDA device"
print(f"torch {torch.__version__} cuda {torch.version.cuda} nccl {'.'.join(map(str, torch.cuda.nccl.version()))}")
print(f"device 0: {torch.cuda.get_device_name(0)}")
PY

bash scripts/setup.sh
# The CUDA libtorch first on the prefix path; NCCL and CUDA are still dlopened.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build build-gpu --target berth-worker -j "$(nproc)"

export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29000 + RANDOM % 1000)) RANK=0 WORLD_SIZE=1 \
       LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=0 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
LD_LIBRARY_PATH="$torch_prefix/../../lib:${LD_LIBRARY_PATH:-}" \
  build-gpu/worker/berth-worker train --steps "$steps" --checkpoint-every "$steps" | tee /tmp/gpu-check.log
grep -q "backend: nccl" /tmp/gpu-check.log || { echo "gpu-check: the worker did not use NCCL" >&2; exit 1; }
echo "gpu-check: OK"
