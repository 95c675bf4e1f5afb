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

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse
import re

import yaml

from manifest_checks.report import ERRORS, HERE, REPO, error, info
from manifest_checks.binaries import CONTRACT_FLAGS, known_flags
from manifest_checks.schema import CRD_KINDS, schema_validate, selftest
from manifest_checks.autoscaler_config import check_autoscaler_config
from manifest_checks.render import check_render
from manifest_checks.dockerfiles import check_dockerfile
from manifest_checks.units import check_unit


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
