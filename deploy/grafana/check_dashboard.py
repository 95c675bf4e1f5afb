#!/usr/bin/env python3
"""Offline checks of berth's Grafana dashboard and Prometheus rules.

    check_dashboard.py REPO_ROOT [--promtool PROMTOOL]

Checks, against the metric catalogue REPO_ROOT/docs/metrics.yaml:

  * deploy/grafana/*.json: valid JSON; title, uid, schemaVersion, panels;
    every panel has a unique id, a type, a title, an integer gridPos inside
    the 24-column grid that overlaps no other panel, and a datasource that
    uses the dashboard's datasource variable; every target has a refId
    (unique in its panel) and a non-empty expr; $variables are defined.
  * deploy/prometheus/rules/*.yml: recording rules are named
    berth:<metric>:<operation> and defined once; alerts have `for:`, a
    severity label and summary/description annotations.
  * Every query (panel targets, template variable queries, rule exprs) names
    only metrics in docs/metrics.yaml (histograms through their
    _bucket/_sum/_count series) or berth: recording rules defined in
    deploy/prometheus/rules/*.yml; label matchers on documented metrics use
    their documented labels (plus target labels), and enumerated label values
    (e.g. state="DEAD") are ones the contract lists.
  * deploy/prometheus/prometheus*.yml and targets/*.json attach no target
    label that a berth metric carries itself (it would be renamed
    exported_<label> at scrape time).
  * With --promtool: every dashboard expr parses as PromQL (Grafana
    variables substituted), via `promtool check rules` on a temporary file.

Needs PyYAML (Debian's python3-yaml, which scripts/setup.sh installs).
Exits 1 with one line per problem, naming the file, panel or rule and the
offending metric.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

# Labels Prometheus itself puts on every scraped series.
BUILTIN_TARGET_LABELS = {"job", "instance"}
# Labels a target label may reuse because only head metrics carry them and
# the configs attach them to raylet targets only (see prometheus-k8s.yml).
RAYLET_ONLY_TARGET_LABELS = {"pool"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
GRAFANA_BUILTIN_VARS = {
    "__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
    "__range_ms", "__dashboard", "__from", "__to", "__name", "__org",
    "__user", "__timeFilter", "timeFilter", "__auto", "__all",
}
SEVERITIES = {"critical", "warning", "info"}
RECORD_NAME = re.compile(r"^berth:[a-z0-9_]+:[a-z0-9_]+$")
ALERT_NAME = re.compile(r"^Berth[A-Z][A-Za-z0-9]*$")
UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")

METRIC_REF = re.compile(r"(?<![A-Za-z0-9_:$])(berth(?:_[A-Za-z0-9_]+|:[A-Za-z0-9_:]+))")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*__STR(\d+)__")
STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
GRAFANA_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]")


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, message):
        self.items.append("%s: %s" % (where, message))


# --------------------------------------------------------------- contract

def load_contract(path, problems):
    """Returns {metric: {"type", "labels": {label: set(values) or None}, "component"}}."""
    contract = {}
    try:
        with open(path) as f:
            catalogue = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        problems.add(path, "cannot read the metric catalogue: %s" % e)
        return contract
    for component in (catalogue or {}).get("components") or []:
        m = re.search(r"berth-(\w+)", component.get("component", ""))
        for metric in component.get("metrics") or []:
            name = metric.get("name", "")
            where = "%s: %s" % (path, name or "a metric without a name")
            if not re.match(r"^berth_[a-z0-9_]+$", name):
                problems.add(where, "%r is not a berth_ metric" % name)
                continue
            labels = {label: set(values) if values else None
                      for label, values in (metric.get("labels") or {}).items()}
            for label in labels:
                if label in BUILTIN_TARGET_LABELS or label == "le":
                    problems.add(where, "%s documents label %r, which Prometheus reserves" % (name, label))
            if name in contract:
                problems.add(where, "%s is documented twice" % name)
            contract[name] = {"type": metric.get("type", ""), "labels": labels,
                              "component": m.group(1) if m else None}
    if not contract:
        problems.add(path, "no metrics in the catalogue (components: [{component, metrics: [...]}])")
    return contract


# ------------------------------------------------------------------ PromQL

def tokenize(expr):
    """Blanks string literals (kept aside) and comments out of a PromQL expr."""
    strings = []

    def keep(m):
        strings.append(m.group(0)[1:-1])
        return "__STR%d__" % (len(strings) - 1)

    blanked = STRING.sub(keep, expr)
    blanked = re.sub(r"#[^\n]*", "", blanked)
    return blanked, strings


def selector_body(text, pos):
    """The text between the braces that open at or after pos (whitespace only before it)."""
    m = re.compile(r"\s*\{").match(text, pos)
    if not m:
        return None
    end = text.find("}", m.end())
    return text[m.end():end if end >= 0 else len(text)]


def check_expr(expr, where, contract, records, target_labels, problems, used_records=None):
    blanked, strings = tokenize(expr)
    for m in METRIC_REF.finditer(blanked):
        name = m.group(1)
        if ":" in name:
            if name not in records:
                problems.add(where, "recording rule %s is not defined in deploy/prometheus/rules/*.yml" % name)
            elif used_records is not None:
                used_records.add(name)
            continue
        base, suffix = name, ""
        if name not in contract:
            for s in HISTOGRAM_SUFFIXES:
                if name.endswith(s) and contract.get(name[:-len(s)], {}).get("type") == "histogram":
                    base, suffix = name[:-len(s)], s
                    break
        info = contract.get(base)
        if info is None:
            problems.add(where, "metric %s is not documented in docs/metrics.yaml" % name)
            continue
        if info["type"] == "histogram" and not suffix:
            problems.add(where, "%s is a histogram: query %s_bucket, _sum or _count" % (name, name))
            continue
        body = selector_body(blanked, m.end())
        if body is None:
            continue
        allowed = set(info["labels"]) | target_labels
        if suffix == "_bucket":
            allowed.add("le")
        for lm in MATCHER.finditer(body):
            label, op, value = lm.group(1), lm.group(2), strings[int(lm.group(3))]
            if label == "__name__":
                continue
            if label not in allowed:
                problems.add(where, "%s has no label %r (documented: %s; target labels: %s)"
                             % (name, label, ", ".join(sorted(info["labels"])) or "none",
                                ", ".join(sorted(target_labels))))
                continue
            values = info["labels"].get(label)
            if values and op in ("=", "!=") and value not in values and "$" not in value:
                problems.add(where, "%s{%s%s\"%s\"}: %r is not one of %s"
                             % (name, label, op, value, value, ", ".join(sorted(values))))


# ------------------------------------------------------------ rule files

def _mapping_value(node, key):
    """The value node of `key` in a composed YAML mapping node, or None."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return v
    return None


