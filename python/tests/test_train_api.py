"""berth.train's Ray Train names without a cluster: configs refuse what
berth does not do (naming the field), the checkpoint snapshot keeps what
CheckpointConfig says, Result reads a run folder back, a rank's Python
imports berth.train without grpc, and a rank refuses a storage_path its
node does not share."""

import json
import os
import pickle
import subprocess
import sys

import pytest

from berth import train
from berth.errors import InvalidArgumentError
from berth.train import _checkpoint
from berth.train._trainer import DataParallelTrainer

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(train.__file__)))


def test_ray_names_are_there():
    import berth.train.collective
    import berth.train.torch

    for name in ("ScalingConfig", "RunConfig", "FailureConfig", "CheckpointConfig", "Checkpoint", "Result",
                 "TrainingFailedError", "report", "get_checkpoint", "get_context"):
        assert hasattr(train, name), name
    for name in ("TorchTrainer", "TorchConfig", "prepare_model", "prepare_data_loader", "get_device",
                 "get_devices", "enable_reproducibility"):
        assert hasattr(berth.train.torch, name), name
    assert callable(berth.train.collective.barrier) and callable(berth.train.collective.broadcast_from_rank_zero)


def test_a_rank_imports_berth_train_without_grpc():
    code = ("import sys; sys.modules['grpc'] = None; sys.modules['google.protobuf'] = None\n"
            "import berth.train, berth.train.torch, berth.train.collective, berth.train._worker\n"
            "print(sorted(m for m in sys.modules if m.startswith(('grpc', 'google'))))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PYTHON_DIR),
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['google.protobuf', 'grpc']"  # only the blocked names, never imported


def test_run_config_refuses_what_berth_does_not_do():
    with pytest.raises(InvalidArgumentError, match="callbacks, stop: not supported"):
        train.RunConfig(callbacks=[object()], stop={"loss": 0.1})
    assert train.RunConfig(storage_path="s3://b/x/", name="r").run_dir == "s3://b/x/r"
    with pytest.raises(InvalidArgumentError, match="name: a folder name"):
        train.RunConfig(name="a/b")
    with pytest.raises(InvalidArgumentError, match=r"worker_runtime_env: pip: not supported"):
        train.RunConfig(worker_runtime_env={"pip": ["x"]})
    with pytest.raises(InvalidArgumentError, match=r"worker_runtime_env\['working_dir'\]"):
        train.RunConfig(worker_runtime_env={"working_dir": "/nonexistent"})
    with pytest.raises(InvalidArgumentError, match="num_to_keep"):
        train.CheckpointConfig(num_to_keep=0)
    with pytest.raises(InvalidArgumentError, match="checkpoint_score_order"):
        train.CheckpointConfig(checkpoint_score_order="best")
    config = train.RunConfig(storage_path="~/runs")
    assert config.name.startswith("berth_train_run-")
    assert config.run_dir == os.path.join(os.path.expanduser("~/runs"), config.name)


def test_trainer_refuses_rays_arguments_it_does_not_take():
    with pytest.raises(InvalidArgumentError, match="dataset_config, datasets: not supported"):
        DataParallelTrainer(lambda: None, datasets={"train": []}, dataset_config=object())
    with pytest.raises(InvalidArgumentError, match="train_loop_per_worker: a function of no argument or of one"):
        DataParallelTrainer(lambda a, b: None)
    with pytest.raises(InvalidArgumentError, match="train_loop_config: given, but"):
        DataParallelTrainer(lambda: None, train_loop_config={"lr": 1})
    with pytest.raises(InvalidArgumentError, match="scaling_config: a berth.train.ScalingConfig"):
        DataParallelTrainer(lambda c: None, scaling_config={"num_workers": 2})
    assert DataParallelTrainer(lambda config=None: None)._takes_config
    assert not DataParallelTrainer(lambda: None)._takes_config


def _checkpoints(run_dir, metrics_list, config):
    for i, metrics in enumerate(metrics_list):
        path = os.path.join(run_dir, f"checkpoint_{i}")
        os.makedirs(path)
        _checkpoint.record_checkpoint(run_dir, path, metrics, config)
    return sorted(p for p in os.listdir(run_dir) if p.startswith("checkpoint_") and not p.endswith(".json"))


def test_num_to_keep_keeps_the_newest(tmp_path):
    kept = _checkpoints(str(tmp_path), [{"loss": 3}, {"loss": 1}, {"loss": 2}, {"loss": 5}],
                        train.CheckpointConfig(num_to_keep=2).to_dict())
    assert kept == ["checkpoint_2", "checkpoint_3"]
    assert _checkpoint.latest_checkpoint(str(tmp_path)).path == str(tmp_path / "checkpoint_3")


def test_a_score_keeps_the_best_and_the_latest(tmp_path):
    config = train.CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min")
    kept = _checkpoints(str(tmp_path), [{"loss": 3}, {"loss": 1}, {"loss": 2}, {"loss": 5}], config.to_dict())
    assert kept == ["checkpoint_1", "checkpoint_2", "checkpoint_3"]  # the best two, and the latest
    result = train.Result.from_path(str(tmp_path))
    assert result.checkpoint.path == str(tmp_path / "checkpoint_3")
    assert result.get_best_checkpoint("loss", "min").path == str(tmp_path / "checkpoint_1")
    assert result.get_best_checkpoint("loss", "max").path == str(tmp_path / "checkpoint_3")
    assert result.get_best_checkpoint("accuracy", "max") is None
    with pytest.raises(ValueError, match="mode"):
        result.get_best_checkpoint("loss", "lowest")


def test_checkpoint_api(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "w.pt").write_text("w")
    checkpoint = train.Checkpoint.from_directory(tmp_path / "a")
    checkpoint.update_metadata({"epoch": 3})
    assert checkpoint.get_metadata() == {"epoch": 3}
    copy = checkpoint.to_directory(tmp_path / "b")
    assert open(os.path.join(copy, "w.pt")).read() == "w"
    with checkpoint.as_directory() as folder:
        assert folder == str(tmp_path / "a")
    with pytest.raises(ValueError, match="is not a directory"):
        train.Checkpoint.from_directory(tmp_path / "missing")


def test_metrics_dataframe(tmp_path):
    pytest.importorskip("pandas")
    os.makedirs(tmp_path / ".berth")
    with open(tmp_path / ".berth" / "reports.jsonl", "w") as f:
        for epoch in range(3):
            f.write(json.dumps({"metrics": {"epoch": epoch, "loss": 1.0 / (epoch + 1)}}) + "\n")
    frame = train.Result.from_path(str(tmp_path)).metrics_dataframe
    assert list(frame["epoch"]) == [0, 1, 2] and train.Result.from_path(str(tmp_path)).metrics["epoch"] == 2


def test_a_rank_says_when_storage_is_not_shared(tmp_path):
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(pickle.dumps({}))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, BERTH_TRAIN_MARKER=str(tmp_path / "marker"),
               BERTH_TRAIN_RUN_DIR=str(tmp_path), BERTH_NODE_ID="node-7")
    done = subprocess.run([sys.executable, "-m", "berth.train._worker", str(payload)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "storage_path is not shared with node node-7" in done.stderr


def test_rays_names_berth_lacks_say_why_on_import():
    with pytest.raises(ImportError, match=r"berth.train.get_dataset_shard: not supported by berth \(Ray Data"):
        from berth.train import get_dataset_shard  # noqa: F401
    with pytest.raises(ImportError, match="berth.train.torch.prepare_optimizer: not supported .*torch.autocast"):
        from berth.train.torch import prepare_optimizer  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        train.no_such_name
    assert issubclass(train.WorkerGroupError, train.TrainingFailedError)


def test_the_ray_port_is_the_ray_program_with_its_imports_changed():
    import ast

    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "ray-port")

    def code(name):  # the module without its docstring
        tree = ast.parse(open(os.path.join(folder, name)).read())
        tree.body = tree.body[1:]
        return ast.unparse(tree)

    assert code("train.py") == code("ray_train.py").replace("ray.train", "berth.train")


def test_checkpoints_in_an_object_store(tmp_path):
    pytest.importorskip("fsspec")
    run_dir = "memory://bucket/run"
    source = tmp_path / "ckpt"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "w.pt").write_text("w")
    from berth.train._storage import storage_for

    storage = storage_for(run_dir)
    for i in range(3):
        target = storage.join(run_dir, f"checkpoint_{i}")
        storage.put_dir(str(source), target)
        _checkpoint.record_checkpoint(run_dir, target, {"i": i}, train.CheckpointConfig(num_to_keep=2).to_dict())
    assert storage.list_names(run_dir) == ["checkpoint_1", "checkpoint_2", "checkpoint_manager_snapshot.json"]
    latest = _checkpoint.latest_checkpoint(run_dir)
    assert latest.path == "memory://bucket/run/checkpoint_2"
    with latest.as_directory() as folder:
        assert open(os.path.join(folder, "sub", "w.pt")).read() == "w"
    assert not os.path.exists(folder)  # the temporary copy goes
    latest.update_metadata({"epoch": 2})
    assert train.Checkpoint(latest.path).get_metadata() == {"epoch": 2}


def test_recording_a_checkpoint_drops_those_a_failed_attempt_left_unrecorded(tmp_path):
    run_dir = str(tmp_path)
    os.makedirs(os.path.join(run_dir, "checkpoint_orphan"))  # written, never recorded
    os.makedirs(os.path.join(run_dir, "my_own_folder"))  # not berth's: left alone
    kept = _checkpoints(run_dir, [{"loss": 1}, {"loss": 2}], train.CheckpointConfig(num_to_keep=2).to_dict())
    assert kept == ["checkpoint_0", "checkpoint_1"]
    assert os.path.isdir(os.path.join(run_dir, "my_own_folder"))
    assert os.path.isfile(os.path.join(run_dir, _checkpoint.SNAPSHOT))
