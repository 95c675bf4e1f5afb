// The wire conversions of the placement types: each pair round-trips, and
// every refusal names the field path of the bad value, as the head, the
// raylet and the client show it.
#include "wire/proto_convert.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// `status` is INVALID_ARGUMENT and its message begins with `field`.
void ExpectRefused(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(field)) << status;
}

v1::LabelSelectorRequirement* AddRequirement(v1::LabelSelector* selector, const std::string& key,
                                             v1::LabelOperator op,
                                             std::vector<std::string> values = {}) {
  v1::LabelSelectorRequirement* r = selector->add_requirements();
  r->set_key(key);
  r->set_op(op);
  for (const std::string& v : values) r->add_values(v);
  return r;
}

google::protobuf::RepeatedPtrField<v1::Bundle> GpuBundles(int count, double gpus) {
  google::protobuf::RepeatedPtrField<v1::Bundle> bundles;
  for (int i = 0; i < count; ++i)
    (*bundles.Add()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
  return bundles;
}

TEST(ProtoConvertTest, AResourceSetRoundTrips) {
  v1::ResourceSet proto;
  (*proto.mutable_amounts())["CPU"] = 2.5;
  (*proto.mutable_amounts())["GPU"] = 1;
  (*proto.mutable_amounts())["memory"] = 1024.0 * 1024 * 1024;
  const ResourceSet set = ResourceSetFromProto(proto, "r").value();
  EXPECT_EQ(set.Get("CPU"), Quantity::FromUnits(25000));
  EXPECT_EQ(set.Get("GPU"), Quantity::Whole(1));
  v1::ResourceSet back;
  (*back.mutable_amounts())["stale"] = 9;  // replaced, not merged
  ResourceSetToProto(set, &back);
  EXPECT_EQ(back.amounts_size(), 3);
  EXPECT_EQ(back.amounts().at("CPU"), 2.5);
  EXPECT_EQ(back.amounts().at("GPU"), 1);
  EXPECT_EQ(back.amounts().at("memory"), 1024.0 * 1024 * 1024);
  EXPECT_EQ(ResourceSetFromProto(back, "r").value(), set);
}

TEST(ProtoConvertTest, BadAmountsAndNamesNameTheResource) {
  auto refused = [](const std::string& name, double amount) {
    v1::ResourceSet proto;
    (*proto.mutable_amounts())[name] = amount;
    return ResourceSetFromProto(proto, "bundles[1].resources").status();
  };
  ExpectRefused(refused("GPU", -1), "bundles[1].resources.amounts[\"GPU\"]");
  EXPECT_THAT(refused("GPU", -1).message(), HasSubstr("is negative"));
  ExpectRefused(refused("CPU", std::nan("")), "bundles[1].resources.amounts[\"CPU\"]");
  ExpectRefused(refused("CPU", HUGE_VAL), "bundles[1].resources.amounts[\"CPU\"]");
  ExpectRefused(refused("CPU", 1e30), "bundles[1].resources.amounts[\"CPU\"]");
  EXPECT_THAT(refused("CPU", 1e30).message(), HasSubstr("larger than the maximum quantity"));
  ExpectRefused(refused("bad name!", 1), "bundles[1].resources.amounts[\"bad name!\"]");
  ExpectRefused(refused("", 1), "bundles[1].resources.amounts: empty resource name");
  ExpectRefused(refused(std::string(129, 'r'), 1), "bundles[1].resources.amounts: resource name");
}

TEST(ProtoConvertTest, ALabelSelectorRoundTripsEveryOperator) {
  v1::LabelSelector proto;
  AddRequirement(&proto, "zone", v1::LABEL_OPERATOR_IN, {"b", "a"});
  AddRequirement(&proto, "tier", v1::LABEL_OPERATOR_NOT_IN, {"spot"});
  AddRequirement(&proto, "nvlink", v1::LABEL_OPERATOR_EXISTS);
  AddRequirement(&proto, "draining", v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  const LabelSelector selector = LabelSelectorFromProto(proto, "selector").value();
  ASSERT_EQ(selector.requirements().size(), 4u);
  EXPECT_EQ(selector.requirements()[0].op, LabelOperator::kIn);
  EXPECT_THAT(selector.requirements()[0].values, ElementsAre("a", "b"));  // sorted
  EXPECT_EQ(selector.requirements()[1].op, LabelOperator::kNotIn);
  EXPECT_EQ(selector.requirements()[2].op, LabelOperator::kExists);
  EXPECT_EQ(selector.requirements()[3].op, LabelOperator::kDoesNotExist);
  v1::LabelSelector back;
  AddRequirement(&back, "stale", v1::LABEL_OPERATOR_EXISTS);  // replaced, not merged
  LabelSelectorToProto(selector, &back);
  ASSERT_EQ(back.requirements_size(), 4);
  EXPECT_EQ(back.requirements(0).op(), v1::LABEL_OPERATOR_IN);
  EXPECT_THAT(back.requirements(0).values(), ElementsAre("a", "b"));
  EXPECT_EQ(back.requirements(1).op(), v1::LABEL_OPERATOR_NOT_IN);
  EXPECT_EQ(back.requirements(2).op(), v1::LABEL_OPERATOR_EXISTS);
  EXPECT_EQ(back.requirements(3).key(), "draining");
  EXPECT_EQ(back.requirements(3).op(), v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(LabelSelectorFromProto(back, "selector").value(), selector);
}

TEST(ProtoConvertTest, BadRequirementsNameTheirIndexAndField) {
  auto refused = [](v1::LabelOperator op, const std::string& key, std::vector<std::string> values) {
    v1::LabelSelector proto;
    AddRequirement(&proto, "zone", v1::LABEL_OPERATOR_EXISTS);
    AddRequirement(&proto, key, op, std::move(values));
    return LabelSelectorFromProto(proto, "bundles[0].selector").status();
  };
  ExpectRefused(refused(v1::LABEL_OPERATOR_UNSPECIFIED, "tier", {}),
                "bundles[0].selector.requirements[1].op: unknown operator 0");
  ExpectRefused(refused(static_cast<v1::LabelOperator>(42), "tier", {}),
                "bundles[0].selector.requirements[1].op: unknown operator 42");
  ExpectRefused(refused(v1::LABEL_OPERATOR_IN, "", {"a"}),
                "bundles[0].selector.requirements[1].key");
  ExpectRefused(refused(v1::LABEL_OPERATOR_IN, "bad key", {"a"}),
                "bundles[0].selector.requirements[1].key");
  ExpectRefused(refused(v1::LABEL_OPERATOR_IN, "tier", {}),
                "bundles[0].selector.requirements[1].values");
  ExpectRefused(refused(v1::LABEL_OPERATOR_NOT_IN, "tier", {}),
                "bundles[0].selector.requirements[1].values");
  ExpectRefused(refused(v1::LABEL_OPERATOR_EXISTS, "tier", {"a"}),
                "bundles[0].selector.requirements[1].values");
  ExpectRefused(refused(v1::LABEL_OPERATOR_DOES_NOT_EXIST, "tier", {"a"}),
                "bundles[0].selector.requirements[1].values");
  ExpectRefused(refused(v1::LABEL_OPERATOR_IN, "tier", {"ok", "not ok"}),
                "bundles[0].selector.requirements[1].values");
}

TEST(ProtoConvertTest, GpuSharesRoundTrip) {
  google::protobuf::RepeatedPtrField<v1::GpuShare> proto;
  v1::GpuShare* whole = proto.Add();
  whole->set_index(3);
  whole->set_units(Quantity::kUnitsPerWhole);
  v1::GpuShare* quarter = proto.Add();
  quarter->set_index(0);
  quarter->set_units(2500);
  const std::vector<GpuShare> shares = GpuSharesFromProto(proto, "gpus").value();
  EXPECT_THAT(shares,
              ElementsAre(GpuShare{3, Quantity::Whole(1)}, GpuShare{0, Quantity::FromUnits(2500)}));
  google::protobuf::RepeatedPtrField<v1::GpuShare> back;
  back.Add()->set_index(9);  // replaced, not appended to
  GpuSharesToProto(shares, &back);
  ASSERT_EQ(back.size(), 2);
  EXPECT_EQ(back[0].index(), 3u);
  EXPECT_EQ(back[0].units(), Quantity::kUnitsPerWhole);
  EXPECT_EQ(back[1].index(), 0u);
  EXPECT_EQ(back[1].units(), 2500);
  EXPECT_TRUE(GpuSharesFromProto({}, "gpus").value().empty());
}

TEST(ProtoConvertTest, BadGpuSharesNameTheShare) {
  auto refused = [](uint32_t second_index, int64_t second_units) {
    google::protobuf::RepeatedPtrField<v1::GpuShare> proto;
    v1::GpuShare* first = proto.Add();
    first->set_index(0);
    first->set_units(5000);
    v1::GpuShare* second = proto.Add();
    second->set_index(second_index);
    second->set_units(second_units);
    return GpuSharesFromProto(proto, "bundles[2].gpus").status();
  };
  ExpectRefused(refused(1, 0), "bundles[2].gpus[1].units: 0 is not in 1..10000");
  ExpectRefused(refused(1, -5), "bundles[2].gpus[1].units: -5 is not in 1..10000");
  ExpectRefused(refused(1, Quantity::kUnitsPerWhole + 1),
                "bundles[2].gpus[1].units: 10001 is not in 1..10000");
  ExpectRefused(refused(0, 100), "bundles[2].gpus[1].index: GPU 0 listed twice");
  EXPECT_TRUE(refused(1, 1).ok());
}

TEST(ProtoConvertTest, AGroupSpecRoundTripsWithItsStrategyAndTopology) {
  google::protobuf::RepeatedPtrField<v1::Bundle> bundles = GpuBundles(2, 1);
  (*bundles[1].mutable_resources()->mutable_amounts())["CPU"] = 4;
  AddRequirement(bundles[1].mutable_selector(), "zone", v1::LABEL_OPERATOR_IN, {"a"});
  v1::Topology topology;
  topology.add_preferred("berth.io/topology-rack");
  topology.add_preferred("berth.io/topology-block");
  const PlacementGroupSpec spec =
      PlacementGroupSpecFromProto(bundles, v1::PLACEMENT_STRATEGY_STRICT_SPREAD, false, topology)
          .value();
  EXPECT_EQ(spec.strategy(), PlacementStrategy::kStrictSpread);
  EXPECT_EQ(spec.topology().preferred,
            (std::vector<std::string>{"berth.io/topology-rack", "berth.io/topology-block"}));
  ASSERT_EQ(spec.bundles().size(), 2u);
  EXPECT_EQ(spec.bundles()[1].resources.Get("CPU"), Quantity::Whole(4));
  EXPECT_EQ(spec.total().Get(kGpu), Quantity::Whole(2));

  google::protobuf::RepeatedPtrField<v1::Bundle> back;
  for (const Bundle& b : spec.bundles()) BundleToProto(b, back.Add());
  v1::Topology topology_back;
  TopologyToProto(spec.topology(), &topology_back);
  EXPECT_EQ(topology_back.required(), "");
  EXPECT_THAT(topology_back.preferred(),
              ElementsAre("berth.io/topology-rack", "berth.io/topology-block"));
  const PlacementGroupSpec again =
      PlacementGroupSpecFromProto(back, StrategyToProto(spec.strategy()), false, topology_back)
          .value();
  EXPECT_EQ(again, spec);
}

TEST(ProtoConvertTest, EveryStrategyMapsBothWays) {
  const google::protobuf::RepeatedPtrField<v1::Bundle> bundles = GpuBundles(1, 1);
  for (v1::PlacementStrategy wire :
       {v1::PLACEMENT_STRATEGY_PACK, v1::PLACEMENT_STRATEGY_SPREAD,
        v1::PLACEMENT_STRATEGY_STRICT_PACK, v1::PLACEMENT_STRATEGY_STRICT_SPREAD}) {
    const PlacementGroupSpec spec = PlacementGroupSpecFromProto(bundles, wire).value();
    EXPECT_EQ(StrategyToProto(spec.strategy()), wire);
  }
  // Unset is PACK.
  EXPECT_EQ(
      PlacementGroupSpecFromProto(bundles, v1::PLACEMENT_STRATEGY_UNSPECIFIED).value().strategy(),
      PlacementStrategy::kPack);
}

TEST(ProtoConvertTest, AnUnknownStrategyIsRefusedByName) {
  absl::Status s =
      PlacementGroupSpecFromProto(GpuBundles(1, 1), static_cast<v1::PlacementStrategy>(17))
          .status();
  ExpectRefused(s, "strategy: unknown strategy 17");
  EXPECT_THAT(s.message(), HasSubstr("PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"));
}

TEST(ProtoConvertTest, BadBundlesNameTheBundle) {
  auto refused = [](google::protobuf::RepeatedPtrField<v1::Bundle> bundles) {
    return PlacementGroupSpecFromProto(bundles, v1::PLACEMENT_STRATEGY_PACK).status();
  };
  ExpectRefused(refused({}), "bundles: a placement group needs at least one bundle");
  ExpectRefused(refused(GpuBundles(PlacementGroupSpec::kMaxBundles + 1, 1)),
                "bundles: 4097 bundles; at most 4096");

  google::protobuf::RepeatedPtrField<v1::Bundle> negative = GpuBundles(3, 1);
  (*negative[2].mutable_resources()->mutable_amounts())["GPU"] = -2;
  ExpectRefused(refused(negative), "bundles[2].resources.amounts[\"GPU\"]");

  google::protobuf::RepeatedPtrField<v1::Bundle> empty = GpuBundles(2, 1);
  empty[1].mutable_resources()->clear_amounts();
  ExpectRefused(refused(empty), "bundles[1].resources: empty bundle");

  ExpectRefused(refused(GpuBundles(1, 1.5)), "bundles[0].resources[\"GPU\"]");
  EXPECT_THAT(refused(GpuBundles(1, 1.5)).message(), HasSubstr("must be a whole number"));

  google::protobuf::RepeatedPtrField<v1::Bundle> selector = GpuBundles(2, 1);
  AddRequirement(selector[1].mutable_selector(), "zone", v1::LABEL_OPERATOR_UNSPECIFIED);
  ExpectRefused(refused(selector), "bundles[1].selector.requirements[0].op");
}

TEST(ProtoConvertTest, AcceleratorResourcesAreInternal) {
  google::protobuf::RepeatedPtrField<v1::Bundle> bundles = GpuBundles(2, 1);
  (*bundles[1].mutable_resources()->mutable_amounts())["accelerator_type:A100"] = 0.001;
  absl::Status s = PlacementGroupSpecFromProto(bundles, v1::PLACEMENT_STRATEGY_PACK).status();
  ExpectRefused(s, "bundles[1].resources.amounts[\"accelerator_type:A100\"]");
  EXPECT_THAT(s.message(), HasSubstr("bundles[1].selector: berth.io/accelerator-type in (A100)"));
  // Bundles berth built itself may carry them.
  const PlacementGroupSpec spec =
      PlacementGroupSpecFromProto(bundles, v1::PLACEMENT_STRATEGY_PACK, /*allow_internal=*/true)
          .value();
  EXPECT_EQ(spec.bundles()[1].resources.Get("accelerator_type:A100"), Quantity::FromUnits(10));
}

TEST(ProtoConvertTest, BadTopologiesNameTheKey) {
  auto refused = [](const v1::Topology& topology) {
    return PlacementGroupSpecFromProto(GpuBundles(1, 1), v1::PLACEMENT_STRATEGY_PACK, false,
                                       topology)
        .status();
  };
  v1::Topology both;
  both.set_required("rack");
  both.add_preferred("block");
  ExpectRefused(refused(both), "topology: give required");

  v1::Topology bad_required;
  bad_required.set_required("not a key");
  ExpectRefused(refused(bad_required), "topology.required");

  v1::Topology twice;
  twice.add_preferred("rack");
  twice.add_preferred("block");
  twice.add_preferred("rack");
  ExpectRefused(refused(twice), "topology.preferred[2]: 'rack' is listed twice");

  v1::Topology bad_preferred;
  bad_preferred.add_preferred("rack");
  bad_preferred.add_preferred("");
  ExpectRefused(refused(bad_preferred), "topology.preferred[1]");

  v1::Topology too_many;
  for (size_t i = 0; i <= Topology::kMaxPreferred; ++i) {
    too_many.add_preferred("key-" + std::to_string(i));
  }
  ExpectRefused(refused(too_many), "topology.preferred: 9 keys; at most 8");

  v1::Topology required;
  required.set_required("berth.io/topology-rack");
  const Topology converted = TopologyFromProto(required);
  EXPECT_EQ(converted.required, "berth.io/topology-rack");
  EXPECT_TRUE(converted.preferred.empty());
  v1::Topology back;
  back.add_preferred("stale");  // replaced, not appended to
  TopologyToProto(converted, &back);
  EXPECT_EQ(back.required(), "berth.io/topology-rack");
  EXPECT_EQ(back.preferred_size(), 0);
}

TEST(ProtoConvertTest, NodeStatesMapToTheWire) {
  EXPECT_EQ(NodeStateToProto(NodeState::kAlive), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(NodeStateToProto(NodeState::kDraining), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(NodeStateToProto(NodeState::kDead), v1::NODE_STATE_DEAD);
}

TEST(ProtoConvertTest, StatusesKeepTheirCodeAndMessageBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  const grpc::Status wire = ToGrpcStatus(absl::FailedPreconditionError("group pg-1 is busy"));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(wire.error_message(), "group pg-1 is busy");
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(back.message(), "group pg-1 is busy");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")).code(),
            absl::StatusCode::kUnavailable);
}

TEST(ProtoConvertTest, StringsAreCheckedForPresenceAndLength) {
  EXPECT_TRUE(ValidateString("", "name", 8, /*required=*/false).ok());
  EXPECT_TRUE(ValidateString("12345678", "name", 8, /*required=*/true).ok());
  ExpectRefused(ValidateString("", "request_id", 8, /*required=*/true), "request_id: required");
  ExpectRefused(ValidateString("123456789", "spec.name", 8, /*required=*/false),
                "spec.name: 9 bytes; at most 8");
}

}  // namespace
}  // namespace berth
