"""A Hugging Face Accelerate script, as its docs write one: `Accelerator()`,
`accelerator.prepare`, `accelerator.backward`. Nothing berth-specific:
Accelerate finds the distributed run by itself from the torchrun variables
berth sets (MULTI_CPU with Gloo here, MULTI_GPU with NCCL on GPUs), and
every rank must end with the same parameters (checked, then printed as
`rank <r> params <hash>`).
"""

import argparse
import hashlib

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    accelerator = Accelerator()
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.print(f"distributed_type {accelerator.distributed_type} num_processes {accelerator.num_processes}")
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
        accelerator.print(f"epoch {epoch} loss {loss.item():.6f}")
    accelerator.wait_for_everyone()
    params = accelerator.unwrap_model(model).parameters()
    mine = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in params)).hexdigest()[:16]
    hashes = [None] * accelerator.num_processes
    dist.all_gather_object(hashes, mine)
    print(f"rank {accelerator.process_index} params {mine}", flush=True)
    if len(set(hashes)) != 1:
        raise RuntimeError(f"ranks ended with different parameters: {hashes}")
    accelerator.print(f"all {accelerator.num_processes} ranks agree: params {mine}")
    # Not end_training(): Accelerate 0.20.3's fails without trackers. The
    # DDP wrapper goes before its group (torch 1.13 deadlocks otherwise).
    accelerator.free_memory()
    del model, optimizer, loader
    dist.barrier()  # no collective in flight anywhere when the groups go
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
