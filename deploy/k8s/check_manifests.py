#!/usr/bin/env python3
"""Offline checks of berth's deployment files, run by check_manifests.sh.

    check_manifests.py k8s --versions 1.29.0,1.32.0 NAME=RENDERED.yaml ...
    check_manifests.py selftest --versions 1.29.0
    check_manifests.py docker DOCKERFILE ...
    check_manifests.py systemd [--policy-only] UNIT ...

`k8s` validates the objects `kubectl kustomize` rendered for each
kustomization: every built-in kind against the Kubernetes OpenAPI schemas
bundled in the kubernetes-validate package (strict: unknown fields are
errors), the Prometheus Operator kinds (PodMonitor, ServiceMonitor) by their
required fields and by the pods and Services they select, and then what no
schema knows: that the pieces of one render agree with each other (ports,
probes, flags, the autoscaler's pools and the raylet Deployments, RBAC,
ConfigMap keys, the restricted Pod Security Standard).

Every problem is printed as `ERROR <where>: <what>`; the exit status is 1
when there was one.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
from decimal import Decimal, InvalidOperation

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

ERRORS = []


def error(where, what):
    ERRORS.append(f"{where}: {what}")
    print(f"ERROR {where}: {what}", flush=True)


def info(text):
    print(f"  {text}", flush=True)


# --- Kubernetes quantities --------------------------------------------------

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


# --- the flags each binary accepts ------------------------------------------

# The flags the deployment contract names for each binary; the binaries say
# what else they accept (--help-json).
CONTRACT_FLAGS = {
    "berth-head": {"listen", "advertise-address", "metrics-listen", "heartbeat-period-ms",
                   "heartbeat-misses", "checkpoint-root", "worker-binary"},
    "berth-raylet": {"head", "listen", "advertise-host", "node-id", "num-gpus",
                     "accelerator-type", "num-cpus", "memory", "labels", "node-pool",
                     "metrics-listen", "log-dir"},
    "berth-autoscaler": {"head", "config", "metrics-listen"},
}
# Where each binary is when BERTH_BINARIES ("name=path,...", set by ctest)
# does not say: the default CMake build directory.
DEFAULT_BINARIES = {
    "berth-head": "build/scheduler/berth-head",
    "berth-raylet": "build/raylet/berth-raylet",
    "berth-autoscaler": "build/autoscaler/berth-autoscaler",
}


def binary_flags(binary):
    """The long flags `binary` accepts, as it prints them (--help-json)."""
    given = dict(item.split("=", 1) for item in os.environ.get("BERTH_BINARIES", "").split(",") if "=" in item)
    path = given.get(binary) or os.path.join(REPO, DEFAULT_BINARIES[binary])
    try:
        out = subprocess.run([path, "--help-json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=30, check=True).stdout
        return {flag["name"] for flag in json.loads(out)["flags"]}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        sys.exit(f"check_manifests: cannot ask {path} for its flags ({e}); build it first "
                 f"or name it in BERTH_BINARIES")


def known_flags():
    known, from_binary = {}, {}
    for binary, contract in CONTRACT_FLAGS.items():
        from_binary[binary] = binary_flags(binary)
        known[binary] = contract | from_binary[binary]
    return known, from_binary


# --- kubernetes-validate ----------------------------------------------------

CRD_KINDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("monitoring.coreos.com/v1", "ServiceMonitor")}


def schema_validate(objects, versions):
    """Every distinct non-CRD object against each Kubernetes version's schema."""
    import kubernetes_validate.utils as kv  # from the venv check_manifests.sh made
    seen = {}
    for where, obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) in CRD_KINDS:
            continue
        key = json.dumps(obj, sort_keys=True)
        seen.setdefault(key, (where, obj))
    count = 0
    for where, obj in seen.values():
        for version in versions:
            try:
                kv.validate(obj, version, strict=True)
                count += 1
            except kv.ValidationError as e:
                path = ".".join(str(p) for p in e.path) or "(top)"
                error(f"{where} {name_of(obj)}", f"Kubernetes {e.version} schema: {path}: {e.message}")
            except kv.SchemaNotFoundError as e:
                error(f"{where} {name_of(obj)}", f"no schema to validate it against: {e.message}")
            except kv.VersionNotSupportedError:
                error(where, f"kubernetes-validate has no schemas for Kubernetes {version}")
                return count
    return count


