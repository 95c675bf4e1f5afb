#!/usr/bin/env python3
"""Writes a Prometheus file_sd target file for a running berth cluster.

    berth_file_sd.py [--berth BERTH] [--address HEAD] [--cluster NAME] OUT
    berth_file_sd.py --status-json FILE --nodes-json FILE [--cluster NAME] OUT

`berth up` and `--metrics-listen HOST:0` pick free ports, so a static scrape
config cannot know them. This asks the head (`berth -o json status` for the
head's metrics address, `berth -o json nodes` for the raylets') and writes
the file_sd JSON that the berth-file-sd job of prometheus.yml reads, e.g.

    deploy/prometheus/berth_file_sd.py deploy/prometheus/targets/local.json

Targets get `component` (head | raylet) and, with --cluster, `cluster`;
never `node`, which the berth metrics carry themselves. DEAD nodes and nodes
without a metrics address are left out. Addresses are written as the daemons
report them: one bound to 127.0.0.1 is only reachable from its own machine. OUT is replaced atomically, so
Prometheus never reads half a file; `-` prints to stdout. Run it again (or
from cron / `watch`) when nodes join or leave. Python standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def berth_json(berth, address, command):
    cmd = [berth, "-o", "json"] + (["--address", address] if address else []) + [command]
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, universal_newlines=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("berth_file_sd: %s failed: %s" % (" ".join(cmd), e))
    return json.loads(out)


def target_groups(status, nodes, cluster=None):
    extra = {"cluster": cluster} if cluster else {}
    groups = []
    head = status.get("metrics_address")
    if head:
        groups.append({"targets": [head], "labels": dict(component="head", **extra)})
    raylets = sorted(n["metrics_address"] for n in nodes.get("nodes", [])
                     if n.get("metrics_address") and n.get("state") not in ("NODE_STATE_DEAD", "DEAD"))
    if raylets:
        groups.append({"targets": raylets, "labels": dict(component="raylet", **extra)})
    return groups


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".berth-file-sd-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="target file to write, or - for stdout")
    ap.add_argument("--berth", default="berth", help="the berth CLI (default: berth on PATH)")
    ap.add_argument("--address", help="head address (default: the CLI's: $BERTH_ADDRESS or the local cluster)")
    ap.add_argument("--cluster", help="value of a `cluster` label on every target")
    ap.add_argument("--status-json", help="read `berth -o json status` output from this file")
    ap.add_argument("--nodes-json", help="read `berth -o json nodes` output from this file")
    args = ap.parse_args()
    if bool(args.status_json) != bool(args.nodes_json):
        ap.error("--status-json and --nodes-json go together")
    if args.status_json:
        with open(args.status_json) as f:
            status = json.load(f)
        with open(args.nodes_json) as f:
            nodes = json.load(f)
    else:
        status = berth_json(args.berth, args.address, "status")
        nodes = berth_json(args.berth, args.address, "nodes")
    groups = target_groups(status, nodes, args.cluster)
    if not groups:
        print("berth_file_sd: warning: the cluster reports no metrics addresses "
              "(daemons started without --metrics-listen?)", file=sys.stderr)
    text = json.dumps(groups, indent=2) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_atomically(args.out, text)
        print("berth_file_sd: wrote %d target(s) to %s"
              % (sum(len(g["targets"]) for g in groups), args.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
