"""Kubernetes quantities and helpers over rendered objects (pod specs, labels, selectors, flags).
"""

import os
import re
from decimal import Decimal, InvalidOperation


_SUFFIX = {
    "": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]{0,2})$")


def quantity(value):
    """A Kubernetes quantity ("44", "176Gi", "500m", 4) as a Decimal, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    m = _QUANTITY.match(str(value).strip())
    if not m:
        return None
    number, suffix = m.groups()
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number + suffix)
        if suffix not in _SUFFIX:
            return None
        return Decimal(number) * Decimal(_SUFFIX[suffix])
    except InvalidOperation:
        return None


# --- helpers over rendered objects -----------------------------------------

def name_of(obj):
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def pod_spec(obj):
    """The pod template spec of a workload, or None."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return (spec.get("template") or {}).get("spec") or {}
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    if kind == "Pod":
        return spec
    return None


def pod_labels(obj):
    if obj.get("kind") == "Pod":
        return (obj.get("metadata") or {}).get("labels") or {}
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}


def all_containers(spec):
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def selector_matches(selector, labels):
    """A LabelSelector (matchLabels/matchExpressions) against a label map."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def parse_flags(args):
    """--name=value / --name value / --switch from a container's args."""
    flags = {}
    args = [str(a) for a in args or []]
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                k, v = a[2:], args[i + 1]
                i += 1
            else:
                k, v = a[2:], True
            flags.setdefault(k, []).append(v)
        i += 1
    return flags


def one_flag(flags, name):
    values = flags.get(name)
    return None if not values else values[-1]


def port_of(address):
    """The port of HOST:PORT, as an int, or None."""
    m = re.match(r"^(?:\[[^\]]*\]|[^:]*):(\d+)$", str(address or ""))
    return int(m.group(1)) if m else None


def binary_of(container):
    """The berth binary a container runs (behind tini), or None."""
    command = [str(c) for c in container.get("command") or []]
    if command[:2] == ["/usr/bin/tini", "--"]:
        command = command[2:]
    if command and command[0].startswith("/usr/local/bin/"):
        return os.path.basename(command[0])
    return None


def named_ports(container):
    return {p.get("name"): p.get("containerPort") for p in container.get("ports") or [] if p.get("name")}
