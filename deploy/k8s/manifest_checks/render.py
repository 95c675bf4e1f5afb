"""One render: that its pieces agree (ports, probes, flags, pools, RBAC, ConfigMap keys, the
restricted Pod Security Standard), and the job files it ships.
"""

import os
import re
import subprocess
from decimal import Decimal

import yaml

from manifest_checks.report import error, info
from manifest_checks.objects import (
    all_containers,
    binary_of,
    name_of,
    named_ports,
    one_flag,
    parse_flags,
    pod_labels,
    pod_spec,
    port_of,
    quantity,
    selector_matches,
)
from manifest_checks.schema import CRD_KINDS
from manifest_checks.monitors import check_monitor
from manifest_checks.autoscaler_config import check_autoscaler_config


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
