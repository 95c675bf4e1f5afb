#!/usr/bin/env python3
"""Self-test of check_dashboard.py: it must pass on the repository and fail,
naming the problem, on copies broken one way at a time.

    test_check_dashboard.py REPO_ROOT [--promtool PROMTOOL]

Python standard library only.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_dashboard.py")
DASHBOARD = "deploy/grafana/berth-gpu-placement.json"
ALERTS = "deploy/prometheus/rules/berth-alerts.yml"
RECORDING = "deploy/prometheus/rules/berth-recording.yml"
K8S = "deploy/prometheus/prometheus-k8s.yml"


def replace(path, old, new):
    def mutate(root):
        full = os.path.join(root, path)
        with open(full) as f:
            text = f.read()
        if old not in text:
            raise AssertionError("self-test out of date: %r not in %s" % (old, path))
        with open(full, "w") as f:
            f.write(text.replace(old, new, 1))
    return mutate


def edit_dashboard(fn):
    def mutate(root):
        full = os.path.join(root, DASHBOARD)
        with open(full) as f:
            dash = json.load(f)
        fn(dash)
        with open(full, "w") as f:
            json.dump(dash, f, indent=2)
    return mutate


def panel(dash, title):
    for p in dash["panels"]:
        if p["title"] == title:
            return p
    raise AssertionError("self-test out of date: no panel %r" % title)


def set_key(obj, key, value):
    if value is None:
        del obj[key]
    else:
        obj[key] = value


# (name, mutation, text the failure must contain, needs promtool)
CASES = [
    ("undocumented metric in a panel",
     replace(DASHBOARD, "berth_gpu_instance_info{", "berth_gpu_instance_infoo{"),
     "panel 7 'GPU holders (node x GPU index)' target A: metric berth_gpu_instance_infoo is not documented", False),
    ("invalid JSON",
     replace(DASHBOARD, '"panels": [', '"panels": [,'), "not valid JSON", False),
    ("duplicate panel id",
     edit_dashboard(lambda d: set_key(d["panels"][1], "id", d["panels"][0]["id"])), "also used by panel", False),
    ("gridPos wider than the grid",
     edit_dashboard(lambda d: d["panels"][0]["gridPos"].update(w=30)), "outside the 24-column grid", False),
    ("gridPos not an integer",
     edit_dashboard(lambda d: d["panels"][0]["gridPos"].update(h="4")), "gridPos needs integer", False),
    ("overlapping panels",
     edit_dashboard(lambda d: d["panels"][1]["gridPos"].update(x=3)), "overlaps", False),
    ("missing refId",
     edit_dashboard(lambda d: set_key(d["panels"][0]["targets"][0], "refId", None)), "target #1: no refId", False),
    ("duplicate refId",
     edit_dashboard(lambda d: panel(d, "Infeasible gangs")["targets"][1].update(refId="A")),
     "refId A used twice", False),
    ("empty expr",
     edit_dashboard(lambda d: d["panels"][0]["targets"][0].update(expr=" ")), "empty expr", False),
    ("panel without datasource",
     edit_dashboard(lambda d: set_key(d["panels"][0], "datasource", None)), "no datasource", False),
    ("hard-wired datasource",
     edit_dashboard(lambda d: d["panels"][0].update(datasource={"type": "prometheus", "uid": "P1809F7CD0C75ACF3"})),
     "is hard-wired", False),
    ("missing uid",
     edit_dashboard(lambda d: set_key(d, "uid", None)), "uid must be", False),
    ("undefined template variable",
     replace(DASHBOARD, 'berth_pending_bundles{accelerator_type=~\\"$accelerator_type|any',
             'berth_pending_bundles{accelerator_type=~\\"$acc_type|any'), "undefined variable $acc_type", False),
    ("undocumented metric in a template variable",
     replace(DASHBOARD, "label_values(berth_resource_capacity, accelerator_type)\"",
             "label_values(berth_resources_capacity, accelerator_type)\""),
     "variable $accelerator_type: metric berth_resources_capacity is not documented", False),
    ("undefined recording rule",
     replace(DASHBOARD, "berth:placement_latency_seconds:p50_5m", "berth:placement_latency_seconds:p95_5m"),
     "recording rule berth:placement_latency_seconds:p95_5m is not defined", False),
    ("undocumented label",
     replace(DASHBOARD, "berth_train_job_restarts_total[30m]", 'berth_train_job_restarts_total{job_id=\\"x\\"}[30m]'),
     "berth_train_job_restarts_total has no label 'job_id'", False),
    ("label value outside the documented set",
     replace(DASHBOARD, 'berth_nodes{state=\\"DEAD\\"}', 'berth_nodes{state=\\"Dead\\"}'),
     "'Dead' is not one of ALIVE, DEAD, DRAINING", False),
    ("histogram without _bucket",
     replace(ALERTS, "rate(berth_placement_decision_seconds_bucket[5m])", "rate(berth_placement_decision_seconds[5m])"),
     "berth_placement_decision_seconds is a histogram", False),
    ("undocumented metric in an alert",
     replace(ALERTS, "increase(berth_train_job_restarts_total[30m])", "increase(berth_train_job_restart_total[30m])"),
     "alert BerthTrainJobRestarting: metric berth_train_job_restart_total is not documented", False),
    ("undocumented metric in a recording rule",
     replace(RECORDING, "sum by (accelerator_type) (berth_pending_gpus)", "sum by (accelerator_type) (berth_pending_gpu)"),
     "record berth:pending_gpus:by_accelerator_type: metric berth_pending_gpu is not documented", False),
    ("badly named recording rule",
     replace(RECORDING, "record: berth:pending_bundles:by_accelerator_type", "record: berth_pending_bundles_by_type"),
     "names must look like berth:<metric>:<operation>", False),
    ("alert without for and severity",
     replace(ALERTS, "        for: 15m\n        labels:\n          severity: warning\n",
             "        labels:\n          severity: page\n"),
     "alert BerthGpusAllocatedIdle: alert has no `for:`", False),
    ("alert without description",
     replace(ALERTS, "          description: >-\n            Node {{ $labels.node }}",
             "          details: >-\n            Node {{ $labels.node }}"),
     "alert BerthGpusAllocatedIdle: missing description annotation", False),
    ("target label clashing with a metric label",
     replace(K8S, "target_label: kubernetes_node", "target_label: node"),
     "target label 'node' clashes", False),
    ("PromQL that does not parse",
     replace(DASHBOARD, "sum by (state) (berth_train_jobs)", "sum by (state) (berth_train_jobs"),
     "panel 17 'Train jobs by state' target A: PromQL does not parse", True),
]


def copy_tree(repo, dest):
    os.makedirs(os.path.join(dest, "docs"))
    shutil.copy(os.path.join(repo, "docs", "metrics.yaml"), os.path.join(dest, "docs"))
    for sub in ("deploy/grafana", "deploy/prometheus"):
        shutil.copytree(os.path.join(repo, sub), os.path.join(dest, sub),
                        ignore=shutil.ignore_patterns("__pycache__"))


def run_checker(root, promtool):
    cmd = [sys.executable, CHECKER, root] + (["--promtool", promtool] if promtool else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return proc.returncode, proc.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo_root")
    ap.add_argument("--promtool")
    args = ap.parse_args()
    repo = os.path.abspath(args.repo_root)
    failures = skipped = 0
    rc, out = run_checker(repo, args.promtool)
    if rc != 0:
        print("FAIL: the checker rejects the repository itself:\n" + out)
        return 1
    for name, mutate, expected, needs_promtool in CASES:
        if needs_promtool and not args.promtool:
            print("skip: %s (needs --promtool)" % name)
            skipped += 1
            continue
        with tempfile.TemporaryDirectory(prefix="berth-check-dashboard-") as tmp:
            copy_tree(repo, tmp)
            mutate(tmp)
            rc, out = run_checker(tmp, args.promtool)
        if rc == 0 or expected not in out:
            failures += 1
            print("FAIL: %s: expected exit 1 and %r, got exit %d:\n%s" % (name, expected, rc, out))
        else:
            print("ok: %s" % name)
    print("%d of %d cases passed, %d skipped" % (len(CASES) - failures - skipped, len(CASES), skipped))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
