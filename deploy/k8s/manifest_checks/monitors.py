"""The Prometheus Operator kinds (PodMonitor, ServiceMonitor): their fields and what they select.
"""

import re

from manifest_checks.report import error
from manifest_checks.objects import name_of, named_ports, pod_labels, pod_spec, selector_matches


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