def selftest(versions):
    """Proves the bundled schemas work here: a valid Deployment passes, one
    with a wrongly typed field and one with an unknown field fail."""
    import kubernetes_validate.utils as kv
    good = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "t"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i:1",
                                                       "readinessProbe": {"grpc": {"port": 6380}}}]}}},
    }
    wrong_type = json.loads(json.dumps(good))
    wrong_type["spec"]["replicas"] = "two"
    unknown = json.loads(json.dumps(good))
    unknown["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    for version in versions:
        kv.validate(good, version, strict=True)
        for bad in (wrong_type, unknown):
            try:
                kv.validate(bad, version, strict=True)
            except kv.ValidationError:
                continue
            error("kubernetes-validate self-test", f"an invalid Deployment passed against {version}")
    if not ERRORS:
        import kubernetes_validate.version as kvv
        info(f"kubernetes-validate {kvv.__version__}: bundled schemas for "
             f"{', '.join(versions)} accept a valid Deployment and reject a wrong type and an unknown field")


# --- Prometheus Operator kinds ----------------------------------------------

_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
MONITOR_SPEC_KEYS = {
    "jobLabel", "targetLabels", "podTargetLabels", "endpoints", "podMetricsEndpoints", "selector",
    "selectorMechanism", "namespaceSelector", "sampleLimit", "targetLimit", "labelLimit",
    "labelNameLengthLimit", "labelValueLengthLimit", "keepDroppedTargets", "attachMetadata",
    "scrapeProtocols", "fallbackScrapeProtocol", "scrapeClass", "bodySizeLimit",
    "scrapeClassicHistograms", "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor",
    "convertClassicHistogramsToNHCB", "serviceDiscoveryRole",
}
ENDPOINT_KEYS = {
    "port", "portNumber", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout",
    "honorLabels", "honorTimestamps", "trackTimestampsStaleness", "metricRelabelings", "relabelings",
    "proxyUrl", "noProxy", "proxyFromEnvironment", "proxyConnectHeader", "followRedirects",
    "enableHttp2", "filterRunning", "tlsConfig", "bearerTokenSecret", "bearerTokenFile",
    "basicAuth", "oauth2", "authorization",
}
RELABEL_KEYS = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement", "action"}
# Target labels the berth metrics carry themselves (docs/metrics.yaml): a target
# label of the same name would rename theirs to exported_<name>.
RESERVED_TARGET_LABELS = {"node"}


def check_monitor(where, obj, namespace, workloads, services):
    kind = obj["kind"]
    here = f"{where} {name_of(obj)}"
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        error(here, "metadata.name is required")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        error(here, "spec is required")
        return
    for k in spec:
        if k not in MONITOR_SPEC_KEYS:
            error(here, f"spec.{k}: unknown field")
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        error(here, "spec.selector with matchLabels or matchExpressions is required (an empty one selects everything)")
        selector = None
    ns_sel = spec.get("namespaceSelector") or {}
    if ns_sel and not ns_sel.get("any") and namespace not in (ns_sel.get("matchNames") or []):
        error(here, f"spec.namespaceSelector leaves out namespace {namespace}")
    list_key = "podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"
    endpoints = spec.get(list_key)
    if not isinstance(endpoints, list) or not endpoints:
        error(here, f"spec.{list_key} must be a non-empty list")
        endpoints = []

    # What the selector picks: pod templates (PodMonitor) or Services.
    if kind == "PodMonitor":
        targets = [(w, [c for c in pod_spec(w).get("containers") or []]) for w in workloads
                   if selector and selector_matches(selector, pod_labels(w))]
        if selector and not targets:
            error(here, "spec.selector matches no pod template in this render")
        available = {name_of(w): set().union(*[named_ports(c).keys() for c in cs] or [set()]) for w, cs in targets}
    else:
        targets = [s for s in services
                   if selector and selector_matches(selector, (s.get("metadata") or {}).get("labels") or {})]
        if selector and not targets:
            error(here, "spec.selector matches the labels of no Service in this render")
        available = {name_of(s): {p.get("name") for p in (s.get("spec") or {}).get("ports") or []} for s in targets}

    for i, ep in enumerate(endpoints):
        at = f"spec.{list_key}[{i}]"
        if not isinstance(ep, dict):
            error(here, f"{at}: not a mapping")
            continue
        for k in ep:
            if k not in ENDPOINT_KEYS:
                error(here, f"{at}.{k}: unknown field")
        port = ep.get("port")
        if not isinstance(port, str) or not port:
            error(here, f"{at}.port: a port name is required")
        else:
            for target, names in available.items():
                if port not in names:
                    error(here, f"{at}.port: {target} has no port named {port!r} (has {sorted(n for n in names if n)})")
        for k in ("interval", "scrapeTimeout"):
            if k in ep and not (isinstance(ep[k], str) and _DURATION.match(ep[k]) and ep[k] != ""):
                error(here, f"{at}.{k}: {ep[k]!r} is not a Prometheus duration")
        if "path" in ep and not str(ep["path"]).startswith("/"):
            error(here, f"{at}.path: must start with /")
        for rk in ("relabelings", "metricRelabelings"):
            for j, rule in enumerate(ep.get(rk) or []):
                for k in rule:
                    if k not in RELABEL_KEYS:
                        error(here, f"{at}.{rk}[{j}].{k}: unknown field")
                if rule.get("targetLabel") in RESERVED_TARGET_LABELS:
                    error(here, f"{at}.{rk}[{j}]: target label {rule['targetLabel']!r} clashes with the "
                                "berth metrics' own label (docs/metrics.md)")
    return True


# --- the autoscaler's config ------------------------------------------------

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
        elif any(str(k).startswith("berth.io/") for k in labels):
            error(where, f"{at}.labels: the berth.io/ prefix is reserved (the raylet refuses it)")
        if ptype == "kubernetes" and not pool.get("deployment"):
            error(where, f"{at}.deployment: required with the kubernetes provider")
        good.append(pool)
    return good


# --- one render --------------------------------------------------------------

RBAC_NEEDED = {  # the kubernetes provider's API calls
    ("", "pods"): {"get", "list", "watch", "patch"},
    ("apps", "deployments"): {"get"},
    ("apps", "deployments/scale"): {"get", "patch", "update"},
}
COMPONENTS = {"head", "raylet", "autoscaler", "client"}


def mount_for(container, path):
    """The volumeMount whose mountPath holds `path` (longest match), or None."""
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m.get("mountPath", "").rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best.get("mountPath", "")):
                best = m
    return best


