"""Ray Train's ``ray.train`` for berth: a Ray Train program ports by
replacing ``ray.train`` with ``berth.train`` (docs/train.md has the table of
names). Inside a rank (a TorchTrainer's function, or any script berth runs)
``get_context()``, ``report()`` and ``get_checkpoint()`` need only the
standard library; the driver's ``TorchTrainer.fit()`` (berth.train.torch)
talks to the head.
"""

from berth.config import FailureConfig, ScalingConfig
from berth.train._checkpoint import Checkpoint
from berth.train._config import CheckpointConfig, RunConfig
from berth.train._refused import refuse
from berth.train._result import ControllerError, Result, TrainingFailedError, WorkerGroupError
from berth.train._session import TrainContext, get_checkpoint, get_context, report


def __getattr__(name: str):
    refuse(__name__, name)

__all__ = ["ScalingConfig", "RunConfig", "FailureConfig", "CheckpointConfig", "Checkpoint", "Result",
           "TrainingFailedError", "WorkerGroupError", "ControllerError", "TrainContext", "report", "get_checkpoint",
           "get_context"]
