"""The flags each berth binary accepts, as the binary itself prints them (--help-json)."""

import json
import os
import subprocess
import sys

from manifest_checks.report import REPO


# The flags the deployment contract names for each binary; the binaries say
# what else they accept (--help-json).
CONTRACT_FLAGS = {
    "berth-head": {"listen", "advertise-address", "metrics-listen", "heartbeat-period-ms",
                   "heartbeat-misses", "checkpoint-root", "worker-binary"},
    "berth-raylet": {"head", "listen", "advertise-host", "node-id", "num-gpus",
                     "accelerator-type", "num-cpus", "memory", "labels", "node-pool",
                     "metrics-listen", "log-dir"},
    "berth-autoscaler": {"head", "config", "metrics-listen"},
}
# Where each binary is when BERTH_BINARIES ("name=path,...", set by ctest)
# does not say: the default CMake build directory.
DEFAULT_BINARIES = {
    "berth-head": "build/scheduler/berth-head",
    "berth-raylet": "build/raylet/berth-raylet",
    "berth-autoscaler": "build/autoscaler/berth-autoscaler",
}


def binary_flags(binary):
    """The long flags `binary` accepts, as it prints them (--help-json)."""
    given = dict(item.split("=", 1) for item in os.environ.get("BERTH_BINARIES", "").split(",") if "=" in item)
    path = given.get(binary) or os.path.join(REPO, DEFAULT_BINARIES[binary])
    try:
        out = subprocess.run([path, "--help-json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=30, check=True).stdout
        return {flag["name"] for flag in json.loads(out)["flags"]}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        sys.exit(f"check_manifests: cannot ask {path} for its flags ({e}); build it first "
                 f"or name it in BERTH_BINARIES")


def known_flags():
    known, from_binary = {}, {}
    for binary, contract in CONTRACT_FLAGS.items():
        from_binary[binary] = binary_flags(binary)
        known[binary] = contract | from_binary[binary]
    return known, from_binary
