#!/bin/sh
# Every autoscaler config the project ships must load in berth-autoscaler:
# the systemd example, and each Kubernetes render's pieces joined as the
# autoscaler pod's init container joins them.
#   check_configs.sh BERTH_AUTOSCALER REPO_ROOT
set -eu
bin=$1 repo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" --check-config --config "$repo/deploy/systemd/autoscaler.yaml.example"
for overlay in "$repo"/deploy/k8s/overlays/*/; do
  name=$(basename "$overlay")
  pieces="$repo/deploy/k8s/base/autoscaler/pool-cpu.yaml"
  for component in $(sed -n 's|.*components/pools/\([a-z0-9-]*\).*|\1|p' "$overlay/kustomization.yaml"); do
    pieces="$pieces $repo/deploy/k8s/components/pools/$component/pool-$component.yaml"
  done
  { cat "$repo/deploy/k8s/base/autoscaler/provider.yaml"; echo 'pools:'; cat $pieces; } >"$tmp/$name.yaml"
  "$bin" --check-config --config "$tmp/$name.yaml"
done
