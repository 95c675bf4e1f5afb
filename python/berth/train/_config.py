"""Ray Train's RunConfig and CheckpointConfig, for berth's TorchTrainer.

Same field names and defaults as ``ray.train.RunConfig`` and
``ray.train.CheckpointConfig``. A field Ray has and berth does not support
is refused with an error naming it, never ignored. Values are checked when
the config is built.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from berth.config import FailureConfig
from berth.errors import InvalidArgumentError
from berth.train._storage import is_uri

DEFAULT_STORAGE_PATH = "~/berth_results"
# runtime_env keys berth honours (Ray's names).
RUNTIME_ENV_KEYS = ("working_dir", "excludes", "env_vars", "py_executable")


@dataclass
class CheckpointConfig:
    """Which checkpoints a run keeps: the best ``num_to_keep`` by
    ``checkpoint_score_attribute`` (a reported metric; "max" or "min"), the
    newest when there is none; None keeps every one. The latest is always
    kept."""

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: Optional[bool] = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (not isinstance(self.num_to_keep, int)
                                             or isinstance(self.num_to_keep, bool) or self.num_to_keep < 1):
            raise InvalidArgumentError(f"num_to_keep: an int >= 1 or None, not {self.num_to_keep!r}")
        if self.checkpoint_score_attribute is not None and not isinstance(self.checkpoint_score_attribute, str):
            raise InvalidArgumentError("checkpoint_score_attribute: the name of a reported metric, not "
                                       f"{self.checkpoint_score_attribute!r}")
        if self.checkpoint_score_order not in ("max", "min"):
            raise InvalidArgumentError(f"checkpoint_score_order: 'max' or 'min', not {self.checkpoint_score_order!r}")
        # Ray Tune's fields: a training function saves when it reports.
        if self.checkpoint_frequency or self.checkpoint_at_end is not None:
            raise InvalidArgumentError("checkpoint_frequency, checkpoint_at_end: not supported (Ray Tune's; a "
                                       "training function checkpoints by report(checkpoint=...))")

    def to_dict(self) -> Dict[str, Any]:
        return {"num_to_keep": self.num_to_keep, "checkpoint_score_attribute": self.checkpoint_score_attribute,
                "checkpoint_score_order": self.checkpoint_score_order}


@dataclass
class RunConfig:
    """Where a run keeps its checkpoints and results
    (``storage_path/name``; a folder every rank's node reaches, local or a
    shared filesystem, or an object-store URI such as ``s3://bucket/runs``
    through fsspec), how often it may fail, which checkpoints it keeps,
    and the ranks' ``worker_runtime_env``: ``working_dir``, a folder
    uploaded to the head and unpacked as every rank's working directory on
    its node, as Ray's (``excludes``: globs left out; without it the ranks
    run in the driver's folder, which every node must then mount);
    ``env_vars``; ``py_executable``: the ranks' Python, default the
    driver's."""

    name: Optional[str] = None
    storage_path: Optional[str] = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    worker_runtime_env: Optional[Dict[str, Any]] = None
    storage_filesystem: Any = None
    callbacks: Any = None
    sync_config: Any = None
    stop: Any = None
    progress_reporter: Any = None
    verbose: Any = None
    log_to_file: Any = None

    def __post_init__(self) -> None:
        refused = [f for f in ("storage_filesystem", "callbacks", "sync_config", "stop", "progress_reporter",
                               "verbose", "log_to_file") if getattr(self, f) is not None]
        if refused:
            raise InvalidArgumentError(f"{', '.join(refused)}: not supported by berth's RunConfig "
                                       "(docs/train.md lists Ray Train's names)")
        if self.name is not None and (not isinstance(self.name, str) or not self.name or os.sep in self.name
                                      or self.name in (".", "..")):
            raise InvalidArgumentError(f"name: a folder name, not {self.name!r}")
        if self.storage_path is not None and (not isinstance(self.storage_path, (str, os.PathLike))
                                              or not os.fspath(self.storage_path)):
            raise InvalidArgumentError(f"storage_path: a path, not {self.storage_path!r}")
        if self.failure_config is not None and not isinstance(self.failure_config, FailureConfig):
            raise InvalidArgumentError("failure_config: a berth.train.FailureConfig, not "
                                       f"{type(self.failure_config).__name__}")
        if self.checkpoint_config is not None and not isinstance(self.checkpoint_config, CheckpointConfig):
            raise InvalidArgumentError("checkpoint_config: a berth.train.CheckpointConfig, not "
                                       f"{type(self.checkpoint_config).__name__}")
        self._check_runtime_env()
        if self.name is None:
            self.name = time.strftime("berth_train_run-%Y-%m-%d_%H-%M-%S")

    def _check_runtime_env(self) -> None:
        env = self.worker_runtime_env
        if env is None:
            return
        if not isinstance(env, dict):
            raise InvalidArgumentError(f"worker_runtime_env: a dict, not {type(env).__name__}")
        unknown = sorted(set(env) - set(RUNTIME_ENV_KEYS))
        if unknown:
            raise InvalidArgumentError(f"worker_runtime_env: {', '.join(unknown)}: not supported (berth takes "
                                       f"{', '.join(RUNTIME_ENV_KEYS)})")
        for key in ("working_dir", "py_executable"):
            if key in env and (not isinstance(env[key], (str, os.PathLike)) or not os.fspath(env[key])):
                raise InvalidArgumentError(f"worker_runtime_env[{key!r}]: a path, not {env[key]!r}")
        if "working_dir" in env and not os.path.isdir(os.fspath(env["working_dir"])):
            raise InvalidArgumentError(f"worker_runtime_env['working_dir']: {os.fspath(env['working_dir'])!r} "
                                       "is not a directory")
        excludes = env.get("excludes", [])
        if "working_dir" not in env and "excludes" in env:
            raise InvalidArgumentError("worker_runtime_env['excludes']: only with 'working_dir'")
        if not isinstance(excludes, (list, tuple)) or not all(isinstance(p, str) and p for p in excludes):
            raise InvalidArgumentError(f"worker_runtime_env['excludes']: a list of globs, not {excludes!r}")
        variables = env.get("env_vars", {})
        if not isinstance(variables, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in variables.items()):
            raise InvalidArgumentError("worker_runtime_env['env_vars']: a dict of str -> str")

    @property
    def run_dir(self) -> str:
        """storage_path/name: an absolute path, or a URI."""
        storage = os.fspath(self.storage_path or DEFAULT_STORAGE_PATH)
        if is_uri(storage):
            return storage.rstrip("/") + "/" + self.name
        return os.path.join(os.path.abspath(os.path.expanduser(storage)), self.name)
