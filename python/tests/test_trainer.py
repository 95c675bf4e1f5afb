"""TorchTrainer.fit() against a real `berth up` cluster (Gloo, Debian's
torch): the function runs on every rank, report() merges every rank's
checkpoint into one folder, a failure raises TrainingFailedError with the
rank's own exception, a run resumes by name, ranks whose Python has torch
and neither grpc nor cloudpickle run it, and Ctrl-C stops the job.

Training functions are defined inside the tests: cloudpickle ships them by
value (this module is not importable on the ranks)."""

import glob
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import berth
from berth import train
from berth.train.torch import TorchTrainer


def _run_config(tmp_path, name, **kwargs):
    return train.RunConfig(name=name, storage_path=str(tmp_path / "results"), **kwargs)


def test_fit_runs_on_every_rank_and_merges_their_checkpoints(cluster, tmp_path):
    greeting = "hello"  # a closure's variable travels with the function

    def loop(config):
        import tempfile

        from berth.train import collective

        context = train.get_context()
        rank = context.get_world_rank()
        word = collective.broadcast_from_rank_zero(f"{greeting}-from-{rank}")
        collective.barrier()
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, f"rank-{rank}.txt"), "w") as f:
                f.write(word)
            train.report({"rank": rank, "lr": config["lr"], "name": context.get_experiment_name()},
                         checkpoint=train.Checkpoint.from_directory(folder))
        with open(os.path.join(config["seen"], f"rank-{rank}"), "w") as f:
            f.write(train.get_checkpoint().path)  # right after report, on every rank

    seen = tmp_path / "seen"
    seen.mkdir()
    result = TorchTrainer(loop, train_loop_config={"lr": 0.5, "seen": str(seen)},
                          scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=_run_config(tmp_path, "merge")).fit()
    assert {(seen / f"rank-{r}").read_text() for r in (0, 1)} == {result.checkpoint.path}
    assert result.metrics == {"rank": 0, "lr": 0.5, "name": "merge"}  # rank 0's
    assert result.path == str(tmp_path / "results" / "merge")
    files = sorted(os.listdir(result.checkpoint.path))
    assert files == ["rank-0.txt", "rank-1.txt"]
    assert {open(os.path.join(result.checkpoint.path, f)).read() for f in files} == {"hello-from-0"}


def test_a_failed_run_raises_the_ranks_own_exception(cluster, tmp_path):
    def loop():
        if train.get_context().get_world_rank() == 1:
            raise KeyError("no such shard")
        time.sleep(60)  # rank 0 is stopped when rank 1 fails

    trainer = TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2),
                           run_config=_run_config(tmp_path, "fails"))
    with pytest.raises(train.TrainingFailedError) as raised:
        trainer.fit()
    assert isinstance(raised.value, train.WorkerGroupError)
    assert isinstance(raised.value.worker_failures[1], KeyError)
    assert isinstance(raised.value.__cause__, KeyError)
    assert "rank 1 failed first" in str(raised.value) and "KeyError: 'no such shard'" in str(raised.value)


def test_a_run_resumes_by_name(cluster, tmp_path):
    def loop(config):
        import tempfile

        checkpoint = train.get_checkpoint()
        start = 0
        if checkpoint:
            with checkpoint.as_directory() as folder:
                start = int(open(os.path.join(folder, "epoch")).read()) + 1
        for epoch in range(start, config["epochs"]):
            with tempfile.TemporaryDirectory() as folder:
                if train.get_context().get_world_rank() == 0:
                    open(os.path.join(folder, "epoch"), "w").write(str(epoch))
                train.report({"epoch": epoch, "start": start},
                             checkpoint=train.Checkpoint.from_directory(folder))

    config = _run_config(tmp_path, "resumed", checkpoint_config=train.CheckpointConfig(num_to_keep=1))
    first = TorchTrainer(loop, train_loop_config={"epochs": 2}, run_config=config,
                         scaling_config=train.ScalingConfig(num_workers=2)).fit()
    assert first.metrics == {"epoch": 1, "start": 0}
    second = TorchTrainer(loop, train_loop_config={"epochs": 4}, run_config=config,
                          scaling_config=train.ScalingConfig(num_workers=2)).fit()
    assert second.metrics == {"epoch": 3, "start": 2}
    assert len(glob.glob(os.path.join(second.path, "checkpoint_*"))) - 1 == 1  # and the snapshot file


