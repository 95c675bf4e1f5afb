"""Ray Train's ScalingConfig and FailureConfig, for berth.

Same field names and defaults as ``ray.train.ScalingConfig`` and
``ray.train.FailureConfig``, so a Ray user's config ports by changing the
import. Values are checked when the config is built; errors name the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Optional, Union

from berth.errors import InvalidArgumentError

Number = Union[int, float]

PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def _check_resources(name: str, resources: Optional[Dict[str, Number]]) -> None:
    if resources is None:
        return
    if not isinstance(resources, dict):
        raise InvalidArgumentError(f"{name}: a dict of resource name -> amount, not {type(resources).__name__}")
    for key, amount in resources.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(f"{name}: resource names are non-empty strings, not {key!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise InvalidArgumentError(f"{name}[{key!r}]: a number, not {amount!r}")
        if not math.isfinite(amount) or amount < 0:
            raise InvalidArgumentError(f"{name}[{key!r}]: must be finite and >= 0, not {amount!r}")


@dataclass
class ScalingConfig:
    """How many workers a job runs and what each one needs (Ray Train's).

    Bundle 0 holds ``trainer_resources`` merged with rank 0's
    ``resources_per_worker``, so rank 0 always lands with the trainer.

    Attributes:
        trainer_resources: resources of the job's driver; None = {"CPU": 1}.
        num_workers: the world size.
        use_gpu: one GPU per worker unless resources_per_worker says.
        resources_per_worker: None = {"GPU": 1} with use_gpu, else {"CPU": 1}.
        placement_strategy: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD.
        accelerator_type: a GPU model such as "A10G"; only nodes with it.
        use_tpu, topology: Ray's TPU fields; berth has no TPUs.
    """

    trainer_resources: Optional[Dict[str, Number]] = None
    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, Number]] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    use_tpu: bool = False
    topology: Optional[str] = None

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise InvalidArgumentError(f"num_workers: an integer >= 1, not {self.num_workers!r}")
        if not isinstance(self.use_gpu, bool):
            raise InvalidArgumentError(f"use_gpu: True or False, not {self.use_gpu!r}")
        _check_resources("trainer_resources", self.trainer_resources)
        _check_resources("resources_per_worker", self.resources_per_worker)
        if self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise InvalidArgumentError(
                f"placement_strategy: one of {', '.join(PLACEMENT_STRATEGIES)}, not {self.placement_strategy!r}")
        if self.accelerator_type is not None and (not isinstance(self.accelerator_type, str)
                                                  or not self.accelerator_type):
            raise InvalidArgumentError(f"accelerator_type: a GPU model name such as 'A10G', not {self.accelerator_type!r}")
        if self.use_tpu or self.topology:
            raise InvalidArgumentError("use_tpu: berth schedules GPUs and CPUs, not TPUs")

    @property
    def total_workers(self) -> int:
        """The world size (Ray's ScalingConfig.total_workers)."""
        return self.num_workers

    def to_proto(self):
        """The wire ScalingConfig (berth.v1.ScalingConfig)."""
        from berth.v1 import common_pb2, train_pb2

        proto = train_pb2.ScalingConfig(num_workers=self.num_workers, use_gpu=self.use_gpu,
                                        accelerator_type=self.accelerator_type or "")
        for key, amount in (self.resources_per_worker or {}).items():
            proto.resources_per_worker.amounts[key] = float(amount)
        for key, amount in (self.trainer_resources or {}).items():
            proto.trainer_resources.amounts[key] = float(amount)
        if self.trainer_resources is not None and not self.trainer_resources:
            proto.trainer_resources.amounts["CPU"] = 0.0  # {} = no trainer resources, as in Ray
        proto.placement_strategy = common_pb2.PlacementStrategy.Value(f"PLACEMENT_STRATEGY_{self.placement_strategy}")
        return proto


@dataclass
class FailureConfig:
    """What to do when a worker fails (Ray Train's FailureConfig).

    Attributes:
        max_failures: restarts from the latest checkpoint before the job
            fails; 0 = none, -1 = unlimited.
        fail_fast: Ray's flag; True is max_failures=0.
        count_node_failures: whether an attempt ended by a node dying under
            it counts against max_failures (True, as in Ray); False
            restarts on the rescheduled bundles without counting.
    """

    max_failures: int = 0
    fail_fast: Union[bool, str] = False
    count_node_failures: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) or self.max_failures < -1:
            raise InvalidArgumentError(f"max_failures: -1 (unlimited), 0 or more, not {self.max_failures!r}")
        if self.fail_fast not in (True, False, "raise"):
            raise InvalidArgumentError(f"fail_fast: True, False or 'raise', not {self.fail_fast!r}")
        if self.fail_fast and self.max_failures != 0:
            raise InvalidArgumentError("fail_fast: needs max_failures=0 (as in Ray)")
        if not isinstance(self.count_node_failures, bool):
            raise InvalidArgumentError(f"count_node_failures: True or False, not {self.count_node_failures!r}")

    def to_proto(self):
        from berth.v1 import train_pb2

        return train_pb2.FailureConfig(max_failures=self.max_failures,
                                       count_node_failures=self.count_node_failures)
