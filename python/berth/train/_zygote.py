"""A warm Python per job and node that a TorchTrainer job's ranks are
forked from, so a rank does not import torch again (1-2 CPU-seconds of
PyPI torch each, paid on every restart): the first rank of the job on a
node starts it (``python -m berth.train._zygote SOCKET RAYLET_PID``), it
imports torch once, and every later rank of the job on that node with the
same interpreter and paths, restarts included, is a fork of it. One per
job, not per node: a fork carries its zygote's memory, which must hold
nothing of another job's.

The rank berth started (the "client", its node agent's process) hands its
stdin/stdout/stderr, argv, environment and folder to the zygote over a Unix
socket, and the zygote forks a child that takes them and joins the client's
process group, so berth's stops and its keeper's kill on the node agent's
death reach it as they reach the client; the client waits for the child's
exit status and ends the same way (code or signal). The zygote exits when
its node agent does (a pidfd) or after a minute without ranks; a client that
cannot reach or start one runs the rank itself, cold, as does one its node
confines (BERTH_CONFINEMENT: a fork would run in the zygote's cgroups). TorchTrainer.fit()
sets BERTH_TRAIN_ZYGOTE=1 (its ranks and its store host use it;
``worker_runtime_env={"env_vars": {"BERTH_TRAIN_ZYGOTE": "0"}}`` turns it
off). Standard library only until the zygote imports torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

IDLE_EXIT_S = 60
# What decides how the zygote imported its modules: a rank whose values
# differ gets its own zygote.
_IMPORT_ENV = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_SETUP_FAILED = 121


def _raylet_pid() -> Optional[int]:
    """The node agent's pid: the parent of this process's keeper."""
    try:
        with open(f"/proc/{os.getppid()}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _socket_path(raylet_pid: int) -> str:
    folder = os.environ.get("BERTH_ZYGOTE_DIR") or f"/tmp/berth-zygote-{os.getuid()}"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    key = hashlib.sha256(json.dumps([os.environ.get("BERTH_JOB_ID", ""), sys.executable] +
                                    [os.environ.get(k, "") for k in _IMPORT_ENV]).encode()).hexdigest()[:16]
    return os.path.join(folder, f"{raylet_pid}-{key}.sock")


def _send(conn: socket.socket, message: dict, fds: List[int] = ()) -> None:
    data = json.dumps(message).encode()
    socket.send_fds(conn, [struct.pack("!I", len(data)) + data], list(fds))


def _receive(conn: socket.socket, max_fds: int = 0):
    header, fds, _, _ = socket.recv_fds(conn, 4, max_fds)
    if len(header) < 4:
        raise ConnectionError("closed")
    size = struct.unpack("!I", header)[0]
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return json.loads(data), fds


def _connect(path: str, raylet_pid: int) -> Optional[socket.socket]:
    """A connection to the node's zygote, started first if none runs."""
    def attempt() -> Optional[socket.socket]:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            return conn
        except OSError:
            conn.close()
            return None

    conn = attempt()
    if conn is not None:
        return conn
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one rank of the node starts it
        conn = attempt()
        if conn is not None:
            return conn
        with open(path + ".log", "ab") as log:
            # Its own process group: a stop of this rank's group spares it.
            subprocess.Popen([sys.executable, "-m", "berth.train._zygote", path, str(raylet_pid)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                             preexec_fn=os.setpgrp)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            conn = attempt()
            if conn is not None:
                return conn
            time.sleep(0.02)
    return None


def _end_as(status: dict) -> None:
    if "signal" in status:
        signal.signal(status["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), status["signal"])
    os._exit(status.get("code", 1))


def run_forked(argv: List[str]) -> None:
    """Runs this rank (``argv`` of berth.train._worker, or ``["-c", CODE,
    ARGS...]`` as ``python -c``) as a fork of the node's zygote and ends as
    it did; returns only when that cannot be done (the caller runs it
    itself)."""
    if os.environ.get("BERTH_TRAIN_ZYGOTE") != "1" or os.environ.get("BERTH_IN_ZYGOTE"):
        return
    if os.environ.get("BERTH_CONFINEMENT", "none") != "none":
        return  # a fork would run in the zygote's cgroups, not this worker's
    if not hasattr(socket, "send_fds") or not hasattr(os, "pidfd_open"):
        return  # Python before 3.9
    raylet_pid = _raylet_pid()
    if raylet_pid is None or raylet_pid <= 1:
        return
    try:
        conn = _connect(_socket_path(raylet_pid), raylet_pid)
        if conn is None:
            return
        # The child hears berth's stops itself (it joins this group); this
        # process stays until the child ends, to pass its status on.
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        _send(conn, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "pgid": os.getpgrp(),
                     "client": os.getpid()}, [0, 1, 2])
        started, _ = _receive(conn)
        if "pid" not in started:
            raise ConnectionError(f"the fork could not take this rank's place: {started}")
    except (OSError, ConnectionError, ValueError) as e:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        print(f"berth.train: no warm Python on this node ({e}); importing torch here", file=sys.stderr)
        return
    try:
        status, _ = _receive(conn)
    except (OSError, ConnectionError, ValueError):
        # The zygote died: wait for the child itself, whose status is lost.
        pidfd = os.pidfd_open(started["pid"])
        select.select([pidfd], [], [])
        print("berth.train: the warm Python this rank was forked from died", file=sys.stderr)
        status = {"code": 1}
    _end_as(status)


def _die_with(client: int) -> None:
    """In the forked child: a thread that ends the rank if the process berth
    started dies (killed: it would only exit after the rank), so no rank
    outlives what its node agent knows of."""
    import threading

    try:
        pidfd = os.pidfd_open(client)
    except OSError:
        os._exit(1)  # gone already

    def watch() -> None:
        select.select([pidfd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="berth-zygote-client", daemon=True).start()


def _child(request: dict, fds: List[int], conn: socket.socket, run: Callable[[List[str]], None]) -> None:
    """In the forked child: become the client's rank, say so, run it, exit.
    A failure before it says so leaves the client to run the rank itself."""
    try:
        os.setpgid(0, request["pgid"])
        _die_with(request["client"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for sig in _STOP_SIGNALS + (signal.SIGCHLD,):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["BERTH_IN_ZYGOTE"] = "1"
        sys.argv = list(request["argv"])
        sys.path[0] = request["cwd"]  # as `python -m` has it
        _send(conn, {"pid": os.getpid()})
        conn.close()
    except BaseException:
        os._exit(_SETUP_FAILED)
    try:
        import random

        random.seed()  # not the zygote's state in every rank
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        threads = request["env"].get("OMP_NUM_THREADS")
        if threads and threads.isdigit():
            import torch

            torch.set_num_threads(int(threads))
        run(sys.argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _reap(children: Dict[int, socket.socket]) -> None:
    """Tells the client of each ended child how it ended."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        try:
            _send(conn, {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status)
                  else {"code": os.WEXITSTATUS(status)})
        except OSError:
            pass
        conn.close()


def serve(path: str, raylet_pid: int, run: Callable[[List[str]], None]) -> None:
    """The zygote's loop: a fork per request until the node agent is gone
    or nothing happened for IDLE_EXIT_S."""
    raylet = os.pidfd_open(raylet_pid)
    wakeup_r, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _remove(path)
    listener.bind(path)
    listener.listen(64)
    children: Dict[int, socket.socket] = {}
    idle_since = time.monotonic()
    while True:
        readable, _, _ = select.select([listener, raylet, wakeup_r], [], [], 5)
        if raylet in readable:
            break  # the node agent is gone; its keepers kill the ranks
        if wakeup_r in readable:
            _drain(wakeup_r)
        _reap(children)
        if listener in readable:
            conn, _ = listener.accept()
            try:
                request, fds = _receive(conn, 3)
            except (OSError, ConnectionError, ValueError):
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                for other in [listener] + list(children.values()):
                    other.close()
                for fd in (raylet, wakeup_r, wakeup_w):
                    os.close(fd)
                _child(request, fds, conn, run)
            for fd in fds:
                os.close(fd)
            children[pid] = conn  # the child says it started; this process, how it ended
        if children:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > IDLE_EXIT_S:
            break
    listener.close()
    _remove(path, path + ".lock", path + ".log")  # a crash leaves its log


def _run_request(argv: List[str]) -> None:
    if argv[0] == "-c":  # as `python -c CODE ARGS...`
        sys.argv = ["-c"] + argv[2:]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        return
    from berth.train import _worker

    _worker.main(argv)


def main(argv: List[str]) -> None:
    path, raylet_pid = argv[1], int(argv[2])
    # What every rank would import, once.
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    from torch.distributed.elastic.multiprocessing.errors import record  # noqa: F401

    from torch.distributed import TCPStore  # noqa: F401

    from berth.train import _worker  # noqa: F401
    from berth.train import torch as train_torch  # noqa: F401

    if torch.cuda.is_initialized():  # a fork would inherit a CUDA context it cannot use
        raise SystemExit("berth zygote: CUDA was initialized while importing; not forking ranks")
    print(f"berth zygote {os.getpid()}: torch {torch.__version__} for node agent {raylet_pid} at {path}",
          flush=True)
    serve(path, raylet_pid, _run_request)


if __name__ == "__main__":
    main(sys.argv)
