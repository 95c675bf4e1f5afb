#!/usr/bin/env bash
# Installs the Debian packages berth builds and runs with. Idempotent: when
# everything is already there it prints nothing and exits 0.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libgloo-dev
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev libarchive-dev
  prometheus yamllint libsqlite3-dev libhiredis-dev redis-server etcd-server etcd-client
  bazel-bootstrap bazel-rules-java
  clang libclang-rt-14-dev
  gnuplot-nox
  python3-torch python3-grpcio python3-protobuf python3-yaml python3-pytest python3-venv python3-cloudpickle
  python3-pandas
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=()
[[ $(id -u) -eq 0 ]] || SUDO=(sudo)
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq >/dev/null
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
