"""Client: submit train jobs to a berth cluster and follow them.

``Client()`` finds the cluster as the ``berth`` CLI does: ``address``, else
$BERTH_ADDRESS, else the local cluster that ``berth up`` started (its state
file under $BERTH_HOME or /tmp/berth-<uid>), else 127.0.0.1:6380; the
cluster token and TLS files likewise (arguments, $BERTH_TOKEN_FILE /
$BERTH_TLS_CA_FILE, the local cluster's). Every call has a deadline.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from berth.config import FailureConfig, ScalingConfig
from berth.errors import BerthError, InvalidArgumentError, from_rpc_error

DEFAULT_ADDRESS = "127.0.0.1:6380"
TERMINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT")
LAUNCHERS = ("torchrun", "accelerate")


def local_state_dir() -> str:
    """The local cluster's state directory (``berth up`` writes it)."""
    home = os.environ.get("BERTH_HOME") or f"/tmp/berth-{os.getuid()}"
    return os.path.join(home, "local")


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@dataclass
class Worker:
    """One rank of a job's current attempt and where it runs."""

    rank: int
    local_rank: int
    node_rank: int
    local_world_size: int
    node_id: str
    gpus: List[int]
    worker_id: str


@dataclass
class JobStatus:
    """A job as the head knows it (berth.v1.TrainJobInfo)."""

    job_id: str
    name: str
    state: str
    message: str
    attempt: int
    failures: int
    failure_causes: List[str]
    # None until the trainer reported (reports count steps from 1), as
    # ``berth job`` shows "-".
    step: Optional[int]
    loss: Optional[float]
    metrics: Dict[str, float]
    latest_checkpoint: str
    master_address: str
    workers: List[Worker] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def rank_table(self) -> str:
        """The ranks, one line each, as ``berth job`` prints them."""
        rows = [("RANK", "LOCAL", "NODE_RANK", "NODE", "GPUS", "WORKER")]
        for w in self.workers:
            rows.append((str(w.rank), str(w.local_rank), str(w.node_rank), w.node_id,
                         ",".join(map(str, w.gpus)) or "-", w.worker_id))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)

    @classmethod
    def from_proto(cls, info) -> "JobStatus":
        from berth.v1 import train_pb2

        return cls(
            job_id=info.job_id, name=info.spec.name,
            state=train_pb2.TrainJobState.Name(info.state).replace("TRAIN_JOB_STATE_", ""),
            message=info.message, attempt=info.attempt, failures=info.failures,
            failure_causes=list(info.failure_causes),
            step=info.last_step or None, loss=info.last_loss if info.last_step else None,
            metrics=dict(info.last_metrics), latest_checkpoint=info.latest_checkpoint,
            master_address=info.master_address,
            workers=[Worker(w.world_rank, w.local_rank, w.node_rank, w.local_world_size, w.node_id,
                            list(w.gpu_indices), w.worker_id) for w in info.workers])


