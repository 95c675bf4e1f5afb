"""A plain torchrun-style DDP script: nothing berth-specific.

It runs unchanged under `torchrun --nproc_per_node 2 train.py`, under
berth (examples/pytorch-ddp/job.yaml) and on a GPU machine with NCCL (one
rank per GPU). Every rank trains the same small regression model on its own
batches; DDP averages the gradients, so every rank must end with identical
parameters: the script checks that itself (all_gather of the hashes) and
prints `rank <r> params <hash>`.

--fail-at-step N --fail-rank R raises ValueError("boom at step N") on rank
R, to try how a failure is reported.
"""

import argparse
import hashlib
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--fail-at-step", type=int, default=0)
    parser.add_argument("--fail-rank", type=int, default=1)
    return parser.parse_args()


def params_hash(model):
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def main():
    args = parse_args()
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend)  # env:// : MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    print(f"rank {rank}/{world} local_rank {local_rank} backend {backend} torch {torch.__version__}"
          f" device {device}", flush=True)

    torch.manual_seed(0)  # the same initial parameters everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch_size, 16, generator=data)
        y = torch.sin(x.sum(dim=1, keepdim=True))
        loss = torch.nn.functional.mse_loss(ddp(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == args.fail_at_step and rank == args.fail_rank:
            raise ValueError(f"boom at step {step}")
        if rank == 0 and (step % 10 == 0 or step == args.steps):
            print(f"step {step} loss {loss.item():.6f}", flush=True)

    mine = params_hash(model)
    hashes = [None] * world
    dist.all_gather_object(hashes, mine)
    print(f"rank {rank} params {mine}", flush=True)
    if len(set(hashes)) != 1:
        raise RuntimeError(f"ranks ended with different parameters: {hashes}")
    if rank == 0:
        print(f"all {world} ranks agree: params {mine}", flush=True)
    # The DDP wrapper goes before its process group: torch 1.13 deadlocks
    # when the group is destroyed with a reducer still holding it.
    del ddp
    dist.barrier()  # no collective in flight anywhere when the groups go
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
