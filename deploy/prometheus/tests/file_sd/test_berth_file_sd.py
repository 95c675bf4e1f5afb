#!/usr/bin/env python3
"""Test of berth_file_sd.py on canned `berth -o json status` / `nodes` output.

    test_berth_file_sd.py PROMTOOL

Checks the written file against expected.json, then has promtool check a
config whose file_sd job reads it (promtool validates file_sd files).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "berth_file_sd.py")


def main():
    promtool = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="berth-file-sd-test-") as tmp:
        out = os.path.join(tmp, "lab.json")
        subprocess.run([sys.executable, GENERATOR, "--status-json", os.path.join(HERE, "status.json"),
                        "--nodes-json", os.path.join(HERE, "nodes.json"), "--cluster", "lab", out], check=True)
        with open(out) as f:
            got = json.load(f)
        with open(os.path.join(HERE, "expected.json")) as f:
            want = json.load(f)
        if got != want:
            print("FAIL: berth_file_sd.py wrote\n%s\nexpected\n%s" % (json.dumps(got, indent=2), json.dumps(want, indent=2)))
            return 1
        leftovers = [n for n in os.listdir(tmp) if n != "lab.json"]
        if leftovers:
            print("FAIL: temporary files left behind: %s" % leftovers)
            return 1
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("scrape_configs:\n  - job_name: berth-file-sd\n    file_sd_configs:\n"
                    "      - files: ['*.json']\n")
        proc = subprocess.run([promtool, "check", "config", config], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)
        print(proc.stdout)
        if proc.returncode != 0:
            print("FAIL: promtool rejects the generated file_sd file")
            return 1
    print("ok: berth_file_sd.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