def read_rules(path, problems):
    """The rules of a Prometheus rule file, read with PyYAML.

    Returns a list of dicts: kind (record|alert), name, expr, for, labels,
    annotations, line (of the rule in the file).
    """
    try:
        with open(path) as f:
            text = f.read()
        doc = yaml.safe_load(text) or {}
        root = yaml.compose(text)
    except (OSError, yaml.YAMLError) as e:
        problems.add(path, "invalid YAML: %s" % e)
        return []
    rules = []
    group_nodes = getattr(_mapping_value(root, "groups"), "value", None) or []
    for group, group_node in zip(doc.get("groups") or [], group_nodes):
        rule_nodes = getattr(_mapping_value(group_node, "rules"), "value", None) or []
        for r, node in zip(group.get("rules") or [], rule_nodes):
            kind = "record" if "record" in r else "alert"
            rules.append({"kind": kind, "name": r.get(kind), "expr": r.get("expr"),
                          "for": r.get("for"), "labels": r.get("labels") or {},
                          "annotations": r.get("annotations") or {},
                          "line": node.start_mark.line + 1})
    return rules


def check_rules(rules_dir, contract, target_labels, problems):
    files = sorted(glob.glob(os.path.join(rules_dir, "*.yml")) + glob.glob(os.path.join(rules_dir, "*.yaml")))
    if not files:
        problems.add(rules_dir, "no rule files")
    all_rules = []
    for path in files:
        rules = read_rules(path, problems)
        for r in rules:
            r["file"] = path
        all_rules.extend(rules)
    records = {}
    for r in all_rules:
        if r["kind"] == "record":
            where = "%s:%d: record %s" % (os.path.relpath(r["file"]), r["line"], r["name"])
            if not RECORD_NAME.match(r["name"] or ""):
                problems.add(where, "recording rule names must look like berth:<metric>:<operation>")
            if r["name"] in records:
                problems.add(where, "defined twice (also line %d)" % records[r["name"]]["line"])
            records[r["name"]] = r
    for r in all_rules:
        where = "%s:%d: %s %s" % (os.path.relpath(r["file"]), r["line"], r["kind"], r["name"])
        if not r["expr"] or not str(r["expr"]).strip():
            problems.add(where, "empty expr")
            continue
        check_expr(str(r["expr"]), where, contract, records, target_labels, problems)
        if r["kind"] == "alert":
            if not ALERT_NAME.match(r["name"] or ""):
                problems.add(where, "alert names must be CamelCase and start with Berth")
            if r["for"] is None:
                problems.add(where, "alert has no `for:` (write `for: 0m` to fire at once)")
            if r["labels"].get("severity") not in SEVERITIES:
                problems.add(where, "severity label must be one of %s, not %r"
                             % (", ".join(sorted(SEVERITIES)), r["labels"].get("severity")))
            for a in ("summary", "description"):
                if not str(r["annotations"].get(a) or "").strip():
                    problems.add(where, "missing %s annotation" % a)
    return records, len(all_rules)


