"""Ray Train's ``ray.train.collective`` for berth: collectives among a
TorchTrainer's ranks that move Python objects (over Gloo, whatever the
training backend). Every rank must call them, in the same order."""

from __future__ import annotations

from typing import Any

from berth.train._session import _coordination_group


def barrier() -> None:
    """Waits until every rank has called it."""
    import torch.distributed as dist

    dist.barrier(group=_coordination_group())


def broadcast_from_rank_zero(data: Any) -> Any:
    """Rank 0's ``data`` (any picklable object), on every rank."""
    import torch.distributed as dist

    box = [data]
    dist.broadcast_object_list(box, src=0, group=_coordination_group())
    return box[0]


__all__ = ["barrier", "broadcast_from_rank_zero"]
