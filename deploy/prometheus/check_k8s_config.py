#!/usr/bin/env python3
"""Checks a Prometheus config that uses Kubernetes service discovery.

    check_k8s_config.py PROMTOOL CONFIG

Runs `PROMTOOL check config CONFIG`. Debian's prometheus package is built
without Kubernetes service discovery, so its promtool rejects every
`kubernetes_sd_configs` block ("field kubernetes_sd_configs not found").
With such a promtool this script checks a copy of CONFIG whose
`kubernetes_sd_configs` blocks are replaced by empty `static_configs`:
everything else (relabel rules, regexes, rule files, the rules in them) is
still checked, and the copy sits next to symlinks of CONFIG's directory so
relative paths resolve the same. Python standard library only.
"""

import os
import re
import subprocess
import sys
import tempfile

UNSUPPORTED = "field kubernetes_sd_configs not found"
KEY = re.compile(r"^(\s*)(-\s+)?kubernetes_sd_configs:\s*(#.*)?$")


def run(promtool, config):
    proc = subprocess.run([promtool, "check", "config", config],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    return proc.returncode, proc.stdout


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def stub_kubernetes_sd(text):
    """Replaces each kubernetes_sd_configs block; returns (text, count)."""
    lines = text.splitlines()
    out, i, count = [], 0, 0
    while i < len(lines):
        m = KEY.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        if m.group(2):
            sys.exit("check_k8s_config: kubernetes_sd_configs as the first key "
                     "of a list item is not supported; move it down")
        key_indent = len(m.group(1))
        out.append(" " * key_indent + "static_configs: [{targets: []}]")
        count += 1
        i += 1
        # The block: blank or comment lines, deeper lines, and list items at
        # the key's own indentation ("key:\n- item" is valid YAML).
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                i += 1
                continue
            ind = indent_of(line)
            if ind > key_indent or (ind == key_indent and stripped.startswith("- ")):
                i += 1
                continue
            break
    return "\n".join(out) + "\n", count


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    promtool, config = sys.argv[1], os.path.abspath(sys.argv[2])
    rc, output = run(promtool, config)
    if rc == 0:
        sys.stdout.write(output)
        return 0
    if UNSUPPORTED not in output:
        sys.stdout.write(output)
        print("check_k8s_config: FAILED: promtool check config %s" % config)
        return 1

    with open(config) as f:
        text, count = stub_kubernetes_sd(f.read())
    if count == 0:
        sys.stdout.write(output)
        print("check_k8s_config: FAILED: promtool rejects kubernetes_sd_configs "
              "but no block was found to stub out in %s" % config)
        return 1
    print("check_k8s_config: %s was built without Kubernetes service "
          "discovery (Debian); checking %s with %d kubernetes_sd_configs "
          "block(s) replaced by empty static_configs" % (promtool, config, count))
    with tempfile.TemporaryDirectory(prefix="berth-k8s-config-") as tmp:
        src_dir = os.path.dirname(config)
        for name in os.listdir(src_dir):
            os.symlink(os.path.join(src_dir, name), os.path.join(tmp, name))
        stubbed = os.path.join(tmp, "stubbed-" + os.path.basename(config))
        with open(stubbed, "w") as f:
            f.write(text)
        rc, output = run(promtool, stubbed)
        sys.stdout.write(output)
    if rc != 0:
        print("check_k8s_config: FAILED: %s (kubernetes_sd_configs stubbed)" % config)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
