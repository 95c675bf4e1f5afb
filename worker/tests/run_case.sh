#!/usr/bin/env bash
# Multi-process tests of berth-worker on 127.0.0.1 (driven by ctest as
# Worker<Case>): usage run_case.sh CASE BERTH_WORKER
#   TwoRanks     2 ranks by hand with only the env contract (rank 0 hosts the
#                store): both exit 0, loss falls >= 10x, equal hashes.
#   Trainer      trainer + 2 ranks on its store (TORCHELASTIC_USE_AGENT_STORE):
#                a checkpoint file appears, the trainer exits 0.
#   CrashResume  rank 1 crashes (exit 3) at step 25; a new trainer resumes
#                the ranks from the latest checkpoint and they end with the
#                hash of an uninterrupted run; so does a resume by hand.
set -euo pipefail

CASE=$1
WORKER=$2
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL ($CASE): $*" >&2
  for log in "$WORK"/*.log; do
    [[ -e $log ]] || continue
    echo "---- $(basename "$log")" >&2
    tail -n 30 "$log" >&2
  done
  exit 1
}

# A port no socket uses, below the kernel's ephemeral range: a port picked
# inside that range can be taken by any test's outgoing connection before
# rank 0 binds it (seen in CI: EADDRINUSE on 34638). Ranks retry connecting.
free_port() {
  local low port
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  while :; do
    port=$((20000 + RANDOM % (low - 20000)))
    if [[ -z $(ss -Htan "sport = :$port" 2>/dev/null) ]]; then
      echo "$port"
      return
    fi
  done
}

# run_ranks NAME WORLD_SIZE PORT [train flags...]: starts every rank in the
# background, logs in $WORK/NAME-rank<r>.log, pids in RANK_PIDS.
run_ranks() {
  local name=$1 world=$2 port=$3
  shift 3
  RANK_PIDS=()
  for ((r = 0; r < world; r++)); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$world RANK=$r \
      timeout 60 "$WORKER" train "$@" >"$WORK/$name-rank$r.log" 2>&1 &
    RANK_PIDS+=($!)
    PIDS+=($!)
  done
}

# expect_exit PID CODE WHAT
expect_exit() {
  local code=0
  wait "$1" || code=$?
  [[ $code == "$2" ]] || fail "$3 exited $code, want $2"
}

# The hash a rank printed ("rank <r> params <hash>").
hash_of() { awk '/^rank [0-9]+ params /{print $4}' "$1"; }

expect_same_hashes() {
  local first
  first=$(hash_of "$1")
  [[ -n $first ]] || fail "no hash in $1"
  for log in "$@"; do
    [[ $(hash_of "$log") == "$first" ]] || fail "hashes differ: $(cat "$@" | grep params)"
  done
  echo "$first"
}

# wait_for COMMAND...: until it succeeds, for at most 20 s.
wait_for() {
  for _ in $(seq 200); do
    "$@" 2>/dev/null && return
    sleep 0.1
  done
  fail "timed out waiting for: $*"
}

# start_trainer NAME PORT [flags...]; pid in TRAINER_PID. Returns once its
# store is up, as the head starts it before the ranks.
start_trainer() {
  local name=$1 port=$2
  shift 2
  timeout 60 "$WORKER" trainer --port "$port" --world-size 2 --checkpoint-dir "$WORK/ckpt" "$@" \
    >"$WORK/$name.log" 2>&1 &
  TRAINER_PID=$!
  PIDS+=($!)
  wait_for grep -q '^store on port' "$WORK/$name.log"
}

case_two_ranks() {
  run_ranks byhand 2 "$(free_port)"
  expect_exit "${RANK_PIDS[0]}" 0 "rank 0"
  expect_exit "${RANK_PIDS[1]}" 0 "rank 1"
  grep -q '^backend: ' "$WORK/byhand-rank0.log" || fail "no backend line"
  expect_same_hashes "$WORK"/byhand-rank*.log >/dev/null
  local losses
  losses=$(awk '/^step [0-9]+ loss /{print $4}' "$WORK/byhand-rank0.log")
  awk -v first="$(head -n1 <<<"$losses")" -v last="$(tail -n1 <<<"$losses")" \
    'BEGIN { printf "loss %g -> %g\n", first, last; exit !(first >= 10 * last) }' ||
    fail "loss did not fall 10x"
}

case_trainer() {
  local port
  port=$(free_port)
  start_trainer trainer "$port"
  export TORCHELASTIC_USE_AGENT_STORE=True
  run_ranks agent 2 "$port" --steps 40 --checkpoint-every 20
  expect_exit "${RANK_PIDS[0]}" 0 "rank 0"
  expect_exit "${RANK_PIDS[1]}" 0 "rank 1"
  expect_exit "$TRAINER_PID" 0 "trainer"
  [[ -s $WORK/ckpt/step-40.pt ]] || fail "no checkpoint step-40.pt"
  grep -q '^all 2 ranks done: params ' "$WORK/trainer.log" || fail "trainer did not judge the end"
  expect_same_hashes "$WORK"/agent-rank*.log >/dev/null
}

case_crash_resume() {
  local steps=(--steps 60 --checkpoint-every 10) reference resumed
  run_ranks reference 2 "$(free_port)" "${steps[@]}"
  expect_exit "${RANK_PIDS[0]}" 0 "reference rank 0"
  expect_exit "${RANK_PIDS[1]}" 0 "reference rank 1"
  reference=$(expect_same_hashes "$WORK"/reference-rank*.log)

  export TORCHELASTIC_USE_AGENT_STORE=True BERTH_TEST_CRASH_AT_STEP=25
  export BERTH_TEST_CRASH_ONCE_FILE=$WORK/crashed-once
  local port
  port=$(free_port)
  start_trainer trainer1 "$port"
  run_ranks crash 2 "$port" "${steps[@]}"
  expect_exit "${RANK_PIDS[1]}" 3 "crashing rank 1"
  wait "${RANK_PIDS[0]}" && fail "rank 0 survived its peer's crash"
  wait_for test -e "$WORK/ckpt/step-20.pt"
  kill -TERM "$TRAINER_PID"
  expect_exit "$TRAINER_PID" 143 "trainer after SIGTERM"

  port=$(free_port)
  start_trainer trainer2 "$port" --resume-from "$WORK/ckpt/step-20.pt"
  run_ranks resumed 2 "$port" "${steps[@]}"
  expect_exit "${RANK_PIDS[0]}" 0 "resumed rank 0"
  expect_exit "${RANK_PIDS[1]}" 0 "resumed rank 1"
  expect_exit "$TRAINER_PID" 0 "resuming trainer"
  grep -q '^step 21 loss ' "$WORK/resumed-rank0.log" || fail "did not resume at step 21"
  resumed=$(expect_same_hashes "$WORK"/resumed-rank*.log)
  [[ $resumed == "$reference" ]] || fail "resumed run ended at $resumed, uninterrupted at $reference"

  unset TORCHELASTIC_USE_AGENT_STORE
  run_ranks byhand 2 "$(free_port)" "${steps[@]}" --resume-from "$WORK/ckpt/step-20.pt"
  expect_exit "${RANK_PIDS[0]}" 0 "rank 0 resumed by hand"
  expect_exit "${RANK_PIDS[1]}" 0 "rank 1 resumed by hand"
  [[ $(expect_same_hashes "$WORK"/byhand-rank*.log) == "$reference" ]] ||
    fail "resume by hand did not end at $reference"
}

case $CASE in
  TwoRanks) case_two_ranks ;;
  Trainer) case_trainer ;;
  CrashResume) case_crash_resume ;;
  *) fail "unknown case $CASE" ;;
esac
echo "PASS ($CASE)"