def _python_with_torch_alone(tmp_path):
    """A Python whose packages are Debian's but for grpc, protobuf,
    cloudpickle and berth: a venv that sees links to the rest."""
    venv = tmp_path / "torch-alone"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    farm = tmp_path / "torch-alone-packages"
    farm.mkdir()
    for entry in os.listdir("/usr/lib/python3/dist-packages"):
        if not entry.startswith(("grpc", "google", "protobuf", "cloudpickle", "berth")):
            os.symlink(os.path.join("/usr/lib/python3/dist-packages", entry), farm / entry)
    site_packages = subprocess.run([str(venv / "bin" / "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site_packages, "torch-alone.pth"), "w") as f:
        f.write(str(farm) + "\n")
    return str(venv / "bin" / "python")


def test_ranks_need_torch_alone(cluster, tmp_path):
    python = _python_with_torch_alone(tmp_path)
    check = subprocess.run([python, "-c", "import torch, importlib.util as u; "
                            "print(u.find_spec('grpc'), u.find_spec('cloudpickle'), u.find_spec('berth'))"],
                           check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert check.stdout.split() == ["None", "None", "None"]

    def loop():
        import importlib.util
        import sys as rank_sys

        train.report({"grpc": importlib.util.find_spec("grpc") is not None,
                      "python": rank_sys.executable})

    result = TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=_run_config(tmp_path, "torch-alone",
                                                 worker_runtime_env={"py_executable": python})).fit()
    assert result.metrics == {"grpc": False, "python": python}


def test_ctrl_c_stops_the_job(cluster, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from berth import train
        from berth.train.torch import TorchTrainer

        def loop():
            train.report({"step": 1})
            time.sleep(300)

        TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2),
                     run_config=train.RunConfig(name="ctrl-c", storage_path=sys.argv[1])).fit()
    """))
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path / "results")], env=cluster,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = berth.Client()
    try:
        job = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            running = [j for j in client.jobs() if j.name == "ctrl-c" and j.state == "RUNNING" and j.step == 1]
            if running:
                job = running[0]
                break
            time.sleep(0.2)
        assert job is not None, "the job never reported"
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=30)
        assert driver.returncode != 0 and "KeyboardInterrupt" in out and f"stopping job {job.job_id}" in out
        assert client.job(job.job_id).wait(timeout=30).state == "STOPPED"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        client.close()


@pytest.fixture
def s3_server(tmp_path, monkeypatch):
    """An S3-protocol server of the test's own (moto's, on 127.0.0.1) with a
    bucket "runs"; yields the env fsspec needs to reach it."""
    pytest.importorskip("s3fs")
    moto_server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([moto_server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    env = {"FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        import fsspec
        import fsspec.config

        fsspec.config.set_conf_env(fsspec.config.conf)  # the endpoint, set after fsspec was imported
        deadline = time.monotonic() + 30
        while True:
            try:
                fsspec.filesystem("s3", skip_instance_cache=True).mkdir("runs")
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_run_keeps_its_checkpoints_in_an_object_store(cluster, tmp_path, s3_server):
    def loop():
        import tempfile

        checkpoint = train.get_checkpoint()
        start = 0
        if checkpoint:
            with checkpoint.as_directory() as folder:
                start = int(open(os.path.join(folder, "epoch")).read()) + 1
        for epoch in range(start, 4):
            if epoch == 2 and start == 0 and train.get_context().get_world_rank() == 1:
                raise ValueError("rank 1 fails at epoch 2")
            with tempfile.TemporaryDirectory() as folder:
                open(os.path.join(folder, "epoch"), "w").write(str(epoch))
                train.report({"epoch": epoch, "start": start}, checkpoint=train.Checkpoint.from_directory(folder))

    config = train.RunConfig(name="in-s3", storage_path="s3://runs/team", worker_runtime_env={"env_vars": s3_server},
                             checkpoint_config=train.CheckpointConfig(num_to_keep=2),
                             failure_config=train.FailureConfig(max_failures=1))
    result = TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2), run_config=config).fit()
    assert result.metrics == {"epoch": 3, "start": 2}
    assert result.path == "s3://runs/team/in-s3" and result.checkpoint.path.startswith("s3://runs/team/in-s3/")
    with result.checkpoint.as_directory() as folder:
        assert open(os.path.join(folder, "epoch")).read() == "3"
    import fsspec

    kept = [p for p in fsspec.filesystem("s3").ls("runs/team/in-s3", detail=False) if "/checkpoint_" in p
            and not p.endswith(".json")]
    assert len(kept) == 2


def test_working_dir_is_uploaded_and_each_rank_runs_in_its_copy(cluster, tmp_path, monkeypatch):
    # The program's folder, with a module the function imports and data
    # that excludes leave out; the driver runs elsewhere, so the ranks find
    # the module only in the uploaded copy.
    project = tmp_path / "project"
    (project / "shards").mkdir(parents=True)
    (project / "helpers.py").write_text("def shard_name(rank):\n    return f'shard-{rank}'\n")
    (project / "shards" / "big.bin").write_bytes(os.urandom(1 << 16))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    def loop(config):
        import helpers  # from the package

        rank = train.get_context().get_world_rank()
        train.report({"shard": helpers.shard_name(rank), "cwd": os.getcwd(),
                      "has_data": os.path.exists("shards/big.bin")})

    runtime_env = {"working_dir": str(project), "excludes": ["shards"]}
    result = TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=_run_config(tmp_path, "wd", worker_runtime_env=runtime_env)).fit()
    assert result.metrics["shard"] == "shard-0"
    assert result.metrics["has_data"] is False
    with berth.Client() as client:
        digest = client.upload_working_dir(str(project), ["shards"])  # the same files: the same package
    assert digest.startswith("sha256:") and len(digest) == 71
    assert os.path.basename(result.metrics["cwd"]) == digest[len("sha256:"):]  # the node's unpacked copy
    # A change makes another package.
    (project / "helpers.py").write_text("def shard_name(rank):\n    return 'changed'\n")
    with berth.Client() as client:
        assert client.upload_working_dir(str(project), ["shards"]) != digest
        with pytest.raises(berth.errors.BerthError, match="working_dir_package: package sha256:0+ is not stored"):
            client.submit(["true"], working_dir_package="sha256:" + "0" * 64)


def _parents(folder):
    """(attempt, rank) -> (parent pid, its command)."""
    seen = {}
    for name in os.listdir(folder):
        attempt, rank = name.split("-")
        with open(os.path.join(folder, name)) as f:
            parent, command = f.read().split(" ", 1)
        seen[(int(attempt), int(rank))] = (int(parent), command)
    return seen


def test_ranks_and_their_restarts_fork_from_one_warm_python_per_node(cluster, tmp_path):
    def note(folder, attempt, rank):  # in a rank: its parent process and that one's command
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode()
        with open(os.path.join(folder, f"{attempt}-{rank}"), "w") as f:
            f.write(f"{os.getppid()} {command}")

    def loop(config):
        rank = train.get_context().get_world_rank()
        attempt = int(os.environ["BERTH_ATTEMPT"])
        note(config["seen"], attempt, rank)
        if attempt == 0 and rank == 1:
            raise ValueError("once")

    seen_dir = tmp_path / "seen"
    seen_dir.mkdir()
    TorchTrainer(loop, train_loop_config={"seen": str(seen_dir)},
                 scaling_config=train.ScalingConfig(num_workers=2),
                 run_config=_run_config(tmp_path, "warm", failure_config=train.FailureConfig(max_failures=1))).fit()
    seen = _parents(seen_dir)
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len({parent for parent, _ in seen.values()}) == 1  # both ranks, both attempts (one node)
    assert "berth.train._zygote" in next(iter(seen.values()))[1]

    # Turned off: each rank is its keeper's own child, as any command's.
    cold_dir = tmp_path / "cold"
    cold_dir.mkdir()
    TorchTrainer(lambda c: note(c["seen"], 0, train.get_context().get_world_rank()),
                 train_loop_config={"seen": str(cold_dir)}, scaling_config=train.ScalingConfig(num_workers=2),
                 run_config=_run_config(tmp_path, "cold",
                                        worker_runtime_env={"env_vars": {"BERTH_TRAIN_ZYGOTE": "0"}})).fit()
    cold = _parents(cold_dir)
    assert len({parent for parent, _ in cold.values()}) == 2
    assert all("berth.train._zygote" not in command for _, command in cold.values())
