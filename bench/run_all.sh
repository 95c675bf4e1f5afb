#!/usr/bin/env bash
# `make bench`: every benchmark table of docs/PERFORMANCE.md from a fresh
# build, each tool's output kept under bench/results/ (one .txt per table,
# JSON or Markdown beside it where the tool writes one).
#
#   placement_bench   the placement core alone (bench/README.md)
#   loadgen           groups/s and latency through a live head: simulated
#                     nodes (state in memory) and real raylet processes
#                     (SQLite), one call per group and batch calls
#   scale             head memory per node / per bundle and decision time at
#                     1k, 10k and 50k simulated nodes (SQLite)
#   train_startup     time to train: submit -> every rank in its Gloo group
#                     (the built-in job, and examples/pytorch-ddp on Debian's
#                     torch 1.13 and, when scripts/torch2-venv.sh made it, torch 2.x)
#   replay            the Alibaba GPU trace, every variant (~40 min of one core; `make replay`)
#   queue_replay      four teams sharing the cluster, three queueing policies (~8 min)
#   failover          `berth up --heads 2`: kill -9 of the active head until
#                     `berth status` answers through the standby, 10 rounds
#   ray               berth and Ray side by side (installs Ray from PyPI once)
#   ray_train         the same TorchTrainer program on Ray Train and on berth,
#                     2/4/8 workers (installs ray[train] into the torch 2.x venv once)
#
# BENCH="placement_bench loadgen ..." picks some (default: all but ray and ray_train);
# DURATION (seconds per loadgen run, default 5).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
RESULTS=${RESULTS:-$ROOT/bench/results}
BENCH=${BENCH:-placement_bench loadgen scale pending_jobs train_startup replay queue_replay failover}
DURATION=${DURATION:-5}
mkdir -p "$RESULTS"
cd "$ROOT"

run() {  # run NAME COMMAND...: prints and keeps the output
  local name=$1
  shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "$RESULTS/$name.txt"
}

for b in $BENCH; do
  case $b in
    placement_bench)
      run placement_bench "$BUILD_DIR/bench/placement_bench" --benchmark_counters_tabular=true ;;
    loadgen)
      run loadgen_simulated "$BUILD_DIR/bench/berth-loadgen" --mode simulated --nodes 1000 --state memory \
        --workloads one,pack3,spread8 --concurrency 1,4 --batch 1,100 --duration-s "$DURATION" \
        --json "$RESULTS/loadgen_simulated.json"
      run loadgen_real "$BUILD_DIR/bench/berth-loadgen" --mode real --raylets 8 --state sqlite \
        --workloads one,pack3 --concurrency 1,16 --batch 1,100 --duration-s "$DURATION" \
        --json "$RESULTS/loadgen_real.json" ;;
    scale)
      for shape in 1000:5000 10000:20000 50000:100000; do
        run "scale_${shape%%:*}" "$BUILD_DIR/bench/berth-loadgen" --mode simulated --state sqlite \
          --nodes "${shape%%:*}" --hold "${shape##*:}"
      done ;;
    pending_jobs)
      run pending_jobs "$BUILD_DIR/bench/berth-loadgen" --mode simulated --nodes 100 --state memory \
        --pending-jobs 10000 --json "$RESULTS/pending_jobs.json" ;;
    train_startup)
      run train_startup "$BUILD_DIR/bench/berth-train-bench" --workers 2,4,8,16 --repeat 5 \
        --markdown "$RESULTS/train_startup.md"
      run train_startup_ddp_torch1 "$BUILD_DIR/bench/berth-train-bench" --workers 2,4,8,16 --repeat 3 \
        --script "$ROOT/bench/train_startup/timed_ddp.py" --python /usr/bin/python3 \
        --markdown "$RESULTS/train_startup_ddp_torch1.md"
      venv_python=${BERTH_TORCH2_VENV:-$HOME/.cache/berth/venv-torch2}/bin/python
      if [[ -x $venv_python ]]; then
        run train_startup_ddp_torch2 "$BUILD_DIR/bench/berth-train-bench" --workers 2,4,8,16 --repeat 3 \
          --script "$ROOT/bench/train_startup/timed_ddp.py" --python "$venv_python" \
          --markdown "$RESULTS/train_startup_ddp_torch2.md"
      fi ;;
    replay)
      make --no-print-directory -C "$ROOT" replay BUILD_DIR="$BUILD_DIR" ;;
    queue_replay)
      run queue_replay "$BUILD_DIR/bench/berth-queue-replay" --data_dir="${REPLAY_DATA_ROOT:-$ROOT/../shared/data}" \
        --results_dir="$RESULTS" --hours 24 ;;
    failover)
      run failover bash "$ROOT/bench/failover/failover.sh" "$BUILD_DIR" 10
      run failover-etcd bash "$ROOT/bench/failover/failover.sh" "$BUILD_DIR" 10 etcd ;;
    ray)
      OUT="$RESULTS/ray" run ray_compare bash "$ROOT/bench/ray/compare.sh" ;;
    ray_train)
      OUT="$BUILD_DIR/ray-train-compare" run ray_train bash "$ROOT/bench/ray_train/compare.sh" ;;
    *)
      echo "run_all.sh: unknown benchmark '$b'" >&2
      exit 2 ;;
  esac
done
echo "results in $RESULTS"
