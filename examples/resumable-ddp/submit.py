"""Submits examples/resumable-ddp/train.py from Python, with the ScalingConfig a
Ray Train user already has (only the import changed), waits, and prints
the rank table.

    python submit.py [--num-workers 4] [--use-gpu --accelerator-type A10G] [--fail-at-step 7]

Ray Train:                                   berth:
    from ray.train import ScalingConfig          from berth import ScalingConfig
    trainer = TorchTrainer(train_func,           job = berth.Client().submit(
        scaling_config=ScalingConfig(...))           [python, "train.py"], scaling_config=ScalingConfig(...))
    result = trainer.fit()                       status = job.wait()
"""

import argparse
import os
import sys

import berth

parser = argparse.ArgumentParser()
parser.add_argument("--num-workers", type=int, default=4)
parser.add_argument("--use-gpu", action="store_true")
parser.add_argument("--accelerator-type", default=None)
parser.add_argument("--fail-at-step", type=int, default=0)
parser.add_argument("--timeout", type=float, default=600)
args = parser.parse_args()

scaling = berth.ScalingConfig(num_workers=args.num_workers, use_gpu=args.use_gpu,
                              accelerator_type=args.accelerator_type, placement_strategy="SPREAD")
here = os.path.dirname(os.path.abspath(__file__))
job = berth.Client().submit([sys.executable, "train.py", "--fail-at-step", str(args.fail_at_step)],
                            scaling_config=scaling, failure_config=berth.FailureConfig(max_failures=1),
                            name="resumable-ddp", working_dir=here)
status = job.wait(timeout=args.timeout)
print(f"{job.id} {status.state} after {status.attempt + 1} attempt(s); step {status.step}, "
      f"metrics {status.metrics}; checkpoint {status.latest_checkpoint}")
for cause in status.failure_causes:
    print(f"failure: {cause}")
print(status.rank_table())
sys.exit(0 if status.state == "SUCCEEDED" else 1)
