"""berth.train inside a command job's rank: the context from the env
contract, report() lines as the trainer reads them, checkpoints copied into
the job's folder, get_checkpoint()."""

import importlib
import json
import os

import pytest

from berth import train
from berth.train import _session

CONTRACT = {"RANK": "2", "LOCAL_RANK": "0", "NODE_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
            "BERTH_JOB_ID": "job-1", "TORCHELASTIC_RESTART_COUNT": "3", "BERTH_STORAGE_PATH": "/ckpt/job-1"}


@pytest.fixture
def rank_env(monkeypatch, tmp_path):
    for key, value in CONTRACT.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("BERTH_REPORT_FILE", str(tmp_path / "reports" / "attempt-3.jsonl"))
    monkeypatch.setenv("BERTH_STORAGE_PATH", str(tmp_path / "job-1"))
    for key in ("BERTH_LATEST_CHECKPOINT", "BERTH_TRAIN_RUN_DIR", "BERTH_TRAIN_RESUME_FROM"):
        monkeypatch.delenv(key, raising=False)
    importlib.reload(_session)  # no checkpoint reported yet
    importlib.reload(train)
    return tmp_path / "reports" / "attempt-3.jsonl"


def test_context(rank_env):
    ctx = train.get_context()
    assert (ctx.get_world_rank(), ctx.get_local_rank(), ctx.get_node_rank(), ctx.get_world_size(),
            ctx.get_local_world_size(), ctx.job_id, ctx.attempt, ctx.get_storage_path()) == \
        (2, 0, 1, 4, 2, "job-1", 3, os.environ["BERTH_STORAGE_PATH"])


def test_context_outside_a_run_says_so(monkeypatch):
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(RuntimeError, match="WORLD_SIZE"):
        train.get_context()


def test_only_rank_zero_reports(rank_env, monkeypatch, tmp_path):
    saved = tmp_path / "tmp-ckpt"
    saved.mkdir()
    (saved / "model.pt").write_text("weights")
    train.report({"step": 1, "loss": 0.5}, checkpoint=str(saved))
    assert not rank_env.exists() and not (tmp_path / "job-1").exists()
    monkeypatch.setenv("RANK", "0")
    train.report({"step": 10, "loss": 0.25, "phase": "train"}, checkpoint=str(saved))
    train.report({"loss": float("nan")})
    lines = [json.loads(line) for line in rank_env.read_text().splitlines()]
    assert lines[0]["step"] == 10 and lines[0]["metrics"] == {"step": 10, "loss": 0.25, "phase": "train"}
    # Copied into the job's folder: the temporary one may go.
    kept = lines[0]["checkpoint"]
    assert os.path.dirname(kept) == str(tmp_path / "job-1") and os.path.basename(kept).startswith("checkpoint_")
    assert open(os.path.join(kept, "model.pt")).read() == "weights"
    assert "step" not in lines[1] and lines[1]["metrics"]["loss"] == "nan"  # JSON has no NaN
    assert train.get_checkpoint().path == kept
    # A restarted attempt finds it in the folder's snapshot.
    importlib.reload(_session)
    assert _session.get_checkpoint().path == kept


def test_a_checkpoint_in_the_jobs_folder_is_not_copied(rank_env, monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "0")
    inside = tmp_path / "job-1" / "checkpoints" / "step-5"
    inside.mkdir(parents=True)
    train.report({"step": 5}, checkpoint=train.Checkpoint.from_directory(inside))
    assert json.loads(rank_env.read_text())["checkpoint"] == str(inside)
    assert sorted(os.listdir(tmp_path / "job-1")) == ["checkpoint_manager_snapshot.json", "checkpoints"]


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
    with pytest.raises(ValueError, match="checkpoint: .* is not a directory"):
        train.report({}, checkpoint="/nonexistent/ckpt")
    with pytest.raises(ValueError, match="checkpoint_dir_name"):
        train.report({}, checkpoint_dir_name="a/b")


def test_checkpoint_of_a_restarted_attempt(rank_env, monkeypatch):
    assert train.get_checkpoint() is None
    monkeypatch.setenv("BERTH_LATEST_CHECKPOINT", "/ckpt/job-1/step-40")
    assert train.get_checkpoint() == train.Checkpoint("/ckpt/job-1/step-40")
    assert os.path.join(train.get_checkpoint(), "state.pt") == "/ckpt/job-1/step-40/state.pt"  # still a path
