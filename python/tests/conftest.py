"""Fixtures: a real `berth up` cluster of the test's own (BERTH_HOME in a
temporary folder, any free head port), from the build named by
$BERTH_BUILD_DIR."""

import os
import subprocess

import pytest


def _berth_binary() -> str:
    build = os.environ.get("BERTH_BUILD_DIR")
    if not build:
        pytest.fail("BERTH_BUILD_DIR: set it to the CMake build folder (tests/python/run_pytest.sh does)")
    return os.path.join(build, "client", "berth")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """`berth up --nodes 2 --gpus-per-node 2 --accelerator-type A10G`; yields
    the environment a user's shell would have (BERTH_HOME set)."""
    home = tmp_path_factory.mktemp("berth-home")
    env = dict(os.environ, BERTH_HOME=str(home))
    berth = _berth_binary()
    subprocess.run([berth, "up", "--nodes", "2", "--gpus-per-node", "2", "--accelerator-type", "A10G",
                    "--port", "0"], env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    old = os.environ.get("BERTH_HOME")
    os.environ["BERTH_HOME"] = str(home)
    try:
        yield env
    finally:
        subprocess.run([berth, "down"], env=env, stdout=subprocess.DEVNULL, timeout=120)
        if old is None:
            os.environ.pop("BERTH_HOME")
        else:
            os.environ["BERTH_HOME"] = old
