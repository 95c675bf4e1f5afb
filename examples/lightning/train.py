"""A PyTorch Lightning script: `Trainer(strategy="ddp", accelerator="auto",
devices=...)`. Lightning detects the torchrun variables berth sets
(TorchElasticEnvironment) and joins the group itself; devices and num_nodes
come from LOCAL_WORLD_SIZE and GROUP_WORLD_SIZE, as under torchrun. Every
rank must end with the same parameters (checked, then printed as
`rank <r> params <hash>`).
"""

import argparse
import hashlib
import os

import lightning as L
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        loss = torch.nn.functional.mse_loss(self.net(inputs), targets)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    loader = DataLoader(TensorDataset(x, torch.sin(x.sum(dim=1, keepdim=True))), batch_size=16)
    model = Regression()
    trainer = L.Trainer(strategy="ddp", accelerator="auto",
                        devices=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
                        num_nodes=int(os.environ.get("GROUP_WORLD_SIZE", 1)),
                        max_epochs=args.epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, loader)
    rank, world = trainer.global_rank, trainer.world_size
    if rank == 0:
        print(f"cluster environment {type(trainer.strategy.cluster_environment).__name__} world {world}",
              flush=True)
    mine = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    hashes = [None] * world
    dist.all_gather_object(hashes, mine)
    print(f"rank {rank} params {mine}", flush=True)
    if len(set(hashes)) != 1:
        raise RuntimeError(f"ranks ended with different parameters: {hashes}")
    if rank == 0:
        print(f"all {world} ranks agree: params {mine}", flush=True)
    # Lightning leaves the group up after fit(): an exit with it still up
    # can abort in torch 2.x ("terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
