"""The autoscaler's config: its pools against the raylet Deployments and the binary's flags."""

import re

from manifest_checks.report import error
from manifest_checks.objects import quantity

# placement/resource_set.h kTopologyLabels: the berth.io/ labels a node may carry.
TOPOLOGY_LABELS = {"berth.io/topology-block", "berth.io/topology-rack", "berth.io/nvlink-domain"}

POOL_KEYS = {"name", "accelerator_type", "gpus", "cpus", "memory", "labels", "min_nodes", "max_nodes",
             "idle_timeout_s", "deployment"}


def check_autoscaler_config(where, config, namespace=None):
    """The autoscaler.yaml format; returns the pools (possibly empty)."""
    if not isinstance(config, dict):
        error(where, "the config is not a mapping")
        return []
    for k in config:
        if k not in ("provider", "pools"):
            error(where, f"{k}: unknown key (allowed: provider, pools)")
    provider = config.get("provider")
    ptype = None
    if not isinstance(provider, dict):
        error(where, "provider: required mapping")
    else:
        ptype = provider.get("type")
        if ptype == "kubernetes":
            for k in provider:
                if k not in ("type", "namespace"):
                    error(where, f"provider.{k}: unknown key for the kubernetes provider")
            if namespace is not None and provider.get("namespace") != namespace:
                error(where, f"provider.namespace is {provider.get('namespace')!r}, but the raylet Deployments "
                             f"are in {namespace!r}")
        elif ptype == "command":
            for k in provider:
                if k not in ("type", "command"):
                    error(where, f"provider.{k}: unknown key for the command provider")
            cmd = provider.get("command")
            if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)):
                error(where, "provider.command: a non-empty list of strings is required")
        else:
            error(where, f"provider.type: {ptype!r} (allowed: kubernetes, command)")
    pools = config.get("pools")
    if not isinstance(pools, list) or not pools:
        error(where, "pools: a non-empty list is required")
        return []
    names = set()
    good = []
    for i, pool in enumerate(pools):
        at = f"pools[{i}]"
        if not isinstance(pool, dict):
            error(where, f"{at}: not a mapping")
            continue
        for k in pool:
            if k not in POOL_KEYS:
                error(where, f"{at}.{k}: unknown key")
        name = pool.get("name")
        if not isinstance(name, str) or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name or ""):
            error(where, f"{at}.name: {name!r} is not a DNS label")
        elif name in names:
            error(where, f"{at}.name: pool {name!r} appears twice")
        names.add(name)
        for k in ("gpus", "min_nodes", "max_nodes"):
            if not isinstance(pool.get(k), int) or isinstance(pool.get(k), bool) or pool[k] < 0:
                error(where, f"{at}.{k}: a non-negative integer is required")
        if "idle_timeout_s" in pool and (not isinstance(pool["idle_timeout_s"], int) or pool["idle_timeout_s"] <= 0):
            error(where, f"{at}.idle_timeout_s: a positive integer is required")
        for k in ("cpus", "memory"):
            q = quantity(pool.get(k)) if k in pool else None
            if q is None or q <= 0:
                error(where, f"{at}.{k}: a positive quantity is required, got {pool.get(k)!r}")
        if isinstance(pool.get("min_nodes"), int) and isinstance(pool.get("max_nodes"), int) \
                and pool["min_nodes"] > pool["max_nodes"]:
            error(where, f"{at}: min_nodes {pool['min_nodes']} > max_nodes {pool['max_nodes']}")
        if isinstance(pool.get("gpus"), int) and pool["gpus"] > 0 and not pool.get("accelerator_type"):
            error(where, f"{at}: a GPU pool needs accelerator_type")
        labels = pool.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            error(where, f"{at}.labels: a map of strings is required")
        elif any(str(k).startswith("berth.io/") and k not in TOPOLOGY_LABELS for k in labels):
            error(where, f"{at}.labels: the berth.io/ prefix is reserved (the raylet refuses it), "
                  "the topology keys excepted")
        if ptype == "kubernetes" and not pool.get("deployment"):
            error(where, f"{at}.deployment: required with the kubernetes provider")
        good.append(pool)
    return good
