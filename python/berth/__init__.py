"""berth's Python SDK.

Submit and follow train jobs (``berth.Client``) with Ray Train's configs
(``berth.ScalingConfig``, ``berth.FailureConfig``); run a Ray Train program
(``berth.train``, ``berth.train.torch.TorchTrainer``); inside a rank,
``berth.train.get_context()``, ``report()`` and ``get_checkpoint()``.

The client (grpc, protobuf) is imported when first used, so a rank whose
Python has torch alone imports ``berth.train``.
"""

import importlib
import pkgutil

# berth puts its worker-side package on every rank's PYTHONPATH; a berth
# installed in the rank's Python still lends its generated berth.v1.
__path__ = pkgutil.extend_path(__path__, __name__)

from berth.config import FailureConfig, ScalingConfig  # noqa: E402
from berth.errors import BerthError, InvalidArgumentError, NotFoundError, UnavailableError  # noqa: E402

_CLIENT_NAMES = ("Client", "Job", "JobStatus", "Worker")


def __getattr__(name: str):
    if name in _CLIENT_NAMES:
        return getattr(importlib.import_module("berth.client"), name)
    if name == "train":
        return importlib.import_module("berth.train")
    raise AttributeError(f"module 'berth' has no attribute {name!r}")


__all__ = ["Client", "Job", "JobStatus", "Worker", "ScalingConfig", "FailureConfig", "train",
           "BerthError", "InvalidArgumentError", "NotFoundError", "UnavailableError"]
__version__ = "0.1.0"
