#!/usr/bin/env python3
"""Writes docs/metrics.md from the metric catalogue docs/metrics.yaml.

    metrics_doc.py [--root DIR]          rewrite docs/metrics.md
    metrics_doc.py [--root DIR] --check  fail (exit 1) if it is not up to date

The catalogue is the data (tests and the dashboard check read it); the page
is only its rendering, so the two cannot drift apart.
"""

import argparse
import pathlib
import sys

import yaml


def labels_cell(labels):
    parts = []
    for label, values in (labels or {}).items():
        parts.append(f"`{label}`" + (f" ({', '.join(values)})" if values else ""))
    return ", ".join(parts)


def render(catalogue):
    out = ["# Metrics", "", catalogue["intro"].strip(), ""]
    for component in catalogue["components"]:
        out += [f"## {component['component']}", ""]
        if component.get("text"):
            out += [component["text"].strip(), ""]
        out += ["| Metric | Type | Labels | Meaning |", "|---|---|---|---|"]
        for m in component["metrics"]:
            kind = m["type"] + (f" ({m['type_note']})" if m.get("type_note") else "")
            labels = labels_cell(m.get("labels"))
            out.append(f"| `{m['name']}` | {kind} |{f' {labels} ' if labels else ' '}| {m['help']} |")
        out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    catalogue = yaml.safe_load((args.root / "docs" / "metrics.yaml").read_text())
    page = render(catalogue)
    target = args.root / "docs" / "metrics.md"
    if args.check:
        if target.read_text() != page:
            print("metrics_doc: docs/metrics.md is not what docs/metrics.yaml says; "
                  "run scripts/metrics_doc.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
