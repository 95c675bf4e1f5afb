#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, BERTH_FUZZ=ON) and runs
# each on a copy of its seed corpus (tests/fuzz/corpus/<target>/) for SECONDS.
# Fails on any crash, leak, timeout, out-of-memory or sanitizer report, after
# printing a summary (executions, coverage) per target. Logs and any crashing
# inputs stay under BUILD_DIR/fuzz-runs/<target>/.
#
#   tests/fuzz/run_fuzzers.sh [BUILD_DIR] [SECONDS]    (default: build-fuzz 60)
#   FUZZERS="placement_fuzzer" tests/fuzz/run_fuzzers.sh    (a subset)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=$(realpath -m "${1:-$ROOT/build-fuzz}")
SECONDS_EACH=${2:-60}
JOBS=${JOBS:-$(nproc)}
read -r -a FUZZERS <<<"${FUZZERS:-job_file_fuzzer scaling_config_fuzzer placement_fuzzer head_request_fuzzer}"

start=$(date +%s)
mkdir -p "$BUILD_DIR"
if ! { cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_COMPILER=clang++ -DBERTH_FUZZ=ON -DBERTH_WITH_TORCH=OFF &&
       cmake --build "$BUILD_DIR" -j "$JOBS" --target berth_fuzzers; } >"$BUILD_DIR/fuzz-build.log" 2>&1; then
  grep -E -A10 'error|FAILED' "$BUILD_DIR/fuzz-build.log" | head -60 >&2 || tail -40 "$BUILD_DIR/fuzz-build.log" >&2
  echo "fuzz: build failed; log $BUILD_DIR/fuzz-build.log" >&2
  exit 1
fi
echo "fuzz: configure + build took $(($(date +%s) - start)) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
RUNS="$BUILD_DIR/fuzz-runs"
rm -rf "$RUNS"
failed=()
summary=()
for f in "${FUZZERS[@]}"; do
  dir="$RUNS/$f"
  mkdir -p "$dir/corpus"
  cp -r "$ROOT/tests/fuzz/corpus/$f/." "$dir/corpus/"
  # A runaway input should hit -timeout (quick report) before the RSS limit:
  # ASan's report for the latter profiles the whole heap and can take minutes.
  args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=3072 -max_len=4096 -print_final_stats=1
        -artifact_prefix="$dir/")
  [[ -f "$ROOT/tests/fuzz/$f.dict" ]] && args+=(-dict="$ROOT/tests/fuzz/$f.dict")
  echo "fuzz: $f for ${SECONDS_EACH} s"
  rc=0
  timeout -s KILL $((SECONDS_EACH + 300)) \
    "$BUILD_DIR/tests/fuzz/$f" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  # The last status line: "#N  DONE  cov: C ft: F corp: U/S ...".
  status_line=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$status_line")
  artifacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
  result=ok
  if [[ $rc -ne 0 || -n "$artifacts" ]] ||
     grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant failed' "$dir/log"; then
    result=FAILED
    failed+=("$f")
    echo "fuzz: $f FAILED (exit $rc); log $dir/log" >&2
    grep -E -m1 -A30 'ERROR: |runtime error:|invariant failed' "$dir/log" >&2 || tail -30 "$dir/log" >&2
    [[ -n "$artifacts" ]] && echo "fuzz: reproduce with $BUILD_DIR/tests/fuzz/$f $artifacts" >&2
  fi
  summary+=("$(printf '%-22s %-6s %10s execs %6s cov %7s ft %6s corpus' "$f" "$result" \
    "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")")
done

echo "fuzz: summary (${SECONDS_EACH} s each)"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#FUZZERS[@]} passed, 0 failed"
