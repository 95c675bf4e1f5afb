"""Ray Train's ScalingConfig and FailureConfig, for berth.

Same field names and defaults as ``ray.train.ScalingConfig`` and
``ray.train.FailureConfig``, so a Ray user's config ports by changing the
import. Values are checked when the config is built; errors name the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Tuple, Dict, List, Optional, Union

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


def _check_resources_list(name: str, resources, num_workers: int) -> None:
    """resources_per_worker as a dict (every worker) or a list (one per rank)."""
    if not isinstance(resources, list):
        _check_resources(name, resources)
        return
    if len(resources) != num_workers:
        raise InvalidArgumentError(f"{name}: {len(resources)} entries for num_workers {num_workers}; "
                                   "give one per worker")
    for i, entry in enumerate(resources):
        if entry is None:
            raise InvalidArgumentError(f"{name}[{i}]: a dict of resource name -> amount, not None")
        _check_resources(f"{name}[{i}]", entry)


def _selector_requirements(name: str, selector) -> list:
    """Ray's label_selector dict ({"zone": "us-east1", "tier": "!spot",
    "gpu": "in(A100,H100)", "pool": "!in(a,b)"}) as berth's requirements."""
    from berth.v1 import common_pb2

    if not isinstance(selector, dict):
        raise InvalidArgumentError(f"{name}: a dict of label -> value, such as {{'zone': 'us-east1'}}, "
                                   f"not {type(selector).__name__}")
    requirements = []
    for key, value in selector.items():
        if not isinstance(key, str) or not key or not isinstance(value, str) or not value:
            raise InvalidArgumentError(f"{name}[{key!r}]: label keys and values are non-empty strings")
        negated = value.startswith("!")
        text = value[1:] if negated else value
        if text.startswith("in(") and text.endswith(")"):
            values = [v.strip() for v in text[3:-1].split(",")]
            if not all(values):
                raise InvalidArgumentError(f"{name}[{key!r}]: {value!r} has an empty value")
        elif "(" in text or ")" in text or "," in text or not text:
            raise InvalidArgumentError(f"{name}[{key!r}]: {value!r} is not 'v', '!v', 'in(a,b)' or '!in(a,b)'")
        else:
            values = [text]
        op = common_pb2.LABEL_OPERATOR_NOT_IN if negated else common_pb2.LABEL_OPERATOR_IN
        requirements.append(common_pb2.LabelSelectorRequirement(key=key, op=op, values=values))
    return requirements


def _topology_keys(topology) -> tuple:
    """(required, preferred) of a topology dict; errors name the field."""
    if not isinstance(topology, dict) or not topology or set(topology) - {"required", "preferred"}:
        raise InvalidArgumentError(
            "topology: {'required': label_key} or {'preferred': [label_key, ...]}, "
            f"not {topology!r}")
    if len(topology) == 2:
        raise InvalidArgumentError("topology: give required or preferred, not both")
    required = topology.get("required", "")
    if "required" in topology and (not isinstance(required, str) or not required):
        raise InvalidArgumentError(f"topology.required: a node label key, not {required!r}")
    preferred = topology.get("preferred", [])
    if isinstance(preferred, str):
        preferred = [preferred]
    if not isinstance(preferred, list) or any(not isinstance(k, str) or not k for k in preferred):
        raise InvalidArgumentError(f"topology.preferred: a list of node label keys, not {preferred!r}")
    return required, preferred


