"""The rank side of TorchTrainer: ``python -m berth.train._worker PAYLOAD``.

Every rank of a TorchTrainer job runs this: it checks that the run's folder
is the driver's (a storage_path that is not shared is said so, as Ray's
marker file does), loads the training function and its config from the
payload the driver pickled (with the driver's cloudpickle, which travels
beside the payload: versions do not read each other's), joins the process group
(NCCL on GPUs, Gloo otherwise, or TorchConfig's backend), calls the
function, and on an exception keeps it for the driver's TrainingFailedError
and berth's failure cause. Needs only the standard library and torch.
The rank runs as a fork of the node's warm Python when it can
(berth.train._zygote), so it does not import torch itself.
"""

from __future__ import annotations

import datetime
import os
import pickle
import shutil
import sys
import tempfile
import time
import traceback


def _check_storage() -> None:
    from berth.train._storage import storage_for

    marker = os.environ["BERTH_TRAIN_MARKER"]
    if storage_for(marker).read_bytes(marker) is None:
        raise SystemExit(
            f"berth.train: RunConfig.storage_path is not shared with node {os.environ.get('BERTH_NODE_ID', '?')}: "
            f"{marker}, which the driver wrote, is not there; give a storage_path on a filesystem every node "
            "mounts, or an object-store URI")


def _local_payload(payload: str) -> str:
    """The payload as a local file: an object store's is copied (with the
    cloudpickle beside it) into a temporary folder first."""
    from berth.train._storage import is_uri, storage_for

    if not is_uri(payload):
        return payload
    folder, name = payload.rsplit("/", 1)
    local = tempfile.mkdtemp(prefix="berth-fit-")
    storage_for(folder).get_dir(folder, local)
    return os.path.join(local, name)


def _record_failure(error: BaseException) -> None:
    from berth.train._result import record_failure

    record_failure(os.environ["BERTH_TRAIN_RUN_DIR"], os.environ.get("BERTH_JOB_ID", "job"),
                   {"attempt": int(os.environ.get("BERTH_ATTEMPT", "0")), "rank": int(os.environ.get("RANK", "0")),
                    "time": time.time(), "exception": error,
                    "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__))})


def _run(payload: dict) -> None:
    import torch
    import torch.distributed as dist

    from berth.train import _session
    from berth.train import torch as train_torch

    use_cuda = payload["use_gpu"] and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(train_torch.get_device())
    backend = payload["backend"] or ("nccl" if use_cuda else "gloo")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=payload["timeout_s"]))
    # Reports and berth.train.collective move Python objects: over Gloo, so
    # NCCL's streams never carry them.
    _session._start(dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo"))
    function, config = payload["function"], payload["config"]
    try:
        function(config) if payload["takes_config"] else function()
    except BaseException as e:
        _record_failure(e)
        raise
    dist.barrier(group=_session._group)  # no rank leaves while another may still report
    dist.destroy_process_group()


def main(argv: list) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m berth.train._worker PAYLOAD (TorchTrainer.fit() runs it)")
    from berth.train import _zygote

    _zygote.run_forked(argv)  # ends here when a warm Python of the node ran the rank
    _check_storage()
    payload_path = _local_payload(argv[1])
    # The payload's functions load with the cloudpickle that pickled them
    # (its private names change between versions): the driver's, beside it.
    sys.path.insert(0, os.path.join(os.path.dirname(payload_path), "site"))
    try:
        with open(payload_path, "rb") as f:
            payload = pickle.load(f)
        from torch.distributed.elastic.multiprocessing.errors import record

        # torch's @record writes the exception where berth reads a rank's
        # failure cause (TORCHELASTIC_ERROR_FILE).
        record(_run)(payload)
    finally:
        if payload_path != argv[1]:
            shutil.rmtree(os.path.dirname(payload_path), ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