# ------------------------------------------------------------ scrape configs

def check_scrape_configs(prom_dir, contract, problems):
    """Collects target labels and rejects ones that clash with metric labels."""
    metric_labels, raylet_labels = set(), set()
    for info in contract.values():
        metric_labels |= set(info["labels"])
        if info["component"] == "raylet":
            raylet_labels |= set(info["labels"])
    target_labels = set(BUILTIN_TARGET_LABELS)

    def check(label, where):
        target_labels.add(label)
        if label in metric_labels and not (label in RAYLET_ONLY_TARGET_LABELS and label not in raylet_labels):
            problems.add(where, "target label %r clashes with the %r label of berth metrics; "
                         "Prometheus would rename theirs to exported_%s" % (label, label, label))

    def walk(node, path):
        """Every `target_label: X` and every key of a `labels:` mapping, with its line."""
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                at = "%s:%d" % (os.path.relpath(path), key.start_mark.line + 1)
                if key.value == "target_label" and isinstance(value, yaml.ScalarNode):
                    check(value.value, at)
                elif key.value == "labels" and isinstance(value, yaml.MappingNode):
                    for label, _ in value.value:
                        check(label.value, "%s:%d" % (os.path.relpath(path), label.start_mark.line + 1))
                walk(value, path)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, path)

    for path in sorted(glob.glob(os.path.join(prom_dir, "prometheus*.yml"))):
        try:
            with open(path) as f:
                walk(yaml.compose(f.read()), path)
        except (OSError, yaml.YAMLError) as e:
            problems.add(os.path.relpath(path), "invalid YAML: %s" % e)
    for path in sorted(glob.glob(os.path.join(prom_dir, "targets", "*.json"))):
        where = os.path.relpath(path)
        try:
            with open(path) as f:
                groups = json.load(f)
        except ValueError as e:
            problems.add(where, "invalid JSON: %s" % e)
            continue
        if not isinstance(groups, list):
            problems.add(where, "a file_sd file holds a JSON list of target groups")
            continue
        for g in groups:
            labels = (g or {}).get("labels") or {}
            for label in labels:
                check(label, where)
            if labels.get("component") == "head" and "pool" in labels:
                problems.add(where, "a head target must not carry `pool` (berth_autoscaler_pool_* have it)")
    return target_labels


# --------------------------------------------------------------- dashboard

def panel_where(path, panel):
    return "%s: panel %s %r" % (os.path.relpath(path), panel.get("id"), panel.get("title"))


def iter_panels(panels):
    for p in panels or []:
        if isinstance(p, dict):
            yield p
            if p.get("type") == "row":
                for sub in iter_panels(p.get("panels")):
                    yield sub


