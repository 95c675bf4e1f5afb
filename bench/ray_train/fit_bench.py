"""One TorchTrainer run of the Ray Train vs berth comparison (compare.sh):
the same training function under Ray Train (`--system ray`, on the Ray
cluster `ray start` made) or under berth.train (`--system berth`, on the
cluster `berth up` made): a small DDP model over Gloo, 3 epochs, a
checkpoint of a TemporaryDirectory reported by rank 0 every epoch; with
--fail, rank 1 raises in epoch 1 of the first attempt and the run restarts
once. Prints one JSON line: fit() wall time, time from fit() to the first
report, and (with --fail) the time from the raise to the restarted
attempt's first report.

    python fit_bench.py --system ray|berth --workers N [--fail] --storage DIR
"""

import argparse
import importlib
import json
import os
import tempfile
import time
import uuid


def train_func(config):
    import torch

    train = importlib.import_module(config["train"])
    train_torch = importlib.import_module(config["train"] + ".torch")
    context = train.get_context()
    rank = context.get_world_rank()
    torch.manual_seed(0)
    model = train_torch.prepare_model(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                          torch.nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(512, 32, generator=torch.Generator().manual_seed(1))
    loader = train_torch.prepare_data_loader(torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32, shuffle=True))
    resumed = train.get_checkpoint() is not None

    def event(name):
        with open(config["events"], "a") as f:
            f.write(json.dumps({"event": name, "rank": rank, "time": time.time(), "resumed": resumed}) + "\n")

    start = 0
    if resumed:
        with train.get_checkpoint().as_directory() as folder:
            start = torch.load(os.path.join(folder, "state.pt"))["epoch"] + 1
    for epoch in range(start, 3):
        if context.get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if config["fail"] and epoch == 1 and rank == 1 and not resumed:
            event("raise")
            raise RuntimeError("rank 1 fails in epoch 1")
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if rank == 0:
                torch.save({"epoch": epoch}, os.path.join(folder, "state.pt"))
                checkpoint = train.Checkpoint.from_directory(folder)
                event("report")
            train.report({"epoch": epoch, "loss": loss.item()}, checkpoint=checkpoint)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", choices=("ray", "berth"), required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--storage", required=True)
    args = parser.parse_args()
    if args.system == "ray":
        import ray

        ray.init(address="auto", log_to_driver=False)
    train = importlib.import_module(f"{args.system}.train")
    trainer_class = importlib.import_module(f"{args.system}.train.torch").TorchTrainer
    name = f"{args.system}-{args.workers}-{uuid.uuid4().hex[:8]}"
    events = os.path.join(args.storage, name + ".events.jsonl")
    trainer = trainer_class(
        train_func, train_loop_config={"train": f"{args.system}.train", "events": events, "fail": args.fail},
        scaling_config=train.ScalingConfig(num_workers=args.workers),
        run_config=train.RunConfig(name=name, storage_path=args.storage,
                                   checkpoint_config=train.CheckpointConfig(num_to_keep=2),
                                   failure_config=train.FailureConfig(max_failures=1)))
    began = time.time()
    trainer.fit()
    ended = time.time()
    seen = [json.loads(line) for line in open(events)]
    reports = [e["time"] for e in seen if e["event"] == "report"]
    raised = [e["time"] for e in seen if e["event"] == "raise"]
    resumed = [e["time"] for e in seen if e["event"] == "report" and e["resumed"]]
    print(json.dumps({"system": args.system, "workers": args.workers, "fail": args.fail,
                      "fit_s": ended - began, "first_report_s": min(reports) - began,
                      "recovery_s": (min(resumed) - raised[0]) if raised and resumed else None}))


if __name__ == "__main__":
    main()
