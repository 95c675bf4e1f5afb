#!/usr/bin/env bash
# Offline checks of berth's deployment files (ctest: k8s_manifests):
#   1. yamllint on every YAML file under deploy/k8s (config: deploy/k8s/.yamllint)
#   2. `kubectl kustomize` on every kustomization (base, overlays/*)
#   3. the rendered objects (check_manifests.py): every built-in kind against
#      the Kubernetes OpenAPI schemas bundled in kubernetes-validate (strict,
#      run in a network namespace with no network where one can be made),
#      PodMonitor/ServiceMonitor by hand, and the cross-object consistency
#      no schema sees (ports, probes, flags, pools, RBAC, ConfigMap keys)
#   4. deploy/docker: the Dockerfiles parse, build-deps.sh reads scripts/setup.sh
#   5. deploy/systemd: systemd-analyze verify (or a parse), the units' policy,
#      the example autoscaler config
#
# Needs kubectl (with kustomize) and python3. The first run installs
# kubernetes-validate and yamllint (pinned below) from PyPI into a venv at
# ${BERTH_VENV_DIR:-~/.cache/berth/venv-k8s}; later runs reuse it offline.
# BERTH_K8S_VERSIONS picks the Kubernetes versions to validate against.
# Exits 1 on any problem, after reporting all of them.
set -uo pipefail

KUBERNETES_VALIDATE_PIN="kubernetes-validate==1.37.0"
YAMLLINT_PIN="yamllint==1.38.0"
K8S_VERSIONS="${BERTH_K8S_VERSIONS:-1.29.0 1.32.0}"

K8S_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEPLOY_DIR="$(dirname "$K8S_DIR")"
REPO="$(dirname "$DEPLOY_DIR")"
HOME_DIR="${HOME:-$(cd ~ 2>/dev/null && pwd)}"
VENV="${BERTH_VENV_DIR:-$HOME_DIR/.cache/berth/venv-k8s}"

START=$SECONDS
FAILED=()
VALIDATED=()
WORK="$(mktemp -d "${TMPDIR:-/tmp}/berth-k8s-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; FAILED+=("$*"); }
ok() { VALIDATED+=("$*"); }
rel() { printf '%s' "${1#"$REPO"/}"; }

# --- tools --------------------------------------------------------------------
step "tools"
for tool in kubectl python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "check_manifests.sh: $tool is not installed; it is required (kubectl with kustomize, python3)" >&2
    exit 1
  fi
done
echo "kubectl $(kubectl version --client 2>/dev/null | sed -n 's/^Client Version: //p' | head -1)," \
  "$(python3 --version 2>&1)"

# --- the venv with kubernetes-validate -----------------------------------------
step "kubernetes-validate venv: $VENV"
PY_VERSION="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
WANT_STAMP="$KUBERNETES_VALIDATE_PIN $YAMLLINT_PIN python$PY_VERSION"
venv_ok() {
  [[ -f "$VENV/.berth-stamp" && "$(cat "$VENV/.berth-stamp")" == "$WANT_STAMP" ]] &&
    "$VENV/bin/python" -c 'import kubernetes_validate.utils, yaml, yamllint' 2>/dev/null
}
install_venv() {
  venv_ok && return 0  # another run made it while this one waited for the lock
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV"; then
    echo "check_manifests.sh: python3 -m venv $VENV failed (on Debian: apt-get install python3-venv)" >&2
    rm -rf "$VENV"
    return 1
  fi
  echo "installing $KUBERNETES_VALIDATE_PIN $YAMLLINT_PIN from PyPI (once; later runs reuse the venv)"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
      --timeout 30 --retries 2 "$KUBERNETES_VALIDATE_PIN" "$YAMLLINT_PIN"; then
    echo "check_manifests.sh: pip could not install $KUBERNETES_VALIDATE_PIN $YAMLLINT_PIN. Is PyPI reachable?" \
      "This check needs PyPI once, to create $VENV (set BERTH_VENV_DIR to use another place)." >&2
    rm -rf "$VENV"
    return 1
  fi
  echo "$WANT_STAMP" >"$VENV/.berth-stamp"
}
venv_start=$SECONDS
if venv_ok; then
  echo "reusing it ($KUBERNETES_VALIDATE_PIN, $YAMLLINT_PIN)"
else
  mkdir -p "$(dirname "$VENV")"
  if command -v flock >/dev/null; then
    # Two runs at once (ctest -j, a developer and CI) must not build it twice.
    (flock 9 && install_venv) 9>"$VENV.lock"
  else
    install_venv
  fi
  if ! venv_ok; then
    echo "check_manifests.sh: no usable kubernetes-validate venv; stopping" >&2
    exit 1
  fi
  echo "installed in $((SECONDS - venv_start)) s"
