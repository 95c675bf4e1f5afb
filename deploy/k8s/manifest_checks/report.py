"""Where the checks report: every problem is printed as `ERROR <where>: <what>` and kept."""

import os


# deploy/k8s, and the repository above it.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(HERE))

ERRORS = []


def error(where, what):
    ERRORS.append(f"{where}: {what}")
    print(f"ERROR {where}: {what}", flush=True)


def info(text):
    print(f"  {text}", flush=True)
