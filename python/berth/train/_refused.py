"""Ray Train names berth does not have, each with why and what to use: a
ported program that imports one gets an ImportError saying so at once,
never a stand-in that silently does something else (docs/train.md has the
table of every name)."""

from __future__ import annotations

_DATA = "Ray Data datasets: read the data in the training function (prepare_data_loader shards a DataLoader)"
_CALLBACKS = "Ray Train callbacks: report() from the training function, and read the run folder"
_AMP = "deprecated in Ray (AMP): use torch.autocast and torch.amp.GradScaler"

REFUSED = {
    "berth.train": {
        "get_dataset_shard": _DATA,
        "DataConfig": _DATA,
        "TRAIN_DATASET_KEY": _DATA,
        "SyncConfig": "deprecated in Ray: storage_path is a folder every node mounts",
        "BackendConfig": "TorchConfig (berth.train.torch) is the one backend",
        "LoggingConfig": "the ranks' output is in `berth logs`, and fit() prints it",
        "UserCallback": _CALLBACKS,
        "MLflowLoggerCallback": _CALLBACKS,
        "CheckpointUploadMode": "report() copies the checkpoint before it returns (Ray's SYNC)",
        "CheckpointConsistencyMode": "report() copies the checkpoint before it returns (Ray's SYNC)",
        "ReportedCheckpoint": "Result.best_checkpoints lists (Checkpoint, metrics) after fit()",
        "ReportedCheckpointStatus": "Result.best_checkpoints lists (Checkpoint, metrics) after fit()",
        "get_all_reported_checkpoints": "Result.best_checkpoints lists (Checkpoint, metrics) after fit()",
        "ValidationConfig": "validate in the training function and report the metric",
        "ValidationFn": "validate in the training function and report the metric",
        "ValidationTaskConfig": "validate in the training function and report the metric",
    },
    "berth.train.torch": {
        "prepare_optimizer": _AMP,
        "backward": _AMP,
        "accelerate": _AMP,
        "TorchCheckpoint": "deprecated in Ray: berth.train.Checkpoint",
        "get_devices_from_ray": "berth.train.torch.get_devices",
    },
}


def refuse(module: str, name: str) -> None:
    """A module's __getattr__: ImportError for a refused Ray name (so `from
    berth.train import get_dataset_shard` says why), AttributeError else."""
    why = REFUSED.get(module, {}).get(name)
    if why is not None:
        raise ImportError(f"{module}.{name}: not supported by berth ({why}); docs/train.md lists Ray Train's names")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
