#!/usr/bin/env bash
# Ray Train and berth side by side on this machine: the same TorchTrainer
# program (fit_bench.py) at each worker count, once on a Ray cluster (`ray
# start --head`, Ray Train 2.60 from PyPI) and once on a berth cluster
# (`berth up --nodes 2`), both with 16 CPUs and already up, in turns, REPEAT
# times; without a failure (fit() wall time, time to the first report) and
# with rank 1 raising once (time from the raise to the restarted attempt's
# first report). Prints the medians and berth/Ray ratios as a Markdown
# table; every run's JSON line under OUT.
#
# The driver is PyPI torch 2.x's Python (scripts/torch2-venv.sh --with-ray)
# with berth's SDK pip-installed beside it. Loopback only: everything after
# the installs runs in a new user + network namespace whose only interface
# is lo, as bench/ray/compare.sh does.
#
#   bench/ray_train/compare.sh        (WORKERS=2,4,8 REPEAT=3 BUILD_DIR=build OUT=BUILD_DIR/ray-train-compare)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
OUT=${OUT:-$BUILD_DIR/ray-train-compare}
WORKERS=${WORKERS:-2,4,8}
REPEAT=${REPEAT:-3}

if [[ -z ${BERTH_RAY_LOOPBACK_NS:-} ]]; then
  PY=$(bash "$ROOT/scripts/torch2-venv.sh" --with-ray)
  rm -rf "$OUT" && mkdir -p "$OUT"
  "$PY" -m pip install -q --disable-pip-version-check --target "$OUT/sdk" "$ROOT/python" >"$OUT/pip.log" 2>&1 ||
    { tail -5 "$OUT/pip.log" >&2; exit 1; }
  export BUILD_DIR OUT WORKERS REPEAT PY BERTH_RAY_LOOPBACK_NS=1
  exec unshare --user --map-root-user --net bash "$0" "$@"
fi
ip link set lo up
others=$(ip -o link show | awk -F': ' '$2 != "lo" {print $2}')
[[ -z $others ]] || { echo "compare.sh: interfaces besides lo in the namespace: $others" >&2; exit 1; }

export BERTH_HOME=$OUT/berth-home RAY_TMPDIR=$OUT/ray-tmp PYTHONPATH=$OUT/sdk
mkdir -p "$BERTH_HOME" "$RAY_TMPDIR" "$OUT/storage"
RAY=$(dirname "$PY")/ray
cleanup() {
  "$BUILD_DIR/client/berth" down >/dev/null 2>&1 || true
  "$RAY" stop --force >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$BUILD_DIR/client/berth" up --nodes 2 --port 0 >"$OUT/berth-up.log" 2>&1
"$RAY" start --head --num-cpus 16 --include-dashboard=false --temp-dir "$RAY_TMPDIR" >"$OUT/ray-start.log" 2>&1

for ((r = 1; r <= REPEAT; r++)); do
  for n in ${WORKERS//,/ }; do
    for fail in "" --fail; do
      for system in berth ray; do
        (cd "$OUT/storage" && timeout 600 "$PY" "$ROOT/bench/ray_train/fit_bench.py" --system "$system" \
           --workers "$n" $fail --storage "$OUT/storage" 2>>"$OUT/$system.log" | tail -1 >>"$OUT/runs.jsonl") ||
          echo "compare.sh: $system, $n workers $fail failed (see $OUT/$system.log)" >&2
      done
    done
  done
done

"$PY" - "$OUT/runs.jsonl" "$(nproc)" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
def median(system, n, fail, key):
    values = [r[key] for r in runs if (r["system"], r["workers"], r["fail"]) == (system, n, fail) and r[key] is not None]
    return (statistics.median(values), len(values)) if values else (None, 0)
print(f"Ray Train 2.60 (ray start --head --num-cpus 16) vs berth (berth up --nodes 2, 16 CPUs), "
      f"{sys.argv[2]} cores, Gloo; medians, seconds\n")
print("| workers | measure | Ray | berth | berth / Ray | runs |")
print("|---|---|---|---|---|---|")
for n in sorted({r["workers"] for r in runs}):
    for label, fail, key in (("fit() wall time", False, "fit_s"), ("fit() to first report", False, "first_report_s"),
                             ("raise to the restarted attempt's first report", True, "recovery_s")):
        (ray, ray_n), (berth, berth_n) = median("ray", n, fail, key), median("berth", n, fail, key)
        ratio = f"{berth / ray:.2f}" if ray and berth else "-"
        show = lambda v: f"{v:.2f}" if v is not None else "-"
        print(f"| {n} | {label} | {show(ray)} | {show(berth)} | {ratio} | {min(ray_n, berth_n)} |")
PY
