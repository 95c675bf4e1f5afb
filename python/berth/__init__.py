"""berth's Python SDK.

Submit and follow train jobs (``berth.Client``) with Ray Train's configs
(``berth.ScalingConfig``, ``berth.FailureConfig``), and, inside a job's
script, ``berth.train.get_context()``, ``report()`` and
``get_checkpoint()``.
"""

from berth import train
from berth.client import Client, Job, JobStatus, Worker
from berth.config import FailureConfig, ScalingConfig
from berth.errors import BerthError, InvalidArgumentError, NotFoundError, UnavailableError

__all__ = ["Client", "Job", "JobStatus", "Worker", "ScalingConfig", "FailureConfig", "train",
           "BerthError", "InvalidArgumentError", "NotFoundError", "UnavailableError"]
__version__ = "0.1.0"
