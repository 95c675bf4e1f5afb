"""Built-in kinds against the Kubernetes OpenAPI schemas bundled in kubernetes-validate."""

import json

from manifest_checks.report import ERRORS, error, info
from manifest_checks.objects import name_of


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
