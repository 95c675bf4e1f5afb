"""systemd units: berth's policy (their syntax is systemd-analyze's)."""

import os
import re

from manifest_checks.report import REPO, error, info


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
