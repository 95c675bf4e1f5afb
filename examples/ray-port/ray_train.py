"""A Ray Train program of the shape Ray's docs teach: TorchTrainer with a
train_loop_config, prepare_model and prepare_data_loader, a checkpoint of a
TemporaryDirectory reported from rank 0 every epoch, get_checkpoint() on a
restart, and a RunConfig that keeps 2 checkpoints and allows 1 failure.
Rank 1 raises at --fail-at-epoch in a run that did not start from a
checkpoint, so the run restarts once and resumes.

    python ray_train.py --storage-path /tmp/results --name demo [--num-workers 2] [--use-gpu]

train.py beside it is this program ported to berth: `ray.train` replaced by
`berth.train`, nothing else (README.md has the diff).
"""

import argparse
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ray.train
import ray.train.torch
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_func(config):
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    x = torch.randn(1024, 8, generator=torch.Generator().manual_seed(1))
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32, shuffle=True))
    context = ray.train.get_context()

    start_epoch = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"), map_location="cpu")
        getattr(model, "module", model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
        print(f"rank {context.get_world_rank()} resumes at epoch {start_epoch}", flush=True)

    for epoch in range(start_epoch, config["epochs"]):
        if context.get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        total = 0.0
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        if epoch == config["fail_at_epoch"] and context.get_world_rank() == 1 and start_epoch == 0:
            raise ValueError(f"rank 1 fails at epoch {epoch}")
        metrics = {"epoch": epoch, "loss": total / len(loader)}
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if context.get_world_rank() == 0:
                torch.save({"model": getattr(model, "module", model).state_dict(),
                            "optimizer": optimizer.state_dict(), "epoch": epoch},
                           os.path.join(folder, "state.pt"))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report(metrics, checkpoint=checkpoint)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage-path", required=True)
    parser.add_argument("--name", default="ray-port")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--use-gpu", action="store_true")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--fail-at-epoch", type=int, default=2)
    parser.add_argument("--worker-python", help="the ranks' Python (default: this one)")
    args = parser.parse_args()
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.01, "epochs": args.epochs, "fail_at_epoch": args.fail_at_epoch},
        scaling_config=ScalingConfig(num_workers=args.num_workers, use_gpu=args.use_gpu),
        run_config=RunConfig(name=args.name, storage_path=args.storage_path,
                             checkpoint_config=CheckpointConfig(num_to_keep=2),
                             failure_config=FailureConfig(max_failures=1),
                             worker_runtime_env={"py_executable": args.worker_python} if args.worker_python else None))
    result = trainer.fit()
    print(f"metrics: {result.metrics}")
    print(f"checkpoint: {result.checkpoint.path}")
    with result.checkpoint.as_directory() as folder:
        print(f"checkpoint files: {sorted(os.listdir(folder))}")


if __name__ == "__main__":
    main()
