"""Runs examples/pytorch-ddp/train.py unchanged (one step) and prints when
this rank got going, for berth-train-bench --script:

    berth-startup rank <r> main_unix_us <t> torch_unix_us <t> joined_unix_us <t>

main: this file's first line (the interpreter is up); torch: `import torch`
done; joined: the script's init_process_group() returned (every rank is in
the group: Gloo connects all pairs before it returns).
"""

import time

MAIN_US = int(time.time() * 1e6)

import os  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

TORCH_US = int(time.time() * 1e6)
_init = dist.init_process_group


def timed_init(*args, **kwargs):
    result = _init(*args, **kwargs)
    print(f"berth-startup rank {os.environ['RANK']} main_unix_us {MAIN_US} torch_unix_us {TORCH_US} "
          f"joined_unix_us {int(time.time() * 1e6)}", flush=True)
    return result


dist.init_process_group = timed_init
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch-ddp", "train.py")
sys.argv = [script, "--steps", "1"]
runpy.run_path(script, run_name="__main__")
