"""Ray Train's ``ray.train.torch`` for berth: TorchTrainer and the helpers a
training function calls on every rank (prepare_model, prepare_data_loader,
get_device, enable_reproducibility).

The helpers need only torch. A rank's device is its own GPU: berth lists a
node's workers' GPUs in local-rank order in CUDA_VISIBLE_DEVICES
(train/rank_assignment.h), so rank r of k GPUs each owns devices r*k ..
r*k+k-1 of what it sees.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch

from berth.errors import InvalidArgumentError
from berth.train._refused import refuse
from berth.train._trainer import DataParallelTrainer


def __getattr__(name: str):
    refuse(__name__, name)


@dataclass
class TorchConfig:
    """The process group every rank joins: ``backend`` (default NCCL on
    GPUs, Gloo on CPUs) and its timeout."""

    backend: Optional[str] = None
    init_method: str = "env"
    timeout_s: int = 1800

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in ("nccl", "gloo", "mpi"):
            raise InvalidArgumentError(f"backend: 'nccl', 'gloo', 'mpi' or None, not {self.backend!r}")
        if self.init_method != "env":
            raise InvalidArgumentError(f"init_method: berth sets the rendezvous by env, not {self.init_method!r}")
        if not isinstance(self.timeout_s, int) or isinstance(self.timeout_s, bool) or self.timeout_s <= 0:
            raise InvalidArgumentError(f"timeout_s: a positive int, not {self.timeout_s!r}")


class TorchTrainer(DataParallelTrainer):
    """Runs ``train_loop_per_worker`` on every rank of a berth job, as Ray
    Train's TorchTrainer does; ``fit()`` returns a Result."""

    def __init__(self, train_loop_per_worker, *, train_loop_config: Optional[Dict[str, Any]] = None,
                 torch_config: Optional[TorchConfig] = None, **kwargs: Any) -> None:
        torch_config = torch_config or TorchConfig()
        if not isinstance(torch_config, TorchConfig):
            raise InvalidArgumentError(f"torch_config: a TorchConfig, not {type(torch_config).__name__}")
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend=torch_config.backend, timeout_s=torch_config.timeout_s, **kwargs)


def get_devices() -> List[torch.device]:
    """This rank's devices: its GPUs, else the CPU."""
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return [torch.device("cpu")]
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    per_rank = max(1, torch.cuda.device_count() // max(1, local_world_size))
    first = local_rank * per_rank if (local_rank + 1) * per_rank <= torch.cuda.device_count() else 0
    return [torch.device("cuda", i) for i in range(first, first + per_rank)]


def get_device() -> torch.device:
    """This rank's (first) device."""
    return get_devices()[0]


def prepare_model(model: torch.nn.Module, move_to_device: bool = True, parallel_strategy: Optional[str] = "ddp",
                  parallel_strategy_kwargs: Optional[Dict[str, Any]] = None) -> torch.nn.Module:
    """The model on this rank's device, wrapped for data-parallel training
    ("ddp": DistributedDataParallel, "fsdp": FullyShardedDataParallel, None:
    not wrapped). Not wrapped in a world of one."""
    if parallel_strategy not in ("ddp", "fsdp", None):
        raise ValueError(f"parallel_strategy: 'ddp', 'fsdp' or None, not {parallel_strategy!r}")
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy is None or not torch.distributed.is_initialized() or torch.distributed.get_world_size() < 2:
        return model
    kwargs = dict(parallel_strategy_kwargs or {})
    if parallel_strategy == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel

        if device.type == "cuda":
            kwargs.setdefault("device_id", device)
        return FullyShardedDataParallel(model, **kwargs)
    if device.type == "cuda":
        kwargs.setdefault("device_ids", [device])
        kwargs.setdefault("output_device", device)
    return torch.nn.parallel.DistributedDataParallel(model, **kwargs)


class _DeviceLoader:
    """A DataLoader whose batches arrive on this rank's device."""

    def __init__(self, loader: torch.utils.data.DataLoader, device: torch.device) -> None:
        self._loader, self._device = loader, device

    def _move(self, item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return item.to(self._device, non_blocking=True)
        if isinstance(item, (list, tuple)):
            return type(item)(self._move(i) for i in item)
        if isinstance(item, dict):
            return {k: self._move(v) for k, v in item.items()}
        return item

    def __iter__(self):
        return (self._move(batch) for batch in self._loader)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:  # sampler, dataset, batch_size...
        return getattr(self._loader, name)


def prepare_data_loader(data_loader: torch.utils.data.DataLoader, add_dist_sampler: bool = True,
                        move_to_device: bool = True, auto_transfer: bool = True):
    """The data loader with each rank reading its own shard (a
    DistributedSampler, shuffling as the loader did) and, with
    ``move_to_device``, batches on this rank's device. ``set_epoch`` of the
    loader's sampler reshuffles per epoch, as in Ray."""
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

    distributed = torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1
    if add_dist_sampler and distributed and not isinstance(data_loader.sampler, DistributedSampler):
        shuffle = isinstance(data_loader.sampler, RandomSampler)
        data_loader = DataLoader(
            data_loader.dataset, batch_size=data_loader.batch_size,
            sampler=DistributedSampler(data_loader.dataset, shuffle=shuffle),
            num_workers=data_loader.num_workers, collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory, drop_last=data_loader.drop_last, timeout=data_loader.timeout,
            worker_init_fn=data_loader.worker_init_fn, generator=data_loader.generator)
    if move_to_device and get_device().type != "cpu":
        return _DeviceLoader(data_loader, get_device())
    return data_loader


def enable_reproducibility(seed: int = 0) -> None:
    """Seeds Python, numpy (if there) and torch, and has torch choose
    deterministic algorithms; before the model and data are made."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    # cuBLAS is deterministic only with a fixed workspace.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


__all__ = ["TorchTrainer", "TorchConfig", "prepare_model", "prepare_data_loader", "get_device", "get_devices",
           "enable_reproducibility"]
