"""ScalingConfig and FailureConfig: Ray Train's names and defaults, errors
that name the field, and the wire form."""

import dataclasses

import pytest

import berth
from berth.v1 import common_pb2


def test_defaults_are_ray_trains():
    config = berth.ScalingConfig()
    assert (config.num_workers, config.use_gpu, config.resources_per_worker, config.trainer_resources,
            config.placement_strategy, config.accelerator_type) == (1, False, None, None, "PACK", None)
    assert berth.FailureConfig().max_failures == 0
    # Ray's field names, so a Ray user's keyword arguments port as they are.
    assert {f.name for f in dataclasses.fields(berth.ScalingConfig)} >= {
        "trainer_resources", "num_workers", "use_gpu", "resources_per_worker", "placement_strategy",
        "accelerator_type"}


def test_to_proto():
    proto = berth.ScalingConfig(num_workers=4, use_gpu=True, accelerator_type="A10G",
                                resources_per_worker={"GPU": 1, "CPU": 2}, trainer_resources={"memory": 2**30},
                                placement_strategy="SPREAD").to_proto()
    assert proto.num_workers == 4 and proto.use_gpu and proto.accelerator_type == "A10G"
    assert dict(proto.resources_per_worker.amounts) == {"GPU": 1.0, "CPU": 2.0}
    assert dict(proto.trainer_resources.amounts) == {"memory": float(2**30)}
    assert proto.placement_strategy == common_pb2.PLACEMENT_STRATEGY_SPREAD
    # Ray's trainer_resources={} is "none": {CPU: 0} on the wire.
    assert dict(berth.ScalingConfig(trainer_resources={}).to_proto().trainer_resources.amounts) == {"CPU": 0.0}


def test_per_rank_fields_to_proto():
    proto = berth.ScalingConfig(num_workers=3, use_gpu=True,
                                resources_per_worker=[{"GPU": 2}, {"GPU": 1}, {"GPU": 1, "CPU": 4}],
                                rank_resources={0: {"memory": 200 * 2**30}},
                                label_selector={"zone": "in(a, b)", "tier": "!spot", "pool": "gpu"}).to_proto()
    assert not proto.resources_per_worker.amounts
    assert [dict(r.amounts) for r in proto.resources_per_worker_list] == [
        {"GPU": 2.0}, {"GPU": 1.0}, {"GPU": 1.0, "CPU": 4.0}]
    assert dict(proto.rank_resources[0].amounts) == {"memory": float(200 * 2**30)}
    assert len(proto.label_selector) == 1
    reqs = {r.key: (r.op, list(r.values)) for r in proto.label_selector[0].requirements}
    assert reqs == {"zone": (common_pb2.LABEL_OPERATOR_IN, ["a", "b"]),
                    "tier": (common_pb2.LABEL_OPERATOR_NOT_IN, ["spot"]),
                    "pool": (common_pb2.LABEL_OPERATOR_IN, ["gpu"])}
    # One selector per rank.
    per_rank = berth.ScalingConfig(num_workers=2, label_selector=[{"disk": "nvme"}, {"disk": "!in(hdd)"}]).to_proto()
    assert [r.requirements[0].op for r in per_rank.label_selector] == [
        common_pb2.LABEL_OPERATOR_IN, common_pb2.LABEL_OPERATOR_NOT_IN]


@pytest.mark.parametrize("kwargs, field", [
    ({"num_workers": 2, "resources_per_worker": [{"GPU": 1}]}, "resources_per_worker"),
    ({"num_workers": 2, "resources_per_worker": [{"CPU": 1}, {"CPU": -1}]}, "resources_per_worker[1]['CPU']"),
    ({"num_workers": 2, "rank_resources": {2: {"CPU": 1}}}, "rank_resources[2]"),
    ({"num_workers": 2, "rank_resources": {0: {"CPU": "x"}}}, "rank_resources[0]['CPU']"),
    ({"num_workers": 2, "label_selector": [{"a": "b"}]}, "label_selector"),
    ({"num_workers": 2, "label_selector": "zone=a"}, "label_selector"),
    ({"num_workers": 2, "label_selector": {"zone": "in(a,)"}}, "label_selector['zone']"),
    ({"num_workers": 2, "label_selector": [{"a": "b"}, {"zone": "(x"}]}, "label_selector[1]['zone']"),
    ({"num_workers": 0}, "num_workers"),
    ({"num_workers": 2.5}, "num_workers"),
    ({"use_gpu": "yes"}, "use_gpu"),
    ({"resources_per_worker": {"GPU": -1}}, "resources_per_worker['GPU']"),
    ({"resources_per_worker": {"CPU": "two"}}, "resources_per_worker['CPU']"),
    ({"trainer_resources": [1]}, "trainer_resources"),
    ({"placement_strategy": "PACKED"}, "placement_strategy"),
    ({"accelerator_type": ""}, "accelerator_type"),
    ({"use_tpu": True}, "use_tpu"),
    ({"topology": "4x4"}, "use_tpu"),
    ({"topology": {"required": "a", "preferred": ["b"]}}, "topology"),
    ({"topology": {"rack": "a"}}, "topology"),
    ({"topology": {"required": ""}}, "topology.required"),
    ({"topology": {"preferred": ["a", 3]}}, "topology.preferred"),
])
def test_bad_values_name_the_field(kwargs, field):
    with pytest.raises(berth.InvalidArgumentError) as error:
        berth.ScalingConfig(**kwargs)
    assert str(error.value).startswith(field + ":")
    assert isinstance(error.value, ValueError)


def test_elastic_num_workers_is_rays_min_max_tuple():
    config = berth.ScalingConfig(num_workers=(2, 4), use_gpu=True)
    assert config.total_workers == 4 and config.min_workers == 2
    proto = config.to_proto()
    assert proto.num_workers == 4 and proto.min_workers == 2
    assert berth.ScalingConfig(num_workers=3).to_proto().min_workers == 0
    for bad in ((4, 2), (0, 2), (1, 2, 3), (1.5, 2)):
        with pytest.raises(berth.InvalidArgumentError) as error:
            berth.ScalingConfig(num_workers=bad)
        assert str(error.value).startswith("num_workers:")


def test_topology_goes_on_the_wire():
    required = berth.ScalingConfig(num_workers=2, topology={"required": "berth.io/topology-rack"})
    assert required.to_proto().topology.required == "berth.io/topology-rack"
    preferred = berth.ScalingConfig(num_workers=2, topology={"preferred": ["berth.io/nvlink-domain",
                                                                          "berth.io/topology-rack"]})
    assert list(preferred.to_proto().topology.preferred) == ["berth.io/nvlink-domain", "berth.io/topology-rack"]
    assert not berth.ScalingConfig().to_proto().HasField("topology")


def test_failure_config_checks():
    assert berth.FailureConfig(max_failures=-1).to_proto().max_failures == -1
    proto = berth.FailureConfig().to_proto()
    assert proto.HasField("count_node_failures") and proto.count_node_failures
    assert not berth.FailureConfig(count_node_failures=False).to_proto().count_node_failures
    assert berth.FailureConfig(progress_timeout_s=600).to_proto().progress_timeout_s == 600
    for kwargs in ({"max_failures": -2}, {"max_failures": "3"}, {"fail_fast": True, "max_failures": 2},
                   {"count_node_failures": "no"}, {"progress_timeout_s": -1},
                   {"progress_timeout_s": 1.5}):
        with pytest.raises(berth.InvalidArgumentError):
            berth.FailureConfig(**kwargs)