fi
VPY="$VENV/bin/python"

# Validation runs without network where this machine lets us make a network
# namespace: proof that the schemas come from the package, not the internet.
OFFLINE=()
if unshare -n true 2>/dev/null; then
  OFFLINE=(unshare -n)
elif unshare -rn true 2>/dev/null; then
  OFFLINE=(unshare -rn)
fi
if ((${#OFFLINE[@]})); then
  OFFLINE_NOTE="offline: in a network namespace with no network (${OFFLINE[*]})"
else
  OFFLINE_NOTE="no network namespace can be made here, so run with the network up"
fi

step "kubernetes-validate self-test ($OFFLINE_NOTE)"
if "${OFFLINE[@]}" "$VPY" "$K8S_DIR/check_manifests.py" selftest --versions "$K8S_VERSIONS"; then
  ok "kubernetes-validate works offline for Kubernetes $K8S_VERSIONS"
else
  fail "kubernetes-validate self-test (the bundled schemas do not work here)"
fi

# --- 1. yamllint ----------------------------------------------------------------
mapfile -t YAML_FILES < <(cd "$REPO" && find deploy/k8s \( -name '*.yaml' -o -name '*.yml' \) -type f | sort)
step "yamllint $("$VPY" -m yamllint --version | cut -d' ' -f2): ${#YAML_FILES[@]} files under deploy/k8s (config deploy/k8s/.yamllint)"
if (cd "$REPO" && "$VPY" -m yamllint --strict -f parsable -c deploy/k8s/.yamllint "${YAML_FILES[@]}"); then
  ok "yamllint: ${#YAML_FILES[@]} YAML files"
else
  fail "yamllint found problems (above)"
fi

# --- 2. kustomize -----------------------------------------------------------------
step "kubectl kustomize"
RENDERS=()
while IFS= read -r kfile; do
  dir="$(dirname "$kfile")"
  name="$(rel "$dir")"
  name="${name#deploy/k8s/}"
  if grep -Eq '^kind:[[:space:]]*Component[[:space:]]*$' "$kfile"; then
    echo "  $name: a Component, rendered through the overlays that include it"
    continue
  fi
  out="$WORK/$(printf '%s' "$name" | tr '/' '_').yaml"
  if kubectl kustomize "$dir" >"$out" 2>"$out.err"; then
    echo "  $name: $(grep -c '^kind:' "$out") objects"
    RENDERS+=("$name=$out")
  else
    sed 's/^/    /' "$out.err"
    fail "kubectl kustomize $(rel "$dir")"
  fi
done < <(find "$K8S_DIR" -name kustomization.yaml -type f | sort)
if ((${#RENDERS[@]} == 0)); then
  fail "no kustomization rendered"
else
  ok "kubectl kustomize: ${RENDERS[*]%%=*}"
fi

# --- 3. the rendered objects --------------------------------------------------------
step "rendered objects: schemas (Kubernetes $K8S_VERSIONS, strict; $OFFLINE_NOTE), monitors, consistency"
if ((${#RENDERS[@]})); then
  if "${OFFLINE[@]}" "$VPY" "$K8S_DIR/check_manifests.py" k8s --versions "$K8S_VERSIONS" "${RENDERS[@]}"; then
    ok "rendered objects: OpenAPI schemas, PodMonitor/ServiceMonitor, cross-object consistency"
  else
    fail "rendered objects (ERROR lines above)"
  fi
fi

# --- 4. Docker ------------------------------------------------------------------------
step "deploy/docker"
mapfile -t DOCKERFILES < <(find "$DEPLOY_DIR/docker" -maxdepth 1 -type f -name 'Dockerfile*' ! -name '*.dockerignore' | sort)
if ((${#DOCKERFILES[@]} == 0)); then
  fail "no Dockerfile in deploy/docker"
else
  if "$VPY" "$K8S_DIR/check_manifests.py" docker "${DOCKERFILES[@]}"; then
    ok "Dockerfiles parse: $(for f in "${DOCKERFILES[@]}"; do printf '%s ' "$(rel "$f")"; done)"
  else
    fail "Dockerfiles (ERROR lines above)"
  fi
  for f in "${DOCKERFILES[@]}"; do
    [[ -f "$f.dockerignore" ]] || fail "$(rel "$f") has no $(basename "$f").dockerignore beside it"
  done
fi
if deps="$(sh "$DEPLOY_DIR/docker/build-deps.sh" "$REPO/scripts/setup.sh")" &&
  [[ " $deps " == *" cmake "* && " $deps " == *" ninja-build "* && " $deps " != *" bazel"* ]]; then
  echo "  builder packages (from scripts/setup.sh): $deps"
  ok "build-deps.sh reads scripts/setup.sh"
else
  fail "deploy/docker/build-deps.sh does not get the build packages out of scripts/setup.sh (got: ${deps:-nothing})"
fi
if command -v shellcheck >/dev/null; then
  if shellcheck "$K8S_DIR/check_manifests.sh" "$DEPLOY_DIR/docker/build-deps.sh"; then
    ok "shellcheck: check_manifests.sh, build-deps.sh"
  else
    fail "shellcheck (above)"
  fi
else
  echo "  (shellcheck not installed: the shell scripts are not linted)"
fi

# --- 5. systemd ----------------------------------------------------------------------
step "deploy/systemd"
mapfile -t UNITS < <(find "$DEPLOY_DIR/systemd" -maxdepth 1 -type f -name '*.service' | sort)
if ((${#UNITS[@]} == 0)); then
  fail "no units in deploy/systemd"
elif command -v systemd-analyze >/dev/null; then
  # verify wants the ExecStart binaries to exist: point the copies at stubs.
  mkdir -p "$WORK/systemd/bin"
  while IFS= read -r b; do
    printf '#!/bin/sh\n' >"$WORK/systemd/bin/$b"
    chmod +x "$WORK/systemd/bin/$b"
  done < <(sed -n 's#^ExecStart=/usr/local/bin/\([^ ]*\).*#\1#p' "${UNITS[@]}")
  copies=()
  for u in "${UNITS[@]}"; do
    sed "s#/usr/local/bin/#$WORK/systemd/bin/#g" "$u" >"$WORK/systemd/$(basename "$u")"
    copies+=("$WORK/systemd/$(basename "$u")")
  done
  # Unknown keys and bad values are only warnings there: any output fails.
  if out="$(systemd-analyze verify --man=no "${copies[@]}" 2>&1)" && [[ -z "$out" ]]; then
    ok "systemd-analyze verify: $(for u in "${UNITS[@]}"; do printf '%s ' "$(basename "$u")"; done)"
  else
    printf '%s\n' "$out" | sed "s#$WORK/systemd/#deploy/systemd/#g; s/^/  /"
    fail "systemd-analyze verify"
  fi
  for c in "${copies[@]}"; do
    score="$(systemd-analyze security --offline=yes --no-pager "$c" 2>/dev/null | tail -1)" &&
      [[ -n "$score" ]] && echo "  ${score#→ }"
  done
  if command -v systemd-sysusers >/dev/null; then
    mkdir -p "$WORK/sysroot"
    if systemd-sysusers --dry-run --root="$WORK/sysroot" "$DEPLOY_DIR/systemd/berth.sysusers.conf" >/dev/null 2>"$WORK/sysusers.err"; then
      ok "systemd-sysusers --dry-run berth.sysusers.conf"
    else
      sed 's/^/  /' "$WORK/sysusers.err"
      fail "berth.sysusers.conf"
    fi
  fi
fi
# Policy (EnvironmentFile, Restart=on-failure, hardening that lets the raylet
# run workers) always; the whole syntax too when systemd-analyze is missing.
policy=(--policy-only)
command -v systemd-analyze >/dev/null || policy=()
if ((${#UNITS[@]})) && "$VPY" "$K8S_DIR/check_manifests.py" systemd "${policy[@]}" "${UNITS[@]}"; then
  if ((${#policy[@]})); then
    ok "systemd unit policy: $(for u in "${UNITS[@]}"; do printf '%s ' "$(basename "$u")"; done)"
  else
    ok "systemd units parse (no systemd-analyze here) and follow the policy"
  fi
else
  fail "systemd units (ERROR lines above)"
fi
if "$VPY" "$K8S_DIR/check_manifests.py" config "$DEPLOY_DIR/systemd/autoscaler.yaml.example"; then
  ok "autoscaler.yaml.example"
else
  fail "deploy/systemd/autoscaler.yaml.example (ERROR lines above)"
fi

# --- summary ---------------------------------------------------------------------------
step "summary ($((SECONDS - START)) s)"
for v in "${VALIDATED[@]}"; do echo "  ok: $v"; done
if ((${#FAILED[@]})); then
  for f in "${FAILED[@]}"; do echo "  FAILED: $f"; done
  echo "check_manifests.sh: ${#FAILED[@]} check(s) failed"
  exit 1
fi
echo "check_manifests.sh: all deployment checks passed"