@dataclass
class ScalingConfig:
    """How many workers a job runs and what each one needs (Ray Train's).

    Bundle 0 holds ``trainer_resources`` merged with rank 0's
    ``resources_per_worker``, so rank 0 always lands with the trainer.

    Attributes:
        trainer_resources: resources of the job's driver; None = {"CPU": 1}.
        num_workers: the world size, or Ray Train V2's (min, max) for an
            elastic job: it starts once min fit and grows toward max.
        use_gpu: one GPU per worker unless resources_per_worker says.
        resources_per_worker: None = {"GPU": 1} with use_gpu, else {"CPU": 1}.
            A list gives each rank its own: rank i's is entry i.
        placement_strategy: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD.
        accelerator_type: a GPU model such as "A10G"; only nodes with it.
        label_selector: Ray Train V2's: a dict of node label -> value
            ("v", "!v", "in(a,b)", "!in(a,b)") for every worker, or a list
            with one dict per rank.
        rank_resources: berth's: rank -> extra resources merged into that
            rank's bundle, e.g. {0: {"memory": 200 * 2**30}}.
        topology: berth's topology domains, {"required": key} (every rank
            in one value of a node label key, e.g. "berth.io/topology-rack")
            or {"preferred": [key, ...]} (fewest domains, innermost first).
            A string is Ray's TPU topology, refused: berth has no TPUs.
        use_tpu: Ray's; berth has no TPUs.
    """

    trainer_resources: Optional[Dict[str, Number]] = None
    num_workers: Union[int, Tuple[int, int]] = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Union[Dict[str, Number], List[Dict[str, Number]]]] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    use_tpu: bool = False
    topology: Optional[Union[str, Dict[str, Union[str, List[str]]]]] = None
    label_selector: Optional[Union[Dict[str, str], List[Dict[str, str]]]] = None
    rank_resources: Optional[Dict[int, Dict[str, Number]]] = None

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, tuple):
            if (len(self.num_workers) != 2 or
                    any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.num_workers)):
                raise InvalidArgumentError(f"num_workers: (min, max), integers >= 1, not {self.num_workers!r}")
            if self.num_workers[0] > self.num_workers[1]:
                raise InvalidArgumentError(
                    f"num_workers: min {self.num_workers[0]} is more than max {self.num_workers[1]}")
        elif isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise InvalidArgumentError(f"num_workers: an integer >= 1, not {self.num_workers!r}")
        if not isinstance(self.use_gpu, bool):
            raise InvalidArgumentError(f"use_gpu: True or False, not {self.use_gpu!r}")
        _check_resources("trainer_resources", self.trainer_resources)
        _check_resources_list("resources_per_worker", self.resources_per_worker, self.total_workers)
        if self.rank_resources is not None:
            if not isinstance(self.rank_resources, dict):
                raise InvalidArgumentError("rank_resources: a dict of rank -> resources")
            for rank, resources in self.rank_resources.items():
                if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.total_workers:
                    raise InvalidArgumentError(
                        f"rank_resources[{rank!r}]: no such rank; ranks are 0..{self.total_workers - 1}")
                _check_resources(f"rank_resources[{rank}]", resources)
        if isinstance(self.label_selector, list):
            if len(self.label_selector) != self.total_workers:
                raise InvalidArgumentError(
                    f"label_selector: {len(self.label_selector)} entries for num_workers {self.total_workers}; "
                    "give a dict for every worker or a list with one per worker")
            for i, selector in enumerate(self.label_selector):
                _selector_requirements(f"label_selector[{i}]", selector)
        elif self.label_selector is not None:
            _selector_requirements("label_selector", self.label_selector)
        if self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise InvalidArgumentError(
                f"placement_strategy: one of {', '.join(PLACEMENT_STRATEGIES)}, not {self.placement_strategy!r}")
        if self.accelerator_type is not None and (not isinstance(self.accelerator_type, str)
                                                  or not self.accelerator_type):
            raise InvalidArgumentError(f"accelerator_type: a GPU model name such as 'A10G', not {self.accelerator_type!r}")
        if self.use_tpu or isinstance(self.topology, str):
            raise InvalidArgumentError("use_tpu: berth schedules GPUs and CPUs, not TPUs")
        if self.topology is not None:
            _topology_keys(self.topology)

    @property
    def total_workers(self) -> int:
        """The most workers (Ray's ScalingConfig.total_workers); the world size unless elastic."""
        return self.num_workers[1] if isinstance(self.num_workers, tuple) else self.num_workers

    @property
    def min_workers(self) -> int:
        """The fewest workers an elastic job runs with; total_workers if not elastic."""
        return self.num_workers[0] if isinstance(self.num_workers, tuple) else self.num_workers

    def to_proto(self):
        """The wire ScalingConfig (berth.v1.ScalingConfig)."""
        from berth.v1 import common_pb2, train_pb2

        proto = train_pb2.ScalingConfig(num_workers=self.total_workers, use_gpu=self.use_gpu,
                                        accelerator_type=self.accelerator_type or "")
        if isinstance(self.num_workers, tuple):
            proto.min_workers = self.num_workers[0]
        if isinstance(self.resources_per_worker, list):
            for entry in self.resources_per_worker:
                proto.resources_per_worker_list.add().amounts.update(
                    {key: float(amount) for key, amount in entry.items()})
        else:
            for key, amount in (self.resources_per_worker or {}).items():
                proto.resources_per_worker.amounts[key] = float(amount)
        for rank, resources in (self.rank_resources or {}).items():
            proto.rank_resources[rank].amounts.update({key: float(amount) for key, amount in resources.items()})
        selectors = self.label_selector if isinstance(self.label_selector, list) else (
            [self.label_selector] if self.label_selector is not None else [])
        for i, selector in enumerate(selectors):
            proto.label_selector.add().requirements.extend(_selector_requirements(f"label_selector[{i}]", selector))
        for key, amount in (self.trainer_resources or {}).items():
            proto.trainer_resources.amounts[key] = float(amount)
        if self.trainer_resources is not None and not self.trainer_resources:
            proto.trainer_resources.amounts["CPU"] = 0.0  # {} = no trainer resources, as in Ray
        proto.placement_strategy = common_pb2.PlacementStrategy.Value(f"PLACEMENT_STRATEGY_{self.placement_strategy}")
        if self.topology is not None:
            required, preferred = _topology_keys(self.topology)
            proto.topology.required = required
            proto.topology.preferred.extend(preferred)
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
        progress_timeout_s: hang detection: an attempt that reported
            progress (``berth.train.report``) and then nothing for this many
            seconds fails and restarts under max_failures; 0 = off.
    """

    max_failures: int = 0
    fail_fast: Union[bool, str] = False
    count_node_failures: bool = True
    progress_timeout_s: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) or self.max_failures < -1:
            raise InvalidArgumentError(f"max_failures: -1 (unlimited), 0 or more, not {self.max_failures!r}")
        if self.fail_fast not in (True, False, "raise"):
            raise InvalidArgumentError(f"fail_fast: True, False or 'raise', not {self.fail_fast!r}")
        if self.fail_fast and self.max_failures != 0:
            raise InvalidArgumentError("fail_fast: needs max_failures=0 (as in Ray)")
        if not isinstance(self.count_node_failures, bool):
            raise InvalidArgumentError(f"count_node_failures: True or False, not {self.count_node_failures!r}")
        if (isinstance(self.progress_timeout_s, bool) or not isinstance(self.progress_timeout_s, int)
                or self.progress_timeout_s < 0):
            raise InvalidArgumentError(
                f"progress_timeout_s: seconds >= 0 (0 = off), not {self.progress_timeout_s!r}")

    def to_proto(self):
        from berth.v1 import train_pb2

        return train_pb2.FailureConfig(max_failures=self.max_failures,
                                       count_node_failures=self.count_node_failures,
                                       progress_timeout_s=self.progress_timeout_s)
