#!/bin/sh
# A berth-autoscaler `command` provider that runs each pool's nodes as
# berth-raylet processes on this machine (simulated GPUs): for trying the
# autoscaler on one machine, and for its end-to-end test.
#
#   local-pool.sh scale  POOL TARGET          start raylets until POOL has TARGET
#   local-pool.sh remove POOL TARGET NODE...  stop these raylets
#
# The autoscaler passes BERTH_POOL_* and BERTH_HEAD_ADDRESS (and its own
# environment, e.g. BERTH_TOKEN_FILE for a cluster with a token). State (a pid
# file per node) lives in ${BERTH_POOL_DIR:-/tmp/berth-pools-$(id -u)}/POOL.
# BERTH_RAYLET_BIN overrides which berth-raylet runs (default: PATH).
set -eu
action=$1 pool=$2 target=$3
shift 3
dir=${BERTH_POOL_DIR:-/tmp/berth-pools-$(id -u)}/$pool
raylet=${BERTH_RAYLET_BIN:-berth-raylet}
mkdir -p "$dir"

running() {
  n=0
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    if kill -0 "$(cat "$f")" 2>/dev/null; then n=$((n + 1)); else rm -f "$f"; fi
  done
  echo "$n"
}

case $action in
scale)
  n=$(running)
  while [ "$n" -lt "$target" ]; do
    seq=$(($(cat "$dir/seq" 2>/dev/null || echo 0) + 1))
    echo "$seq" >"$dir/seq"
    id=$pool-$seq
    set -- --head "$BERTH_HEAD_ADDRESS" --node-id "$id" --node-pool "$pool" \
      --num-gpus "${BERTH_POOL_GPUS:-0}" --num-cpus "$BERTH_POOL_CPUS" --memory "$BERTH_POOL_MEMORY" \
      --log-dir "$dir/$id-workers"
    [ -n "${BERTH_POOL_ACCELERATOR_TYPE:-}" ] && set -- "$@" --accelerator-type "$BERTH_POOL_ACCELERATOR_TYPE"
    [ -n "${BERTH_POOL_LABELS:-}" ] && set -- "$@" --labels "$BERTH_POOL_LABELS"
    [ -n "${BERTH_TOKEN_FILE:-}" ] && set -- "$@" --token-file "$BERTH_TOKEN_FILE"
    # Own output file: the autoscaler waits for this script's output to end.
    "$raylet" "$@" </dev/null >"$dir/$id.log" 2>&1 &
    echo $! >"$dir/$id.pid"
    echo "started $id (pid $!)"
    n=$((n + 1))
  done
  ;;
remove)
  for id in "$@"; do
    if [ -e "$dir/$id.pid" ]; then
      kill "$(cat "$dir/$id.pid")" 2>/dev/null || true
      rm -f "$dir/$id.pid"
      echo "stopped $id"
    fi
  done
  ;;
*)
  echo "usage: $0 scale|remove POOL TARGET [NODE...]" >&2
  exit 2
  ;;
esac
