"""The SDK against a real cluster (`berth up`, real raylets and processes):
submit, wait, status, logs, stop, the head's errors as exceptions, and a
user script's berth.train.report() reaching the head."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import berth

TEN_LINES = textwrap.dedent("""\
    import sys
    import berth

    scaling = berth.ScalingConfig(num_workers=4, use_gpu=True, accelerator_type="A10G")
    client = berth.Client()
    job = client.submit([sys.executable, "-c", "import os; print('rank', os.environ['RANK'], 'gpus', os.environ['CUDA_VISIBLE_DEVICES'])"],
                        scaling_config=scaling, name="ten-lines")
    status = job.wait(timeout=120)
    print(status.state)
    print(status.rank_table())
    """)


def test_a_ten_line_script(cluster, tmp_path):
    script = tmp_path / "submit.py"
    script.write_text(TEN_LINES)
    out = subprocess.run([sys.executable, str(script)], env=cluster, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "SUCCEEDED", out.stdout
    assert lines[1].split() == ["RANK", "LOCAL", "NODE_RANK", "NODE", "GPUS", "WORKER"]
    rows = [line.split() for line in lines[2:]]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert {r[3] for r in rows} == {"node-1", "node-2"}  # 2 GPUs a node: both nodes
    assert all(r[4] in ("0", "1") for r in rows)  # one GPU each


def run_python(client, code, num_workers=2, **kwargs):
    return client.submit([sys.executable, "-c", textwrap.dedent(code)],
                         scaling_config=berth.ScalingConfig(num_workers=num_workers), **kwargs)


def test_reports_reach_the_head(cluster, tmp_path):
    client = berth.Client()
    (tmp_path / "step-3").mkdir()
    (tmp_path / "step-3" / "model.pt").write_text("weights")
    job = run_python(client, f"""
        from berth import train
        for step in range(1, 4):
            train.report({{"step": step, "loss": 1.0 / step, "epoch": 0}},
                         checkpoint="{tmp_path}/step-3" if step == 3 else None)
        """)
    status = job.wait(timeout=120)
    assert status.state == "SUCCEEDED", status.failure_causes
    assert status.step == 3 and status.loss == pytest.approx(1 / 3)
    assert status.metrics == {"step": 3.0, "loss": pytest.approx(1 / 3), "epoch": 0.0}
    # Copied into the job's folder (the script's own may go).
    assert os.path.basename(status.latest_checkpoint).startswith("checkpoint_")
    assert open(os.path.join(status.latest_checkpoint, "model.pt")).read() == "weights"


def test_a_failure_is_an_exception_in_the_cause(cluster):
    client = berth.Client()
    job = run_python(client, """
        import os
        if os.environ["RANK"] == "1":
            raise ValueError("boom at step 7")
        """)
    status = job.wait(timeout=120)
    assert status.state == "FAILED"
    assert "rank 1" in status.failure_causes[0]
    assert "ValueError: boom at step 7" in status.failure_causes[0]


def test_logs_and_stop(cluster):
    client = berth.Client()
    job = run_python(client, """
        import os, time
        print("hello from rank", os.environ["RANK"], flush=True)
        time.sleep(600)
        """)
    for _ in range(200):
        if "hello from rank 0" in job.logs(rank=0):
            break
        import time
        time.sleep(0.1)
    assert "hello from rank 0" in job.logs(rank=0)
    assert job.stop()
    stopped = job.wait(timeout=60)
    assert stopped.state == "STOPPED"
    assert stopped.step is None and stopped.loss is None  # it never reported
    assert not job.stop()  # it had ended: nothing to stop


def test_the_heads_errors_are_exceptions(cluster):
    client = berth.Client()
    with pytest.raises(berth.InvalidArgumentError, match=r'spec\.entrypoint\.command\.env\["RANK"\]'):
        client.submit(["python3", "train.py"], env={"RANK": "3"})
    with pytest.raises(berth.NotFoundError, match="job-nope"):
        client.job("job-nope").status()
    with pytest.raises(berth.InvalidArgumentError, match="launcher"):
        client.submit(["python3"], launcher="mpirun")
    with pytest.raises(berth.NotFoundError, match=r"spec\.queue: no queue 'team-z'"):
        client.submit(["true"], queue="team-z")


def test_an_unreachable_head_is_unavailable():
    with pytest.raises(berth.UnavailableError):
        berth.Client("127.0.0.1:1", timeout=1).jobs()


def _free_port_pair() -> int:
    """A port P with P and P+1 free now (`berth up --heads 2` takes both)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    pytest.fail("no two free ports in a row")


def test_the_client_follows_the_active_head(tmp_path):
    """`berth up --heads 2`: a client given both heads (from cluster.json)
    reaches the active one, and the standby once the active one is killed."""
    env = dict(os.environ, BERTH_HOME=str(tmp_path))
    berth_cli = os.path.join(os.environ["BERTH_BUILD_DIR"], "client", "berth")
    port = _free_port_pair()
    subprocess.run([berth_cli, "up", "--nodes", "1", "--gpus-per-node", "1", "--heads", "2", "--port",
                    str(port)], env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    try:
        with open(tmp_path / "local" / "cluster.json") as f:
            state = json.load(f)
        assert state["head_address"] == f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        client = berth.Client(state["head_address"], token_file=str(tmp_path / "local" / "token"),
                              tls_ca_file=str(tmp_path / "local" / "tls" / "ca.crt"),
                              tls_cert_file=str(tmp_path / "local" / "tls" / "client.crt"),
                              tls_key_file=str(tmp_path / "local" / "tls" / "client.key"), timeout=5)
        assert client.jobs() == []
        active = next(p for p in state["processes"] if p["name"] == "head")
        # Only the head this cluster started: its executable and its port.
        with open(f"/proc/{active['pid']}/cmdline", "rb") as f:
            cmdline = f.read().split(b"\0")
        assert os.path.basename(cmdline[0]) == b"berth-head" and f"127.0.0.1:{port}".encode() in cmdline
        os.kill(active["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert client.jobs() == []
                break
            except berth.UnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        subprocess.run([berth_cli, "down"], env=env, stdout=subprocess.DEVNULL, timeout=120)
