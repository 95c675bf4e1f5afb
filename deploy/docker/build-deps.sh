#!/bin/sh
# Prints the Debian packages berth builds with, one line, space-separated:
# the PACKAGES=( ... ) list of scripts/setup.sh less Bazel's packages (the
# image builds with CMake) and ccache. The Dockerfile's builder stage installs
# exactly these, so the image follows setup.sh; check_manifests.sh runs this
# against the real setup.sh.
#   sh deploy/docker/build-deps.sh [scripts/setup.sh]
set -eu
setup=${1:-scripts/setup.sh}
pkgs=$(awk '
  /^PACKAGES=\(/ { inlist = 1; sub(/^PACKAGES=\(/, "") }
  inlist {
    line = $0; sub(/#.*/, "", line)
    if (line ~ /\)/) { sub(/\).*/, "", line); print line; exit }
    print line
  }' "$setup" | tr -s ' \t' '\n' | grep -v -e '^$' -e '^bazel' -e '^ccache$' || true)
if [ -z "$pkgs" ]; then
  echo "build-deps.sh: no PACKAGES=( ... ) list in $setup" >&2
  exit 1
fi
# shellcheck disable=SC2086  # one line, split on purpose
echo $pkgs
