"""A Ray Train training function, ported to berth by changing the imports.

    ray.train.get_context()   -> berth.train.get_context()
    ray.train.report(m, ckpt) -> berth.train.report(m, checkpoint=path)
    ray.train.get_checkpoint()-> berth.train.get_checkpoint()   (a path, or None)

Rank 0 saves a checkpoint every --checkpoint-every steps into the job's
storage and reports it; after a restart every rank resumes from the latest
one. --fail-at-step N raises ValueError on --fail-rank in the first attempt
only, to see a restart resume; --step-seconds S makes each step take S
seconds longer, to watch a job be preempted and resume.
"""

import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from berth import train


def train_func(config):
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    ctx = train.get_context()
    device = torch.device("cuda", ctx.get_local_rank()) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        state = torch.load(os.path.join(checkpoint, "state.pt"), map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"rank {ctx.get_world_rank()} resuming from step {start} ({checkpoint})", flush=True)
    ddp = DistributedDataParallel(model, device_ids=[ctx.get_local_rank()] if use_cuda else None)
    for step in range(start + 1, config["steps"] + 1):
        data = torch.Generator().manual_seed(step * 1000 + ctx.get_world_rank())
        x = torch.randn(32, 8, generator=data)
        loss = torch.nn.functional.mse_loss(ddp(x.to(device)), x.sum(1, keepdim=True).to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(config["step_seconds"])
        if (step == config["fail_at_step"] and ctx.get_world_rank() == config["fail_rank"]
                and ctx.attempt == 0):
            raise ValueError(f"boom at step {step}")
        if step % config["checkpoint_every"] == 0 or step == config["steps"]:
            path = None
            if ctx.get_world_rank() == 0:
                path = os.path.join(ctx.get_storage_path() or ".", "checkpoints", f"step-{step}")
                os.makedirs(path, exist_ok=True)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                           os.path.join(path, "state.pt"))
            dist.barrier()  # the checkpoint is on disk before anyone reports it
            train.report({"step": step, "loss": loss.item()}, checkpoint=path)
    digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters()))
    print(f"rank {ctx.get_world_rank()} params {digest.hexdigest()[:16]}", flush=True)
    del ddp  # before the group: see examples/pytorch-ddp/train.py
    dist.barrier()  # no collective in flight anywhere when the groups go
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--fail-at-step", type=int, default=0)
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--step-seconds", type=float, default=0)
    train_func(vars(parser.parse_args()))
