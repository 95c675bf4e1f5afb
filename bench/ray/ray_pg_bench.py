"""Ray's side of the loadgen comparison: the same placement group workloads
as berth-loadgen (one, pack3, spread8), through ray.util.placement_group on a
local multi-raylet Ray cluster (ray.cluster_utils.Cluster) with fake GPUs and
accelerator_type resources. Prints one line per run in berth-loadgen's
columns, and --json writes the runs for bench/ray/compare.sh.

Loopback only: run it inside a network namespace whose only interface is lo
(bench/ray/compare.sh does, with `unshare -rn`); there Ray can find no
address but 127.0.0.1. It refuses to start when other interfaces are visible
(--allow-other-interfaces to override) and checks that GCS and every raylet
registered on 127.0.0.1.

    unshare -rn bash -c 'ip link set lo up; python ray_pg_bench.py --nodes 8 --workloads one,pack3'
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

# Read by GCS and the raylets, which inherit this environment. No idle
# workers prestarted (num_cpus=64 per raylet would fork 64 Python workers on
# the driver's node; placement groups need none); no usage-stats upload.
for key, value in {"RAY_prestart_worker_first_driver": "0", "RAY_enable_worker_prestart": "0",
                   "RAY_USAGE_STATS_ENABLED": "0"}.items():
    os.environ.setdefault(key, value)

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.placement_group import placement_group, remove_placement_group  # noqa: E402

SHAPES = {
    "one": ([{"CPU": 1}], "PACK"),
    "pack3": ([{"CPU": 1}] * 3, "PACK"),
    "spread8": ([{"GPU": 1}] * 8, "STRICT_SPREAD"),
}


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run(workload, concurrency, duration_s):
    bundles, strategy = SHAPES[workload]
    created, cycles, failures = [], [], [0]
    lock = threading.Lock()
    end = time.monotonic() + duration_s

    def client():
        mine_created, mine_cycles = [], []
        while time.monotonic() < end:
            t0 = time.monotonic()
            pg = placement_group(bundles, strategy=strategy)
            try:
                ray.get(pg.ready(), timeout=20)
            except Exception:  # timed out: counted, removed, next
                with lock:
                    failures[0] += 1
                remove_placement_group(pg)
                continue
            t1 = time.monotonic()
            remove_placement_group(pg)
            mine_created.append((t1 - t0) * 1000)
            mine_cycles.append((time.monotonic() - t0) * 1000)
        with lock:
            created.extend(mine_created)
            cycles.extend(mine_cycles)

    start = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    return {
        "workload": workload, "concurrency": concurrency, "groups": len(cycles), "failures": failures[0],
        "seconds": seconds, "groups_per_second": len(cycles) / seconds,
        "created_p50_ms": percentile(created, 0.5), "created_p99_ms": percentile(created, 0.99),
        "created_p999_ms": percentile(created, 0.999), "cycle_p50_ms": percentile(cycles, 0.5),
        "cycle_p99_ms": percentile(cycles, 0.99),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--workloads", default="one,pack3,spread8")
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--duration-s", type=float, default=5)
    parser.add_argument("--json", default="")
    parser.add_argument("--allow-other-interfaces", action="store_true",
                        help="run even where interfaces besides lo are visible (Ray may then bind one)")
    args = parser.parse_args()

    others = [name for _, name in socket.if_nameindex() if name != "lo"]
    if others and not args.allow_other_interfaces:
        sys.exit(f"ray_pg_bench: interfaces besides lo are visible ({', '.join(others)}); run inside a "
                 "loopback-only network namespace (bench/ray/compare.sh does: unshare -rn)")

    # Object store: the minimum (75 MiB) plus a little, in /dev/shm, per raylet;
    # placement groups store no objects.
    node = {"num_cpus": 64, "num_gpus": args.gpus_per_node, "resources": {"accelerator_type:A10G": 1},
            "node_ip_address": "127.0.0.1", "object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    try:
        for _ in range(args.nodes - 1):
            cluster.add_node(**node)
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        cluster.wait_for_nodes()
        alive = [n for n in ray.nodes() if n["Alive"]]
        addresses = {cluster.address.rsplit(":", 1)[0]} | {n["NodeManagerAddress"] for n in alive}
        if addresses != {"127.0.0.1"} or len(alive) != args.nodes:
            sys.exit(f"ray_pg_bench: expected GCS and {args.nodes} raylets on 127.0.0.1, "
                     f"got {len(alive)} raylets on {sorted(addresses)}")
        print(f"ray {ray.__version__}: {args.nodes} raylets x {args.gpus_per_node} GPUs; {args.duration_s} s per run")
        print(f"{'workload':<8} {'conc':>5} {'groups':>8} {'failed':>8} {'seconds':>8} {'groups/s':>9} "
              f"{'crt_p50':>8} {'crt_p99':>8} {'crt_p999':>8} {'cyc_p50':>8} {'cyc_p99':>8}")
        runs = []
        for workload in args.workloads.split(","):
            for level in (int(c) for c in args.concurrency.split(",")):
                r = run(workload, level, args.duration_s)
                runs.append(r)
                print(f"{r['workload']:<8} {r['concurrency']:>5} {r['groups']:>8} {r['failures']:>8} "
                      f"{r['seconds']:>8.1f} {r['groups_per_second']:>9.0f} {r['created_p50_ms']:>8.2f} "
                      f"{r['created_p99_ms']:>8.2f} {r['created_p999_ms']:>8.2f} {r['cycle_p50_ms']:>8.2f} "
                      f"{r['cycle_p99_ms']:>8.2f}", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"setup": f"ray {ray.__version__}, {args.nodes} raylets", "runs": runs}, out, indent=1)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