def check_render(where, objects, flags_known, image_info, expected_namespace):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj.get("kind"), []).append(obj)
    get = lambda kind, name: next((o for o in by_kind.get(kind, []) if o["metadata"].get("name") == name), None)  # noqa: E731
    workloads = [o for o in objects if pod_spec(o) is not None]
    services = by_kind.get("Service", [])
    configmaps = {o["metadata"]["name"]: o for o in by_kind.get("ConfigMap", [])}

    # Namespace: one, every namespaced object in it.
    namespaces = [o["metadata"]["name"] for o in by_kind.get("Namespace", [])]
    if namespaces != [expected_namespace]:
        error(where, f"expected exactly the Namespace {expected_namespace!r}, found {namespaces}")
    restricted = any((o["metadata"].get("labels") or {}).get("pod-security.kubernetes.io/enforce") == "restricted"
                     for o in by_kind.get("Namespace", []))
    for obj in objects:
        if obj.get("kind") in ("Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
            continue
        if obj["metadata"].get("namespace") != expected_namespace:
            error(f"{where} {name_of(obj)}", f"namespace {obj['metadata'].get('namespace')!r}, expected "
                                             f"{expected_namespace!r}")
        labels = obj["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/name") != "berth":
            error(f"{where} {name_of(obj)}", "label app.kubernetes.io/name=berth missing")

    # Monitors.
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) in CRD_KINDS:
            check_monitor(where, obj, expected_namespace, workloads, services)

    head_dep = get("Deployment", "berth-head")
    head_svc = get("Service", "berth-head")
    if head_dep is None or head_svc is None:
        error(where, "Deployment and Service berth-head are required")
    checkpoint_root = None

    # Workloads: labels, selectors, security, resources, images, probes, flags.
    for w in workloads:
        here = f"{where} {name_of(w)}"
        spec = pod_spec(w)
        labels = pod_labels(w)
        component = labels.get("app.kubernetes.io/component")
        if labels.get("app.kubernetes.io/name") != "berth":
            error(here, "pod label app.kubernetes.io/name=berth missing")
        if component not in COMPONENTS:
            error(here, f"pod label app.kubernetes.io/component is {component!r} (allowed: {sorted(COMPONENTS)})")
        if w["kind"] == "Deployment":
            sel = (w["spec"].get("selector") or {})
            if not selector_matches(sel, labels):
                error(here, "spec.selector does not match the pod template's labels")
            for other in by_kind.get("Deployment", []):
                if other is not w and selector_matches(sel, pod_labels(other)):
                    error(here, f"spec.selector also matches the pods of {name_of(other)}")
        if component == "raylet" and not labels.get("berth.io/pool"):
            error(here, "raylet pods need the label berth.io/pool")

        # Pod security (restricted standard, when the namespace enforces it).
        psc = spec.get("securityContext") or {}
        problems = []
        for k in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(k):
                problems.append(f"{k} is set")
        for v in spec.get("volumes") or []:
            if "hostPath" in v:
                problems.append(f"volume {v.get('name')} is a hostPath")
        if (psc.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append("securityContext.seccompProfile.type must be RuntimeDefault")
        for c in all_containers(spec):
            csc = c.get("securityContext") or {}
            cn = f"container {c.get('name')}"
            if not (csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
                problems.append(f"{cn}: runAsNonRoot is not true")
            if csc.get("runAsUser", psc.get("runAsUser")) == 0:
                problems.append(f"{cn}: runs as uid 0")
            if csc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cn}: allowPrivilegeEscalation is not false")
            if csc.get("privileged"):
                problems.append(f"{cn}: privileged")
            if "ALL" not in ((csc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{cn}: capabilities.drop lacks ALL")
            if (csc.get("capabilities") or {}).get("add") not in (None, [], ["NET_BIND_SERVICE"]):
                problems.append(f"{cn}: adds capabilities")
            if image_info.get("uid") is not None and csc.get("runAsUser", psc.get("runAsUser")) not in (None, image_info["uid"]):
                problems.append(f"{cn}: runAsUser differs from the image's USER {image_info['uid']}")
        for p in problems:
            error(here, p + (" (the namespace enforces the restricted Pod Security Standard)" if restricted else ""))
        if spec.get("automountServiceAccountToken", True) is not False and not spec.get("serviceAccountName"):
            error(here, "pods without a service account of their own should set automountServiceAccountToken: false")

        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        for c in all_containers(spec):
            cn = f"{here} container {c.get('name')}"
            # Resources.
            res = c.get("resources") or {}
            for k in ("cpu", "memory"):
                req = quantity((res.get("requests") or {}).get(k)) if (res.get("requests") or {}).get(k) is not None else None
                lim = quantity((res.get("limits") or {}).get(k)) if (res.get("limits") or {}).get(k) is not None else None
                if req is None:
                    error(cn, f"resources.requests.{k} missing or not a quantity")
                if lim is None:
                    error(cn, f"resources.limits.{k} missing or not a quantity")
                if req is not None and lim is not None and req > lim:
                    error(cn, f"resources.requests.{k} exceeds the limit")
            # Images: an explicit tag (or digest), never latest.
            image = str(c.get("image") or "")
            last = image.rsplit("/", 1)[-1]
            if "@" not in image and (":" not in last or last.endswith(":latest")):
                error(cn, f"image {image!r}: pin a tag (not latest)")
            # Volume mounts name volumes.
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    error(cn, f"volumeMount {m.get('name')!r} names no volume")
            # Commands exist in the image.
            command = [str(x) for x in c.get("command") or []]
            if command:
                if command[0] not in image_info["paths"]:
                    error(cn, f"command {command[0]} is not in the berth image (deploy/docker/Dockerfile)")
                if command[:2] == ["/usr/bin/tini", "--"] and (len(command) < 3 or command[2] not in image_info["paths"]):
                    error(cn, f"tini runs {command[2:3]}, which is not in the berth image")
            # Files named in args that come from a ConfigMap exist in it.
            for arg in [str(a) for a in (c.get("args") or [])]:
                for token in [arg.split("=", 1)[-1]] if arg.startswith("--") else [arg]:
                    if not token.startswith("/"):
                        continue
                    m = mount_for(c, token)
                    vol = volumes.get(m.get("name")) if m else None
                    if vol and "configMap" in vol:
                        cm = configmaps.get(vol["configMap"].get("name"))
                        key = token[len(m["mountPath"].rstrip("/")) + 1:].split("/")[0]
                        if cm is None:
                            error(cn, f"{token}: ConfigMap {vol['configMap'].get('name')!r} is not in this render")
                        elif key not in (cm.get("data") or {}):
                            error(cn, f"{token}: ConfigMap {cm['metadata']['name']} has no key {key!r}")
            # Probes and flags of the berth daemons.
            binary = binary_of(c)
            if binary not in flags_known:
                continue
            flags = parse_flags(c.get("args"))
            for f in flags:
                if f not in flags_known.get(binary, set()):
                    error(cn, f"--{f}: {binary} has no such flag")
            ports = named_ports(c)
            if binary in ("berth-head", "berth-raylet"):
                for pname in ("grpc", "metrics"):
                    if pname not in ports:
                        error(cn, f"no container port named {pname!r}")
                if port_of(one_flag(flags, "listen")) != ports.get("grpc"):
                    error(cn, f"--listen={one_flag(flags, 'listen')} is not the grpc port {ports.get('grpc')}")
                for probe in ("readinessProbe", "livenessProbe"):
                    p = c.get(probe) or {}
                    if (p.get("grpc") or {}).get("port") != ports.get("grpc"):
                        error(cn, f"{probe} must be a grpc probe on the grpc port {ports.get('grpc')}")
            if binary in ("berth-head", "berth-raylet", "berth-autoscaler"):
                if "metrics" not in ports:
                    error(cn, "no container port named 'metrics'")
                if port_of(one_flag(flags, "metrics-listen")) != ports.get("metrics"):
                    error(cn, f"--metrics-listen={one_flag(flags, 'metrics-listen')} is not the metrics port "
                              f"{ports.get('metrics')}")
                if str(one_flag(flags, "metrics-listen") or "").startswith("127."):
                    error(cn, "--metrics-listen on loopback cannot be scraped")
                for probe in ("readinessProbe", "livenessProbe"):
                    if not c.get(probe):
                        error(cn, f"{probe} missing")
            if binary in ("berth-raylet", "berth-autoscaler"):
                head = str(one_flag(flags, "head") or "")
                host = head.rsplit(":", 1)[0].split(".")[0]
                svc = get("Service", host)
                svc_ports = {p.get("port") for p in (svc or {}).get("spec", {}).get("ports") or []}
                if svc is None or port_of(head) not in svc_ports:
                    error(cn, f"--head={head}: no Service port in this render")
            if binary == "berth-head":
                checkpoint_root = one_flag(flags, "checkpoint-root")
                adv = str(one_flag(flags, "advertise-address") or "")
                if not adv or port_of(adv) is None or adv.startswith("0.0.0.0"):
                    error(cn, "--advertise-address must be an address raylets can dial (the Service)")
            if binary == "berth-autoscaler":
                cfg = one_flag(flags, "config")
                if not cfg or not mount_for(c, str(cfg)):
                    error(cn, f"--config={cfg}: no volume is mounted there")

        # Deployment strategies the daemons need.
        if w["kind"] == "Deployment" and component in ("head", "autoscaler"):
            if w["spec"].get("replicas", 1) != 1:
                error(here, "must run exactly 1 replica")
            if (w["spec"].get("strategy") or {}).get("type") != "Recreate":
                error(here, "strategy must be Recreate (never two at once)")

    # Services: selectors and target ports.
    for s in services:
        here = f"{where} {name_of(s)}"
        sel = (s.get("spec") or {}).get("selector") or {}
        backing = [w for w in workloads if sel and selector_matches({"matchLabels": sel}, pod_labels(w))]
        if not backing:
            error(here, "selector matches no pod template")
        for p in (s.get("spec") or {}).get("ports") or []:
            tp = p.get("targetPort", p.get("port"))
            for w in backing:
                cports = {}
                for c in pod_spec(w).get("containers") or []:
                    cports.update(named_ports(c))
                if isinstance(tp, str) and tp not in cports:
                    error(here, f"targetPort {tp!r}: {name_of(w)} has no such container port")
                if isinstance(tp, int) and tp not in cports.values():
                    error(here, f"targetPort {tp}: {name_of(w)} has no such container port")

    # The autoscaler: RBAC and its config against the raylet Deployments.
    autoscaler = get("Deployment", "berth-autoscaler")
    raylets = {d["metadata"]["name"]: d for d in by_kind.get("Deployment", [])
               if pod_labels(d).get("app.kubernetes.io/component") == "raylet"}
    pools = []
    if autoscaler is None:
        error(where, "Deployment berth-autoscaler is required")
    else:
        here = f"{where} {name_of(autoscaler)}"
        spec = pod_spec(autoscaler)
        sa = spec.get("serviceAccountName")
        if not sa or get("ServiceAccount", sa) is None:
            error(here, f"serviceAccountName {sa!r}: no such ServiceAccount in this render")
        granted = {}
        for rb in by_kind.get("RoleBinding", []):
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and
                       s.get("namespace", expected_namespace) == expected_namespace for s in rb.get("subjects") or []):
                continue
            ref = rb.get("roleRef") or {}
            role = get(ref.get("kind"), ref.get("name"))
            if role is None:
                error(f"{where} {name_of(rb)}", f"roleRef {ref.get('kind')}/{ref.get('name')} is not in this render")
                continue
            for rule in role.get("rules") or []:
                for g in rule.get("apiGroups") or []:
                    for r in rule.get("resources") or []:
                        granted.setdefault((g, r), set()).update(rule.get("verbs") or [])
        for (g, r), verbs in RBAC_NEEDED.items():
            missing = verbs - granted.get((g, r), set())
            if "*" not in granted.get((g, r), set()) and missing:
                error(here, f"its service account lacks {sorted(missing)} on {r}"
                            f"{' (' + g + ')' if g else ''}")
        # Run the init container's script on the ConfigMap's files, as the pod
        # would, and read what it leaves where --config points.
        parts_vol = next((v for v in spec.get("volumes") or [] if "configMap" in v and
                          v["configMap"].get("name", "").startswith("berth-autoscaler-config")), None)
        parts_cm = configmaps.get(parts_vol["configMap"]["name"]) if parts_vol else None
        main = next((c for c in spec.get("containers") or [] if binary_of(c) == "berth-autoscaler"), {})
        config_path = str(one_flag(parse_flags(main.get("args")), "config") or "")
        if parts_cm is None:
            error(here, "no berth-autoscaler-config ConfigMap volume in this render")
        else:
            data = parts_cm.get("data") or {}
            pool_keys = sorted(k for k in data if re.match(r"^pool-.*\.yaml$", k))
            if "provider.yaml" not in data or not pool_keys:
                error(f"{where} {name_of(parts_cm)}", "needs provider.yaml and at least one pool-<name>.yaml")
            for k in pool_keys:
                piece = yaml.safe_load(data[k])
                if not (isinstance(piece, list) and len(piece) == 1 and
                        isinstance(piece[0], dict) and f"pool-{piece[0].get('name')}.yaml" == k):
                    error(f"{where} {name_of(parts_cm)}", f"{k} must hold one pool, named as the key")
            text = run_config_init(here, spec, parts_vol["name"], main, config_path, data)
            if text is not None:
                try:
                    config = yaml.safe_load(text)
                except yaml.YAMLError as e:
                    error(here, f"the autoscaler.yaml its init container writes does not parse: {e}")
                    config = None
                if config is not None:
                    pools = check_autoscaler_config(f"{where} autoscaler.yaml", config, expected_namespace)
                    info(f"{where}: autoscaler pools " + ", ".join(
                        f"{p.get('name')} ({p.get('gpus')} x {p.get('accelerator_type') or 'no GPU'}, "
                        f"{p.get('min_nodes')}..{p.get('max_nodes')} nodes)" for p in pools))

    # Every pool has its raylet Deployment, and the two describe the same node.
    pooled = set()
    for pool in pools:
        name, dep_name = pool.get("name"), pool.get("deployment")
        here = f"{where} pool {name}"
        dep = raylets.get(dep_name)
        if dep is None:
            error(here, f"deployment {dep_name!r}: no raylet Deployment of that name in this render")
            continue
        pooled.add(dep_name)
        spec = pod_spec(dep)
        labels = pod_labels(dep)
        if labels.get("berth.io/pool") != name:
            error(here, f"{dep_name}'s pods are labelled berth.io/pool={labels.get('berth.io/pool')!r}")
        replicas = dep["spec"].get("replicas", 1)
        if isinstance(replicas, int) and isinstance(pool.get("min_nodes"), int) and isinstance(pool.get("max_nodes"), int) and \
                not pool["min_nodes"] <= replicas <= pool["max_nodes"]:
            error(here, f"{dep_name} starts with {replicas} replicas, outside min_nodes..max_nodes")
        raylet = next((c for c in spec.get("containers") or [] if binary_of(c) == "berth-raylet"), None)
        if raylet is None:
            error(here, f"{dep_name} runs no berth-raylet container")
            continue
        flags = parse_flags(raylet.get("args"))
        res = raylet.get("resources") or {}
        lim, req = res.get("limits") or {}, res.get("requests") or {}

        def same(flag, pool_key, as_quantity=True):
            fv, pv = one_flag(flags, flag), pool.get(pool_key)
            equal = (quantity(fv) == quantity(pv)) if as_quantity else (fv == pv)
            if fv is None or pv is None or not equal:
                error(here, f"--{flag}={fv} of {dep_name} and the pool's {pool_key}: {pv} differ")
        if one_flag(flags, "node-pool") != name:
            error(here, f"--node-pool={one_flag(flags, 'node-pool')} of {dep_name} is not {name!r}")
        same("num-cpus", "cpus")
        same("memory", "memory")
        for flag, key in (("num-cpus", "cpu"), ("memory", "memory")):
            fv = quantity(one_flag(flags, flag))
            lv = quantity(lim.get(key)) if lim.get(key) is not None else None
            if fv is not None and lv is not None and fv > lv:
                error(here, f"--{flag}={one_flag(flags, flag)} exceeds the container's {key} limit {lim.get(key)}")
        if (one_flag(flags, "accelerator-type") or None) != (pool.get("accelerator_type") or None):
            error(here, f"--accelerator-type={one_flag(flags, 'accelerator-type')} of {dep_name} and the pool's "
                        f"accelerator_type: {pool.get('accelerator_type')} differ")
        raylet_labels = dict(kv.split("=", 1) for kv in str(one_flag(flags, "labels") or "").split(",") if "=" in kv)
        if raylet_labels != {str(k): str(v) for k, v in (pool.get("labels") or {}).items()}:
            error(here, f"--labels of {dep_name} {raylet_labels} and the pool's labels {pool.get('labels')} differ")
        gpus = pool.get("gpus") or 0
        gpu_limit = int(quantity(lim.get("nvidia.com/gpu")) or 0) if lim.get("nvidia.com/gpu") is not None else 0
        gpu_request = req.get("nvidia.com/gpu")
        if gpu_limit != gpus:
            error(here, f"{dep_name} limits nvidia.com/gpu to {gpu_limit}, the pool says gpus: {gpus}")
        if gpu_request is not None and quantity(gpu_request) != quantity(lim.get("nvidia.com/gpu")):
            error(here, f"{dep_name}: nvidia.com/gpu requests and limits differ")
        if gpus > 0:
            if "num-gpus" in flags:
                error(here, f"{dep_name} passes --num-gpus, which simulates GPUs instead of finding the real ones "
                            "through NVML")
            if "cuda" not in str(raylet.get("image")):
                error(here, f"{dep_name} runs {raylet.get('image')}, not the CUDA image (Dockerfile.cuda)")
            if not any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations") or []):
                error(here, f"{dep_name} does not tolerate the nvidia.com/gpu taint")
            if not spec.get("nodeSelector") and not spec.get("affinity"):
                error(here, f"{dep_name} has no nodeSelector or node affinity for the pool's nodes")
            shm = next((m for m in raylet.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"), None)
            if shm is None:
                error(here, f"{dep_name}: NCCL needs a memory-backed /dev/shm volume")
        else:
            if one_flag(flags, "num-gpus") not in (None, "0"):
                error(here, f"{dep_name}: a CPU pool with --num-gpus={one_flag(flags, 'num-gpus')}")
        if checkpoint_root and not mount_for(raylet, checkpoint_root):
            error(here, f"{dep_name} mounts nothing at the head's --checkpoint-root {checkpoint_root}")
    for dep_name in raylets:
        if dep_name not in pooled and pools:
            error(f"{where} Deployment/{dep_name}", "a raylet Deployment that no autoscaler pool names")

    # Job files in ConfigMaps: the format's top-level keys, and a pool that can run them.
    for cm_name, cm in configmaps.items():
        if cm_name != "berth-jobs":
            continue
        for key, text in (cm.get("data") or {}).items():
            here = f"{where} ConfigMap/{cm_name} {key}"
            try:
                job = yaml.safe_load(text)
            except yaml.YAMLError as e:
                error(here, f"does not parse: {e}")
                continue
            check_job_file(here, job, pools)
    return by_kind


def run_config_init(here, spec, parts_volume, main, config_path, data):
    """Runs the init container that writes the autoscaler's --config file,
    with its mounts moved into a scratch directory; returns the file's text."""
    import shutil
    import subprocess
    import tempfile
    out_mount = mount_for(main, config_path) if config_path else None
    if out_mount is None:
        error(here, f"--config={config_path}: no volume is mounted there")
        return None
    writer = None
    for c in spec.get("initContainers") or []:
        mounts = {m.get("name"): m.get("mountPath") for m in c.get("volumeMounts") or []}
        if parts_volume in mounts and out_mount.get("name") in mounts:
            writer = (c, mounts[parts_volume], mounts[out_mount.get("name")])
    if writer is None:
        error(here, "no init container mounts both the config pieces and the volume --config reads")
        return None
    c, parts_at, out_at = writer
    command = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
    if command[:2] != ["/bin/sh", "-c"] or len(command) != 3:
        error(here, f"init container {c.get('name')}: expected /bin/sh -c SCRIPT")
        return None
    tmp = tempfile.mkdtemp(prefix="berth-autoscaler-init.")
    try:
        os.makedirs(os.path.join(tmp, "parts"))
        os.makedirs(os.path.join(tmp, "out"))
        for k, v in data.items():
            with open(os.path.join(tmp, "parts", k), "w", encoding="utf-8") as f:
                f.write(v)
        script = command[2]
        # Longest mount path first, through placeholders, so /etc/berth does
        # not rewrite part of /etc/berth/autoscaler.d.
        moves = sorted([(parts_at, os.path.join(tmp, "parts")), (out_at, os.path.join(tmp, "out"))],
                       key=lambda m: -len(m[0]))
        for i, (src, _) in enumerate(moves):
            script = script.replace(src, f"@@MOUNT{i}@@")
        for i, (_, dst) in enumerate(moves):
            script = script.replace(f"@@MOUNT{i}@@", dst)
        r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            error(here, f"init container {c.get('name')} fails on this render's ConfigMap: {r.stderr.strip()}")
            return None
        written = os.path.join(tmp, "out", os.path.relpath(config_path, out_mount["mountPath"]))
        if not os.path.isfile(written):
            error(here, f"init container {c.get('name')} does not write {config_path}")
            return None
        with open(written, encoding="utf-8") as f:
            return f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


JOB_KEYS = {"name", "scaling", "entrypoint", "failure", "checkpoint_dir", "labels"}
SCALING_KEYS = {"num_workers", "use_gpu", "resources_per_worker", "trainer_resources", "accelerator_type",
                "placement_strategy"}


def check_job_file(here, job, pools):
    if not isinstance(job, dict):
        error(here, "a job file is a mapping")
        return
    for k in job:
        if k not in JOB_KEYS:
            error(here, f"{k}: unknown key (allowed: {', '.join(sorted(JOB_KEYS))})")
    scaling = job.get("scaling")
    if not isinstance(scaling, dict):
        error(here, "scaling: required")
        return
    for k in scaling:
        if k not in SCALING_KEYS:
            error(here, f"scaling.{k}: unknown key")
    n = scaling.get("num_workers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        error(here, "scaling.num_workers: an integer >= 1 is required")
    if not pools:
        return
    per_worker = dict(scaling.get("resources_per_worker") or {})
    if scaling.get("use_gpu") and "GPU" not in per_worker:
        per_worker["GPU"] = 1
    accel = scaling.get("accelerator_type")
    fits = []
    for p in pools:
        if accel and p.get("accelerator_type") != accel:
            continue
        shape = {"CPU": quantity(p.get("cpus")), "memory": quantity(p.get("memory")), "GPU": Decimal(p.get("gpus") or 0)}
        if all(quantity(v) is not None and quantity(v) <= shape.get(k, Decimal(0)) for k, v in per_worker.items()):
            fits.append(p.get("name"))
    if not fits:
        error(here, f"no pool of this render can hold one worker ({per_worker}"
                    f"{', accelerator_type ' + accel if accel else ''})")


# --- Dockerfiles ---------------------------------------------------------------

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse_dockerfile(path):
    """[(line number, INSTRUCTION, rest, instruction as written)], continuation
    lines joined; comments (parser directives too) and blank lines dropped.
    Heredocs (RUN <<EOF) are not understood, and reported."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        start = i + 1
        i += 1
        if not line.strip() or line.strip().startswith("#"):
            continue
        text = line.rstrip()
        while text.endswith("\\"):
            text = text[:-1]
            while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("#")):
                i += 1  # comments and blank lines inside a continuation are dropped
            if i >= len(lines):
                error(f"{os.path.relpath(path, REPO)}:{start}", "the file ends inside a continued line")
                break
            text += " " + lines[i].strip()
            i += 1
            text = text.rstrip()
        word, _, rest = text.strip().partition(" ")
        if re.search(r"<<-?\s*['\"]?[A-Za-z_]+", rest) and word.upper() in ("RUN", "COPY", "ADD"):
            error(f"{os.path.relpath(path, REPO)}:{start}", "heredocs are beyond this check's parser; use && chains")
        out.append((start, word.upper(), rest.strip(), word))
    return out


def check_dockerfile(path, image_info):
    rel = os.path.relpath(path, REPO)
    instructions = parse_dockerfile(path)
    if not instructions:
        error(rel, "no instructions")
        return
    stages, args_before_from, seen_from, final_user = [], set(), False, None
    copied_bins = set()
    for n, ins, rest, word in instructions:
        at = f"{rel}:{n}"
        if ins not in INSTRUCTIONS:
            error(at, f"unknown instruction {word!r}")
            continue
        if word != ins:
            error(at, f"write instructions in upper case ({word!r})")
        if not seen_from and ins not in ("ARG", "FROM"):
            error(at, f"{ins} before the first FROM")
        if ins == "ARG" and not seen_from:
            args_before_from.add(rest.split("=", 1)[0].strip())
        if ins == "FROM":
            seen_from = True
            final_user = None
            words = [w for w in rest.split() if not w.startswith("--platform")]
            if len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
                error(at, f"FROM {rest!r}: expected FROM IMAGE [AS NAME]")
                continue
            for var in re.findall(r"\$\{?(\w+)", words[0]):
                if var not in args_before_from:
                    error(at, f"FROM uses ${var}, not declared by an ARG before the first FROM")
            if len(words) == 3:
                if words[2].lower() in [s.lower() for s in stages]:
                    error(at, f"stage name {words[2]!r} used twice")
                stages.append(words[2])
            else:
                stages.append(f"#{len(stages)}")
        if ins in ("CMD", "ENTRYPOINT", "RUN", "SHELL", "VOLUME") and rest.startswith("["):
            try:
                value = json.loads(rest)
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise ValueError("not a list of strings")
            except ValueError as e:
                error(at, f"{ins} in exec form must be a JSON array of strings: {e}")
        if ins in ("COPY", "ADD"):
            opts = re.findall(r"--(\w+)(?:=(\S+))?", rest)
            for k, v in opts:
                if k == "from" and not (v in stages or v.isdigit() or "/" in v or ":" in v or "$" in v):
                    error(at, f"COPY --from={v}: no earlier stage of that name")
        for b in re.findall(r"build/\w+/(berth[\w-]*)", rest):
            copied_bins.add(b)
        if ins == "USER":
            final_user = rest.split(":")[0]
        if ins == "EXPOSE":
            for p in rest.split():
                if not re.match(r"^\d+(/(tcp|udp))?$", p):
                    error(at, f"EXPOSE {p!r} is not a port")
        if ins == "RUN" and re.search(r"apt-get install[^&|;]*\$\(", rest):
            error(at, "apt-get install $(...): a failing command substitution installs nothing and passes")
    if final_user in (None, "", "root", "0"):
        error(rel, "the final stage must switch to a non-root USER")
    if os.path.basename(path) == "Dockerfile":
        for b in sorted(image_info["binaries"]):
            if b not in copied_bins:
                error(rel, f"does not install build/*/{b}")
        image_info["uid"] = int(final_user) if final_user and final_user.isdigit() else None
    info(f"{rel}: {len(instructions)} instructions, stages {', '.join(stages)}, final USER {final_user}")


# --- systemd units (policy; syntax is systemd-analyze's) -----------------------

def check_unit(path, policy_only):
    rel = os.path.relpath(path, REPO)
    sections, current = {}, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line, n = lines[i].strip(), i + 1
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        if not line or line[0] in "#;":
            continue
        m = re.match(r"^\[([A-Za-z]+)\]$", line)
        if m:
            current = m.group(1)
            sections.setdefault(current, {})
            continue
        if current is None or "=" not in line:
            error(f"{rel}:{n}", f"not KEY=VALUE inside a section: {line!r}")
            continue
        k, v = line.split("=", 1)
        sections[current].setdefault(k.strip(), []).append(v.strip())
    if not policy_only:
        for s in ("Unit", "Service", "Install"):
            if s not in sections:
                error(rel, f"no [{s}] section")
    svc = sections.get("Service", {})
    exec_start = svc.get("ExecStart", [])
    if len(exec_start) != 1 or not exec_start[0].split()[0].lstrip("-@:+!").startswith("/"):
        error(rel, "needs exactly one ExecStart= with an absolute path")
    for k, want in (("Restart", "on-failure"),):
        if svc.get(k, [None])[-1] != want:
            error(rel, f"{k}={want} is required")
    if not svc.get("EnvironmentFile"):
        error(rel, "EnvironmentFile= is required (settings live in /etc/berth/*.env)")
    if svc.get("NoNewPrivileges", ["no"])[-1] != "yes":
        error(rel, "NoNewPrivileges=yes is required")
    if not svc.get("User"):
        error(rel, "User= is required (never root)")
    if "berth-raylet" in os.path.basename(path):
        # Workers need fork/exec, GPUs and JIT code.
        for k, bad in (("PrivateDevices", "yes"), ("MemoryDenyWriteExecute", "yes")):
            if svc.get(k, ["no"])[-1] == bad:
                error(rel, f"{k}={bad} breaks the workers (GPUs, CUDA/PyTorch JIT)")
        if svc.get("SystemCallFilter"):
            error(rel, "SystemCallFilter= would break CUDA/NCCL/PyTorch in the workers")
    if not sections.get("Install", {}).get("WantedBy"):
        error(rel, "[Install] needs WantedBy=")
    hardening = [k for k in svc if k.startswith(("Protect", "Private", "Restrict", "NoNew", "Capability",
                                                  "Lock", "MemoryDeny", "SystemCall"))]
    info(f"{rel}: ExecStart {exec_start[0].split()[0] if exec_start else '-'}, "
         f"{len(hardening)} hardening settings")


# --- main -------------------------------------------------------------------

def load_render(path):
    with open(path, encoding="utf-8") as f:
        return [o for o in yaml.safe_load_all(f) if o]


def components_used(k8s_dir):
    """Every kustomize Component is included by at least one kustomization."""
    comps, used = set(), set()
    for root, _, files in os.walk(k8s_dir):
        if "kustomization.yaml" not in files:
            continue
        with open(os.path.join(root, "kustomization.yaml"), encoding="utf-8") as f:
            k = yaml.safe_load(f) or {}
        if k.get("kind") == "Component":
            comps.add(os.path.realpath(root))
        for c in k.get("components") or []:
            used.add(os.path.realpath(os.path.join(root, c)))
    for c in sorted(comps - used):
        error(os.path.relpath(c, REPO), "a Component that no kustomization includes (so nothing checks it)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["k8s", "selftest", "docker", "systemd", "config"])
    ap.add_argument("--versions", default="1.29.0")
    ap.add_argument("--namespace", default="berth")
    ap.add_argument("--policy-only", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_intermixed_args()
    versions = [v for v in a.versions.replace(",", " ").split() if v]

    if a.mode == "selftest":
        selftest(versions)
    elif a.mode == "docker":
        image_info = {"binaries": set(CONTRACT_FLAGS) | {"berth-worker", "berth"}, "paths": set()}
        for f in a.files:
            check_dockerfile(f, image_info)
    elif a.mode == "systemd":
        for f in a.files:
            check_unit(f, a.policy_only)
    elif a.mode == "config":
        for f in a.files:
            with open(f, encoding="utf-8") as fh:
                pools = check_autoscaler_config(os.path.relpath(f, REPO), yaml.safe_load(fh))
            info(f"{os.path.relpath(f, REPO)}: {len(pools)} pools")
    else:
        flags_known, from_binary = known_flags()
        for binary, contract in sorted(CONTRACT_FLAGS.items()):
            pending = sorted(contract - from_binary[binary])
            if pending:
                error(binary, "the deployment contract names flags it does not accept: "
                      + " ".join("--" + p for p in pending))
        # What the image holds (deploy/docker/Dockerfile): the five binaries, tini, sh.
        image_info = {"uid": None, "binaries": set(), "paths": {"/usr/bin/tini", "/bin/sh"}}
        dockerfile = os.path.join(REPO, "deploy", "docker", "Dockerfile")
        with open(dockerfile, encoding="utf-8") as f:
            text = f.read()
        for b in re.findall(r"build/\w+/(berth[\w-]*)", text):
            image_info["paths"].add(f"/usr/local/bin/{b}")
        m = re.findall(r"^USER\s+(\d+)", text, re.M)
        image_info["uid"] = int(m[-1]) if m else None

        renders = []
        for item in a.files:
            where, path = item.split("=", 1)
            objects = load_render(path)
            for o in objects:
                if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind") or \
                        not (o.get("metadata") or {}).get("name"):
                    error(where, f"an object without apiVersion, kind or metadata.name: {str(o)[:80]}")
            renders.append((where, [o for o in objects if isinstance(o, dict) and o.get("metadata")]))
        # Schemas first: the consistency checks below assume well-formed objects.
        n = schema_validate([(where, o) for where, objects in renders for o in objects], versions)
        info(f"kubernetes-validate --strict: {n} validations of distinct objects against Kubernetes "
             f"{', '.join(versions)}")
        for where, objects in renders:
            try:
                by_kind = check_render(where, objects, flags_known, image_info, a.namespace)
            except Exception as e:  # a malformed object the schema check reported already
                error(where, f"consistency checks stopped at a malformed object ({type(e).__name__}: {e}); "
                             "fix the errors above first")
                continue
            crds = sum(len(by_kind.get(k, [])) for _, k in CRD_KINDS)
            info(f"{where}: {len(objects)} objects ({', '.join(f'{len(v)} {k}' for k, v in sorted(by_kind.items()))}); "
                 f"{crds} Prometheus Operator objects checked by hand")
        components_used(HERE)
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main())