class Job:
    """A submitted train job."""

    def __init__(self, client: "Client", job_id: str) -> None:
        self._client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def status(self) -> JobStatus:
        """The job now."""
        from berth.v1 import head_pb2

        response = self._client._call("GetTrainJob", head_pb2.GetTrainJobRequest(job_id=self.id))
        return JobStatus.from_proto(response.job)

    def wait(self, timeout: Optional[float] = None, poll: float = 0.25) -> JobStatus:
        """Waits until the job ends and returns its final status (also when
        it FAILED: look at ``state`` and ``failure_causes``). TimeoutError
        after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if status.terminal:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {status.state} after {timeout} s: {status.message}")
            time.sleep(poll)

    def logs(self, rank: Optional[int] = None, follow: bool = False) -> Union[str, Iterator[str]]:
        """The ranks' output (one rank's with ``rank``). With ``follow``, an
        iterator of pieces of output until the job ends; else all of it."""
        pieces = (text for _, _, text in self.log_pieces(rank, follow))
        return pieces if follow else "".join(pieces)

    def log_pieces(self, rank: Optional[int] = None, follow: bool = False) -> Iterator[Tuple[int, str, str]]:
        """The ranks' output as (rank, "stdout" or "stderr", text) pieces, as
        they come with ``follow`` (until the job ends); pieces need not end
        at a line's end."""
        from berth.v1 import common_pb2, head_pb2

        request = head_pb2.StreamTrainJobLogsRequest(job_id=self.id, follow=follow)
        if rank is not None:
            request.rank = rank
        # Following has no deadline: it ends with the job.
        chunks = self._client._stream("StreamTrainJobLogs", request,
                                      timeout=None if follow else self._client.timeout)
        for chunk in chunks:
            stream = common_pb2.LogStream.Name(chunk.stream).replace("LOG_STREAM_", "").lower()
            yield chunk.rank, stream, chunk.data.decode("utf-8", "replace")

    def stop(self) -> bool:
        """Stops the job (STOPPED once its processes are gone, each given
        the job's grace period after SIGTERM). False if it had already
        ended: nothing was stopped."""
        from berth.v1 import head_pb2, train_pb2

        response = self._client._call("StopTrainJob", head_pb2.StopTrainJobRequest(
            job_id=self.id, request_id=str(uuid.uuid4())))
        return train_pb2.TrainJobState.Name(response.state)[len("TRAIN_JOB_STATE_"):] not in TERMINAL_STATES


def _heads_target(address: str):
    """The gRPC target and options for one head, or for "a:p,b:q": the active
    head and its standbys, as the CLI does it (common/head_addresses.h): one
    channel over every address that sends calls to the head whose health is
    SERVING (a standby answers NOT_SERVING)."""
    addresses = [a.strip() for a in address.split(",") if a.strip()]
    if len(addresses) < 2:
        return address, []
    resolved, family = [], None
    for a in addresses:
        host, sep, port = a.rpartition(":")
        if not sep or not port:
            raise InvalidArgumentError(f"address: '{a}' is not HOST:PORT")
        host = host.strip("[]")
        want = {None: socket.AF_UNSPEC, "ipv4": socket.AF_INET, "ipv6": socket.AF_INET6}[family]
        try:
            info = socket.getaddrinfo(host, int(port), want, socket.SOCK_STREAM)[0]
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"address: cannot resolve '{host}' of '{a}': {e}")
        ip = info[4][0]
        if info[0] == socket.AF_INET6:
            family, entry = "ipv6", f"[{ip}]:{port}"
        else:
            family, entry = "ipv4", f"{ip}:{port}"
        resolved.append(entry)
    # Calls wait (within their timeout) for the head that serves: one made
    # during a failover reaches the new head as soon as it is active.
    config = json.dumps({"loadBalancingConfig": [{"round_robin": {}}],
                         "healthCheckConfig": {"serviceName": ""},
                         "methodConfig": [{"name": [{}], "waitForReady": True}]})
    # Pings find a head cut off by the network (no reset comes) within
    # seconds; the heads allow pings this often.
    keepalive = [("grpc.keepalive_time_ms", 2000), ("grpc.keepalive_timeout_ms", 2000),
                 ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]
    return f"{family}:{','.join(resolved)}", [("grpc.service_config", config)] + keepalive


