#!/usr/bin/env bash
# berth and Ray side by side on this machine, the same placement group
# workloads one after the other: berth-loadgen against a head with K raylet
# processes (state in memory, as Ray's GCS without Redis), then
# ray_pg_bench.py against a local Ray cluster of K raylets. Installs the
# pinned Ray into a virtualenv (PyPI) on first use. Prints both figures and
# berth/Ray per run; JSON under OUT.
#
# Loopback only: both sides run inside a new user + network namespace
# (`unshare -rn`) whose only interface is lo, so Ray, which binds the
# machine's interface address when it can find one, has nothing but
# 127.0.0.1. The Ray install (the one step that needs the network) runs
# before entering it. BUILD_DIR holds the berth-loadgen to run (not built
# here: cmake --build BUILD_DIR --target berth-loadgen).
#
#   bench/ray/compare.sh            (NODES=8 WORKLOADS=one,pack3,spread8 CONCURRENCY=1,16 DURATION=5)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT=${OUT:-$BUILD_DIR/ray-compare}
VENV=${BERTH_RAY_VENV:-$HOME/.cache/berth/venv-ray}
RAY_VERSION=2.60.0
NODES=${NODES:-8}
WORKLOADS=${WORKLOADS:-one,pack3,spread8}
CONCURRENCY=${CONCURRENCY:-1,16}
DURATION=${DURATION:-5}

LOADGEN=$BUILD_DIR/bench/berth-loadgen

if [[ -z ${BERTH_RAY_LOOPBACK_NS:-} ]]; then
  [[ -x $LOADGEN ]] || { echo "compare.sh: no $LOADGEN; build it (cmake --build $BUILD_DIR --target berth-loadgen)" >&2; exit 1; }
  if ! "$VENV/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "ray==$RAY_VERSION"
  fi
  export BUILD_DIR OUT BERTH_RAY_VENV=$VENV NODES WORKLOADS CONCURRENCY DURATION BERTH_RAY_LOOPBACK_NS=1
  exec unshare --user --map-root-user --net bash "$0" "$@"
fi
# Inside the namespace: bring lo up and make sure it is all there is.
ip link set lo up
others=$(ip -o link show | awk -F': ' '$2 != "lo" {print $2}')
[[ -z $others ]] || { echo "compare.sh: interfaces besides lo in the namespace: $others" >&2; exit 1; }
mkdir -p "$OUT"
"$LOADGEN" --mode real --raylets "$NODES" --state memory --workloads "$WORKLOADS" \
  --concurrency "$CONCURRENCY" --duration-s "$DURATION" --json "$OUT/berth.json"
"$VENV/bin/python" "$ROOT/bench/ray/ray_pg_bench.py" --nodes "$NODES" --workloads "$WORKLOADS" \
  --concurrency "$CONCURRENCY" --duration-s "$DURATION" --json "$OUT/ray.json"
python3 - "$OUT/berth.json" "$OUT/ray.json" <<'PY'
import json, sys
berth, ray = (json.load(open(p)) for p in sys.argv[1:3])
print(f"\n{berth['setup']}  vs  {ray['setup']}")
print(f"{'workload':<8} {'conc':>5} {'berth g/s':>10} {'ray g/s':>9} {'ratio':>7} {'berth p50':>10} {'ray p50':>9} {'berth p99':>10} {'ray p99':>9}")
ray_runs = {(r["workload"], r["concurrency"]): r for r in ray["runs"]}
for b in berth["runs"]:
    r = ray_runs.get((b["workload"], b["concurrency"]))
    if r is None:
        continue
    ratio = b["groups_per_second"] / r["groups_per_second"] if r["groups_per_second"] else float("inf")
    print(f"{b['workload']:<8} {b['concurrency']:>5} {b['groups_per_second']:>10.0f} {r['groups_per_second']:>9.0f} "
          f"{ratio:>6.1f}x {b['created_p50_ms']:>10.2f} {r['created_p50_ms']:>9.2f} "
          f"{b['created_p99_ms']:>10.2f} {r['created_p99_ms']:>9.2f}")
PY
