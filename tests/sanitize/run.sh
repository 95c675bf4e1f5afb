#!/usr/bin/env bash
# Runs the tests under sanitizers (clang; Debian's gRPC, protobuf and absl
# stay uninstrumented):
#   asan  ASan+UBSan build in build-asan; ctest of the unit and integration
#         tests. SCOPE=full (default) builds everything, the torch worker
#         included, and runs every test but the offline deploy checks;
#         SCOPE=ci (CI's time) builds without the torch worker and runs the
#         unit tests and control_plane_test (real head and raylet processes).
#   tsan  TSan build in build-tsan of the head, the raylet and the head-side
#         tests; runs control_plane_test (real head and raylet processes) and
#         the unit tests of the head's layers (placement, auth, train,
#         scheduler: BUILD_DIR/unit_tests.txt lists them by folder).
# Every sanitizer report fails the run, including those of the berth-head and
# berth-raylet processes the tests start (reports go to per-process logs
# under BUILD_DIR/sanitizer-logs/, checked after ctest).
#
#   tests/sanitize/run.sh [asan|tsan|all]       (default all)
#   SCOPE=ci tests/sanitize/run.sh asan
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WHAT=${1:-all}
SCOPE=${SCOPE:-full}
JOBS=${JOBS:-$(nproc)}
ASAN_DIR=${ASAN_DIR:-$ROOT/build-asan}
TSAN_DIR=${TSAN_DIR:-$ROOT/build-tsan}
SUPP="$ROOT/tests/sanitize"
failed=0

now() { date +%s; }

# configure DIR SANITIZER [cmake args...]
configure() {
  local dir=$1 sanitizer=$2
  shift 2
  # -O1: sanitizers want some optimization; more only costs build time here.
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DBERTH_SANITIZE="$sanitizer" "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; return 1; }
}

# build DIR [targets...]
build() {
  local dir=$1
  shift
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  if ! cmake --build "$dir" -j "$JOBS" "${targets[@]}" >"$dir/build.log" 2>&1; then
    grep -E -A12 'error|FAILED' "$dir/build.log" | head -80 >&2 || tail -40 "$dir/build.log" >&2
    echo "sanitize: build in $dir failed; log $dir/build.log" >&2
    return 1
  fi
}

# check_logs DIR NAME: fails if any process left a sanitizer report.
check_logs() {
  local logs
  logs=$(find "$1/sanitizer-logs" -type f -size +0 2>/dev/null | sort)
  if [[ -n "$logs" ]]; then
    echo "sanitize: $2 reports in $(wc -l <<<"$logs") process log(s):" >&2
    for f in $logs; do
      echo "--- $f" >&2
      head -60 "$f" >&2
    done
    return 1
  fi
}

# tests_of DIR EXE...: a ctest -I list of the tests that run those
# executables (gtest tests are listed one per test case).
tests_of() {
  local dir=$1
  shift
  ctest --test-dir "$dir" --show-only=json-v1 | python3 -c '
import json, os, sys
exes = set(sys.argv[1:])
tests = json.load(sys.stdin)["tests"]
picked = [str(i + 1) for i, t in enumerate(tests)
          if os.path.basename((t.get("command") or [""])[0]) in exes]
if not picked:
    sys.exit("sanitize: no tests found for " + " ".join(sorted(exes)))
print("0,0,0," + ",".join(picked))' "$@"
}

sanitizer_env() {
  local logs=$1
  # One log_path for all: TSan reads UBSAN_OPTIONS too.
  export ASAN_OPTIONS="detect_leaks=1:log_path=$logs/report"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/report"
  export TSAN_OPTIONS="suppressions=$SUPP/tsan.supp:log_path=$logs/report:second_deadlock_stack=1"
}

run_asan() {
  local start built tested rc=0
  start=$(now)
  mkdir -p "$ASAN_DIR"
  if [[ $SCOPE == ci ]]; then
    configure "$ASAN_DIR" address -DBERTH_WITH_TORCH=OFF
    # The unit tests (one executable each) and control_plane_test; the other
    # integration tests (cli_e2e_test: `berth up` needs the torch worker) run
    # in SCOPE=full.
    local exes
    local integration
    integration=$(sed -n 's/^ *add_executable(\([A-Za-z0-9_]*_test\) .*/\1/p' \
      "$ROOT/tests/integration/CMakeLists.txt" | grep -vx control_plane_test | paste -sd'|')
    exes=$(ninja -C "$ASAN_DIR" -t targets all | sed -n 's/^\([A-Za-z0-9_]*_test\): phony$/\1/p' |
      grep -vE "^(${integration:-none}|chaos_test)\$" | tr '\n' ' ')
    build "$ASAN_DIR" $exes berth berth-head berth-raylet
    built=$(now)
    local select=(-I "$(tests_of "$ASAN_DIR" $exes)")
  else
    configure "$ASAN_DIR" address -DBERTH_WITH_TORCH=ON
    build "$ASAN_DIR"
    built=$(now)
    # Everything but the offline checks of deploy/ (promtool, kubectl-free
    # manifest checks), which run no berth code.
    local select=(-LE deploy)
  fi
  echo "sanitize: asan ($SCOPE) build took $((built - start)) s"
  rm -rf "$ASAN_DIR/sanitizer-logs"
  mkdir -p "$ASAN_DIR/sanitizer-logs"
  (sanitizer_env "$ASAN_DIR/sanitizer-logs"
   ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$JOBS" "${select[@]}") || rc=$?
  check_logs "$ASAN_DIR" ASan/UBSan/LSan || rc=1
  tested=$(now)
  echo "sanitize: asan ($SCOPE) tests took $((tested - built)) s"
  [[ $rc -eq 0 ]] || { echo "sanitize: asan FAILED" >&2; failed=1; }
}

run_tsan() {
  local start built tested rc=0
  start=$(now)
  mkdir -p "$TSAN_DIR"
  configure "$TSAN_DIR" thread -DBERTH_WITH_TORCH=OFF
  # The unit tests of the head's layers (placement core, auth, train spec,
  # node and placement group managers, store, metrics).
  local exes
  exes="$(awk '$1 ~ /^(placement|auth|train|scheduler)$/ {print $2}' "$TSAN_DIR/unit_tests.txt" |
    tr '\n' ' ')control_plane_test"
  build "$TSAN_DIR" $exes berth-head berth-raylet
  built=$(now)
  echo "sanitize: tsan build took $((built - start)) s"
  rm -rf "$TSAN_DIR/sanitizer-logs"
  mkdir -p "$TSAN_DIR/sanitizer-logs"
  (sanitizer_env "$TSAN_DIR/sanitizer-logs"
   ctest --test-dir "$TSAN_DIR" --output-on-failure -j "$JOBS" -I "$(tests_of "$TSAN_DIR" $exes)") || rc=$?
  check_logs "$TSAN_DIR" TSan || rc=1
  tested=$(now)
  echo "sanitize: tsan tests took $((tested - built)) s"
  [[ $rc -eq 0 ]] || { echo "sanitize: tsan FAILED" >&2; failed=1; }
}

case "$WHAT" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
exit $failed
