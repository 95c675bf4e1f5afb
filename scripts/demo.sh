#!/usr/bin/env bash
# `make demo`: a local cluster (two 4 x A10G nodes, one with 256Gi, and a
# 2 x T4 node), the train job of examples/demo.yaml followed to its end,
# the cluster's status, then `berth down`, which runs whatever happens.
# Exits non-zero unless the job SUCCEEDED.
set -euo pipefail
cd "$(dirname "$0")/.."
BERTH="${BUILD_DIR:-build}/client/berth"
# A cluster of its own, beside any other local cluster of this user.
export BERTH_HOME="$(mktemp -d /tmp/berth-demo-XXXXXX)"
unset BERTH_ADDRESS

section() { printf '\n=== %s\n' "$*"; }
trap 'section "berth down"; "$BERTH" down; rm -rf "$BERTH_HOME"' EXIT

section "berth up --node-spec scripts/demo-nodes.yaml --port 0"
"$BERTH" up --node-spec scripts/demo-nodes.yaml --port 0

section "berth submit examples/demo.yaml --wait"
status=0
"$BERTH" submit examples/demo.yaml --wait 90 || status=$?

section "berth status"
"$BERTH" status

exit "$status"