class Client:
    """A connection to a berth head, or to whichever of a cluster's heads is
    active ("a:6380,b:6380")."""

    def __init__(self, address: Optional[str] = None, *, token_file: Optional[str] = None,
                 tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None, timeout: float = 10.0) -> None:
        state_dir = local_state_dir()
        self.address = address or os.environ.get("BERTH_ADDRESS") or self._local_address(state_dir) \
            or DEFAULT_ADDRESS
        self.timeout = timeout
        token_path = token_file or os.environ.get("BERTH_TOKEN_FILE") or os.path.join(state_dir, "token")
        token = _read(token_path)
        if token is None and (token_file or os.environ.get("BERTH_TOKEN_FILE")):
            raise InvalidArgumentError(f"token_file: cannot read {token_path}")
        self._metadata = [("authorization", "Bearer " + token.decode().strip())] if token else []
        self._channel = self._open_channel(state_dir, tls_ca_file, tls_cert_file, tls_key_file)

    @staticmethod
    def _local_address(state_dir: str) -> Optional[str]:
        data = _read(os.path.join(state_dir, "cluster.json"))
        if data is None:
            return None
        try:
            return json.loads(data).get("head_address") or None
        except ValueError as e:
            raise BerthError(f"{state_dir}/cluster.json: not a berth state file: {e}")

    def _open_channel(self, state_dir, ca_file, cert_file, key_file) -> grpc.Channel:
        if not ca_file and os.environ.get("BERTH_TLS_CA_FILE"):
            ca_file = os.environ["BERTH_TLS_CA_FILE"]
            cert_file = os.environ.get("BERTH_TLS_CERT_FILE")
            key_file = os.environ.get("BERTH_TLS_KEY_FILE")
        elif not ca_file and os.path.exists(os.path.join(state_dir, "tls", "ca.crt")):
            tls = os.path.join(state_dir, "tls")
            ca_file, cert_file, key_file = (os.path.join(tls, f) for f in ("ca.crt", "client.crt", "client.key"))
        target, options = _heads_target(self.address)
        if not ca_file:
            return grpc.insecure_channel(target, options=options)
        ca, cert, key = (_read(path) if path else None for path in (ca_file, cert_file, key_file))
        if ca is None:
            raise InvalidArgumentError(f"tls_ca_file: cannot read {ca_file}")
        credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        # The head's certificate names the role, not the host (auth/cluster_tls.h).
        return grpc.secure_channel(target, credentials,
                                   options=options + [("grpc.ssl_target_name_override", "berth-head")])

    def _stub(self, service: str = "TrainJobService"):
        from berth.v1 import head_pb2_grpc

        return getattr(head_pb2_grpc, service + "Stub")(self._channel)

    def _call(self, method: str, request, service: str = "TrainJobService", timeout: Optional[float] = None):
        try:
            return getattr(self._stub(service), method)(request, timeout=timeout or self.timeout,
                                                        metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def upload_working_dir(self, working_dir: str, excludes: Sequence[str] = ()) -> str:
        """Packs the folder ``working_dir`` (berth._package: ``excludes``
        are globs) and uploads it to the head unless it holds it already;
        returns the package's digest, for ``submit(working_dir_package=)``."""
        from berth import _package
        from berth.v1 import head_pb2

        data, digest, _ = _package.pack(working_dir, excludes)
        if self._call("StatPackage", head_pb2.StatPackageRequest(digest=digest), "PackageService").stored:
            return digest
        chunk = 1 << 20

        def messages():
            yield head_pb2.UploadPackageRequest(
                header=head_pb2.UploadPackageRequest.Header(digest=digest, size_bytes=len(data)))
            for offset in range(0, len(data), chunk):
                yield head_pb2.UploadPackageRequest(data=data[offset:offset + chunk])

        # At least 1 MiB/s beside the usual deadline.
        self._call("UploadPackage", messages(), "PackageService", timeout=self.timeout + len(data) / chunk)
        return digest

    def _stream(self, method: str, request, timeout: Optional[float]):
        try:
            for item in getattr(self._stub(), method)(request, timeout=timeout, metadata=self._metadata):
                yield item
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def submit(self, entrypoint: Union[Sequence[str], str, None] = None, *,
               scaling_config: Optional[ScalingConfig] = None,
               failure_config: Optional[FailureConfig] = None, name: str = "",
               env: Optional[Dict[str, str]] = None, working_dir: str = "", working_dir_package: str = "",
               launcher: Optional[str] = None, per_node: bool = False, storage_path: str = "",
               labels: Optional[Dict[str, str]] = None,
               builtin: Optional[Dict[str, Union[int, float, str]]] = None,
               queue: str = "", priority: int = 0, priority_class: str = "",
               time_limit_s: int = 0, stop_grace_period_s: Optional[int] = None) -> Job:
        """Submits a train job: ``entrypoint`` runs on every rank (a list
        of argv, or a string split like a shell would), or once per node
        with ``per_node`` / ``launcher`` ("torchrun", "accelerate");
        ``builtin`` runs berth's built-in trainer instead (e.g.
        ``{"steps": 200}``). ``queue`` names the queue (``berth queues``);
        empty is the default queue. ``priority`` orders it within its queue
        (higher first, and may preempt lower), or ``priority_class`` names
        one (``berth queue priority-class``); ``time_limit_s`` (like
        Slurm's ``--time``; 0 = none): at the limit the job is stopped and
        ends TIMED_OUT (it also lets it start past a reserved gang).
        ``stop_grace_period_s``: how long its processes get from SIGTERM to
        SIGKILL when stopped (None = the head's default, 30 s).
        ``working_dir`` is a folder every node has (a shared filesystem;
        default: the current folder);
        ``working_dir_package`` one uploaded by ``upload_working_dir``,
        unpacked on each node, as Ray's runtime_env working_dir."""
        import shlex

        from berth.v1 import head_pb2, train_pb2

        scaling_config = scaling_config or ScalingConfig()
        spec = train_pb2.TrainJobSpec(name=name, scaling_config=scaling_config.to_proto(),
                                      storage_path=storage_path, queue=queue,
                                      priority=priority, priority_class=priority_class,
                                      time_limit_s=time_limit_s)
        if stop_grace_period_s is not None:
            spec.stop_grace_period_s = stop_grace_period_s
        if failure_config is not None:
            spec.failure_config.CopyFrom(failure_config.to_proto())
        for key, value in (labels or {}).items():
            spec.labels[key] = value
        if (entrypoint is None) == (builtin is None):
            raise InvalidArgumentError("entrypoint: give a command or builtin=, one of the two")
        if builtin is not None:
            known = {"model", "steps", "learning_rate", "batch_size", "checkpoint_every_steps"}
            for key in builtin:
                if key not in known:
                    raise InvalidArgumentError(f"builtin[{key!r}]: unknown (allowed: {', '.join(sorted(known))})")
            spec.entrypoint.builtin_trainer.SetInParent()
            for key, value in builtin.items():
                setattr(spec.entrypoint.builtin_trainer, key, value)
        else:
            argv = shlex.split(entrypoint) if isinstance(entrypoint, str) else list(entrypoint)
            command = spec.entrypoint.command
            command.argv.extend(argv)
            for key, value in (env or {}).items():
                command.env[key] = str(value)
            # Neither given: the folder it was submitted from, as Slurm's
            # sbatch (the same path on every node: a shared filesystem).
            command.working_dir = working_dir or ("" if working_dir_package else os.getcwd())
            command.working_dir_package = working_dir_package
            command.per_node = per_node
            if launcher is not None:
                if launcher not in LAUNCHERS:
                    raise InvalidArgumentError(f"launcher: one of {', '.join(LAUNCHERS)}, not {launcher!r}")
                command.launcher = train_pb2.Entrypoint.Launcher.Value(f"LAUNCHER_{launcher.upper()}")
        response = self._call("SubmitTrainJob", head_pb2.SubmitTrainJobRequest(spec=spec, request_id=str(uuid.uuid4())))
        return Job(self, response.job_id)

    def job(self, job_id: str) -> Job:
        """The job with this id (NotFoundError from its calls if none)."""
        return Job(self, job_id)

    def jobs(self) -> List[JobStatus]:
        """Every job the head knows, oldest first."""
        from berth.v1 import head_pb2

        return [JobStatus.from_proto(j) for j in self._call("ListTrainJobs", head_pb2.ListTrainJobsRequest()).jobs]
