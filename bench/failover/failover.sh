#!/usr/bin/env bash
# Failover time of `berth up --heads 2`: a local cluster (2 nodes x 2 GPUs)
# with an active head and a standby on one state, a 2-rank job running;
# `kill -9` of the active head, then `berth status` is asked every 20 ms
# until it answers (through the standby, now active). Prints each round and
# the median, minimum and maximum; the job must still be RUNNING at attempt
# 0 after every failover. STORE etcd: the heads keep their state in a local
# 3-member etcd (`berth up --state-store etcd`) and take over when the
# active head's lease (5 s) lapses.
#
#   bench/failover/failover.sh BUILD_DIR [ROUNDS [STORE]]   (default 10, the local folder)
set -euo pipefail
BUILD=$(cd "$1" && pwd)
ROUNDS=${2:-10}
STORE_FLAGS=()
[[ -n ${3:-} ]] && STORE_FLAGS=(--state-store "$3")
BERTH=$BUILD/client/berth
HOME_DIR=$(mktemp -d)
export BERTH_HOME=$HOME_DIR
trap '"$BERTH" down >/dev/null 2>&1 || true; rm -rf "$HOME_DIR"' EXIT

free_port_pair() {  # a port P with P and P+1 free now
  python3 - <<'PY'
import socket
for _ in range(50):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    try:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", p)); b.bind(("127.0.0.1", p + 1))
        print(p); break
    except OSError:
        continue
PY
}

# The pid of the active head, checked to be the berth-head serving that
# address before it is signalled.
active_head_pid() {
  local address pid
  address=$("$BERTH" -o json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"]["address"])')
  pid=$(python3 - "$HOME_DIR/local/cluster.json" "$address" <<'PY'
import json, os, sys
state = json.load(open(sys.argv[1]))
for p in state["processes"]:
    if p["role"] != "head":
        continue
    try:
        argv = open(f"/proc/{p['pid']}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if os.path.basename(argv[0]) == b"berth-head" and ("127.0.0.1:" + sys.argv[2].rsplit(":", 1)[1]).encode() in argv:
        print(p["pid"])
PY
)
  [[ -n $pid ]] || { echo "failover.sh: no head process serves $address" >&2; exit 1; }
  echo "$pid"
}

JOB_FILE=$HOME_DIR/job.yaml
cat > "$JOB_FILE" <<'YAML'
name: failover
scaling: {num_workers: 2, use_gpu: true}
failure: {max_failures: 0}
entrypoint: {command: sleep, args: ["60"]}
YAML

times=()
for round in $(seq 1 "$ROUNDS"); do
  port=$(free_port_pair)
  "$BERTH" up --nodes 2 --gpus-per-node 2 --heads 2 --port "$port" "${STORE_FLAGS[@]}" >/dev/null
  job=$("$BERTH" submit "$JOB_FILE")
  for _ in $(seq 1 100); do
    "$BERTH" job "$job" | grep -q "RUNNING" && break
    sleep 0.1
  done
  pid=$(active_head_pid)
  kill -9 "$pid"
  start=$(date +%s%N)
  until "$BERTH" --timeout 1 status 2>/dev/null | grep -q " active"; do sleep 0.02; done
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  state=$("$BERTH" job "$job" | awk '/^state:/ {print $2} /^attempt:/ {print $2}' | paste -sd' ')
  echo "round $round: berth status answered ${ms} ms after kill -9 of the active head; job: $state"
  [[ $state == "RUNNING 0" ]] || { echo "failover.sh: the job is '$state', not RUNNING at attempt 0" >&2; exit 1; }
  times+=("$ms")
  "$BERTH" down >/dev/null
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {
  m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
  printf "failover over %d rounds: median %d ms, min %d ms, max %d ms\n", NR, m, a[1], a[NR] }'