def check_dashboard(path, contract, records, target_labels, problems, used_records):
    where = os.path.relpath(path)
    try:
        with open(path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        problems.add(where, "not valid JSON: %s" % e)
        return []
    if not isinstance(dash, dict):
        problems.add(where, "the top level must be a JSON object")
        return []
    if not isinstance(dash.get("title"), str) or not dash["title"].strip():
        problems.add(where, "missing title")
    if not isinstance(dash.get("uid"), str) or not UID.match(dash["uid"]):
        problems.add(where, "uid must be 1-40 characters of [A-Za-z0-9_-], got %r" % dash.get("uid"))
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        problems.add(where, "schemaVersion must be an integer >= 36, got %r" % dash.get("schemaVersion"))
    if not isinstance(dash.get("panels"), list) or not dash["panels"]:
        problems.add(where, "no panels")
        return []

    variables = {}
    for v in (dash.get("templating") or {}).get("list") or []:
        if not isinstance(v, dict) or not v.get("name"):
            problems.add(where, "template variable without a name")
            continue
        variables[v["name"]] = v
    ds_vars = {n for n, v in variables.items() if v.get("type") == "datasource"}
    for n in ds_vars:
        if variables[n].get("query") != "prometheus":
            problems.add(where, "datasource variable $%s must have query \"prometheus\"" % n)
    ds_refs = {"$" + n for n in ds_vars} | {"${%s}" % n for n in ds_vars}

    def check_vars(text, at):
        for m in GRAFANA_VAR.finditer(text):
            name = m.group(1) or m.group(2) or m.group(3)
            if name not in variables and name not in GRAFANA_BUILTIN_VARS:
                problems.add(at, "uses undefined variable $%s" % name)

    def check_datasource(ds, at):
        if ds is None:
            problems.add(at, "no datasource")
        elif ds_vars:
            uid = ds.get("uid") if isinstance(ds, dict) else ds
            if uid not in ds_refs:
                problems.add(at, "datasource %r is hard-wired; use the datasource variable (%s)"
                             % (uid, " or ".join(sorted(ds_refs))))
            if isinstance(ds, dict) and ds.get("type") not in (None, "prometheus"):
                problems.add(at, "datasource type must be prometheus, not %r" % ds.get("type"))

    for n, v in variables.items():
        if v.get("type") != "query":
            continue
        at = "%s: variable $%s" % (where, n)
        check_datasource(v.get("datasource"), at)
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if not isinstance(q, str) or not q.strip():
            problems.add(at, "empty query")
            continue
        # Grafana runs `query`; `definition` is what its editor shows.
        for text in {q, v.get("definition") or q}:
            check_vars(text, at)
            inner = re.match(r"^\s*(?:label_values|query_result|metrics)\((.*)\)\s*$", text, re.S)
            expr = inner.group(1) if inner else text
            if inner and text.strip().startswith("label_values"):
                expr = re.sub(r",\s*[A-Za-z_][A-Za-z0-9_]*\s*$", "", expr)  # drop the label argument
            check_expr(expr, at, contract, records, target_labels, problems, used_records)

    ids, boxes, exprs = {}, [], []
    for p in iter_panels(dash["panels"]):
        at = panel_where(path, p)
        pid = p.get("id")
        if not isinstance(pid, int) or isinstance(pid, bool):
            problems.add(at, "id must be an integer")
        elif pid in ids:
            problems.add(at, "id %d also used by panel %r" % (pid, ids[pid]))
        else:
            ids[pid] = p.get("title")
        if not isinstance(p.get("type"), str) or not p["type"]:
            problems.add(at, "no type")
        if not isinstance(p.get("title"), str) or not p["title"].strip():
            problems.add(at, "no title")
        g = p.get("gridPos")
        keys = ("x", "y", "w", "h")
        if not isinstance(g, dict) or any(not isinstance(g.get(k), int) or isinstance(g.get(k), bool) for k in keys):
            problems.add(at, "gridPos needs integer x, y, w, h; got %r" % (g,))
        else:
            if g["x"] < 0 or g["y"] < 0 or g["w"] < 1 or g["h"] < 1 or g["w"] > 24 or g["x"] + g["w"] > 24:
                problems.add(at, "gridPos %r is outside the 24-column grid" % (g,))
            for other_at, o in boxes:
                if g["x"] < o["x"] + o["w"] and o["x"] < g["x"] + g["w"] and \
                        g["y"] < o["y"] + o["h"] and o["y"] < g["y"] + g["h"]:
                    problems.add(at, "gridPos %r overlaps %s" % (g, other_at))
            boxes.append((at, g))
        if p.get("type") in ("row", "text"):
            continue
        check_datasource(p.get("datasource"), at)
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            problems.add(at, "no targets")
            continue
        refs = set()
        for n, t in enumerate(targets, 1):
            ref = t.get("refId") if isinstance(t, dict) else None
            tat = "%s target %s" % (at, ref if ref else "#%d" % n)
            if not isinstance(ref, str) or not ref:
                problems.add(tat, "no refId")
            elif ref in refs:
                problems.add(tat, "refId %s used twice in the panel" % ref)
            refs.add(ref)
            if not isinstance(t, dict):
                continue
            if "datasource" in t:
                check_datasource(t["datasource"], tat)
            expr = t.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                problems.add(tat, "empty expr")
                continue
            check_vars(expr, tat)
            check_expr(expr, tat, contract, records, target_labels, problems, used_records)
            exprs.append((tat, p.get("id"), ref, expr))
    return exprs


def substitute_grafana_vars(expr):
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in ("__rate_interval", "__interval", "__range"):
            return {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}[name]
        if name.endswith("_ms") or name.endswith("_s"):
            return "60"
        return ".*"
    return GRAFANA_VAR.sub(repl, expr)


def promtool_parse(promtool, exprs, problems):
    """Checks that every dashboard expr parses, with promtool check rules."""
    if not exprs:
        return
    names = {}
    lines = ["groups:", "  - name: dashboard_check", "    rules:"]
    for n, (at, pid, ref, expr) in enumerate(exprs):
        record = "dashboard_check:expr_%d:%s" % (n, re.sub(r"[^A-Za-z0-9_]", "_", str(ref)))
        names[record] = at
        lines.append("      - record: %s" % record)
        lines.append("        expr: %s" % json.dumps(substitute_grafana_vars(expr)))
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="berth-dashboard-exprs-", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        tmp = f.name
    try:
        proc = subprocess.run([promtool, "check", "rules", tmp], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)
    except OSError as e:
        problems.add(promtool, "cannot run promtool: %s" % e)
        return
    finally:
        os.unlink(tmp)
    if proc.returncode != 0:
        blamed = False
        for line in proc.stdout.splitlines():
            for record, at in names.items():
                if '"%s"' % record in line or record + ":" in line or record + '"' in line:
                    problems.add(at, "PromQL does not parse: %s" % line.strip())
                    blamed = True
        if not blamed:
            problems.add("promtool check rules (dashboard exprs)", proc.stdout.strip().replace("\n", " | "))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo_root")
    ap.add_argument("--promtool", help="also parse every dashboard expr with this promtool")
    args = ap.parse_args()
    root = os.path.abspath(args.repo_root)
    os.chdir(root)  # messages use paths relative to the repo root
    problems = Problems()

    contract = load_contract(os.path.join("docs", "metrics.yaml"), problems)
    prom_dir = os.path.join("deploy", "prometheus")
    target_labels = check_scrape_configs(prom_dir, contract, problems)
    records, n_rules = check_rules(os.path.join(prom_dir, "rules"), contract, target_labels, problems)

    dashboards = sorted(glob.glob(os.path.join("deploy", "grafana", "*.json")))
    if not dashboards:
        problems.add(os.path.join("deploy", "grafana"), "no dashboard JSON files")
    used_records, exprs = set(), []
    for path in dashboards:
        exprs.extend(check_dashboard(path, contract, records, target_labels, problems, used_records))
    if args.promtool:
        promtool_parse(args.promtool, exprs, problems)

    if problems.items:
        for item in problems.items:
            print("check_dashboard: " + item, file=sys.stderr)
        print("check_dashboard: FAILED (%d problem%s)" % (len(problems.items), "" if len(problems.items) == 1 else "s"),
              file=sys.stderr)
        return 1
    print("check_dashboard: OK: %d documented metrics; %d rules in deploy/prometheus/rules; "
          "%d dashboard(s), %d queries%s; recording rules used by dashboards: %s"
          % (len(contract), n_rules, len(dashboards), len(exprs), ", parsed by promtool" if args.promtool else "",
             ", ".join(sorted(used_records)) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
