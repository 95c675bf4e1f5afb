"""berth.train inside a rank: the context from the env contract, report()
lines as the trainer reads them, get_checkpoint()."""

import importlib
import json

import pytest

from berth import train

CONTRACT = {"RANK": "2", "LOCAL_RANK": "0", "NODE_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
            "BERTH_JOB_ID": "job-1", "TORCHELASTIC_RESTART_COUNT": "3", "BERTH_STORAGE_PATH": "/ckpt/job-1"}


@pytest.fixture
def rank_env(monkeypatch, tmp_path):
    for key, value in CONTRACT.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("BERTH_REPORT_FILE", str(tmp_path / "reports" / "attempt-3.jsonl"))
    monkeypatch.delenv("BERTH_LATEST_CHECKPOINT", raising=False)
    importlib.reload(train)  # no checkpoint reported yet
    return tmp_path / "reports" / "attempt-3.jsonl"


def test_context(rank_env):
    ctx = train.get_context()
    assert (ctx.get_world_rank(), ctx.get_local_rank(), ctx.get_node_rank(), ctx.get_world_size(),
            ctx.get_local_world_size(), ctx.job_id, ctx.attempt, ctx.get_storage_path()) == \
        (2, 0, 1, 4, 2, "job-1", 3, "/ckpt/job-1")


def test_context_outside_a_run_says_so(monkeypatch):
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(RuntimeError, match="WORLD_SIZE"):
        train.get_context()


def test_only_rank_zero_reports(rank_env, monkeypatch):
    train.report({"step": 1, "loss": 0.5})
    assert not rank_env.exists()
    monkeypatch.setenv("RANK", "0")
    train.report({"step": 10, "loss": 0.25, "phase": "train"}, checkpoint="ckpt/step-10")
    train.report({"loss": float("nan")})
    lines = [json.loads(line) for line in rank_env.read_text().splitlines()]
    assert lines[0]["step"] == 10 and lines[0]["metrics"] == {"step": 10, "loss": 0.25, "phase": "train"}
    assert lines[0]["checkpoint"].endswith("/ckpt/step-10") and lines[0]["checkpoint"].startswith("/")
    assert "step" not in lines[1] and lines[1]["metrics"]["loss"] == "nan"  # JSON has no NaN
    assert train.get_checkpoint() == lines[0]["checkpoint"]


def test_report_takes_tensors_and_numpy(rank_env, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("RANK", "0")
    train.report({"step": 3, "loss": torch.tensor(0.5)})
    assert json.loads(rank_env.read_text())["metrics"]["loss"] == 0.5


def test_report_refuses_what_is_not_a_dict(rank_env):
    with pytest.raises(TypeError, match="metrics"):
        train.report([1, 2])
    with pytest.raises(TypeError, match="checkpoint"):
        train.report({}, checkpoint=3)


def test_checkpoint_of_a_restarted_attempt(rank_env, monkeypatch):
    assert train.get_checkpoint() is None
    monkeypatch.setenv("BERTH_LATEST_CHECKPOINT", "/ckpt/job-1/step-40")
    assert train.get_checkpoint() == "/ckpt/job-1/step-40"
