#include "client/format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kGi = 1 << 30;

v1::Bundle MakeBundle(std::initializer_list<std::pair<const char*, double>> amounts) {
  v1::Bundle bundle;
  for (const auto& [name, amount] : amounts)
    (*bundle.mutable_resources()->mutable_amounts())[name] = amount;
  return bundle;
}

TEST(FormatTest, ResourcesAreSortedWithMemoryInBinaryUnits) {
  EXPECT_EQ(
      FormatResources(MakeBundle({{"memory", 16 * kGi}, {"GPU", 0.5}, {"CPU", 2}}).resources()),
      "{CPU: 2, GPU: 0.5, memory: 16Gi}");
}

TEST(FormatTest, BundleShowsItsSelector) {
  v1::Bundle bundle = MakeBundle({{"GPU", 1}});
  v1::LabelSelectorRequirement* in = bundle.mutable_selector()->add_requirements();
  in->set_key("zone");
  in->set_op(v1::LABEL_OPERATOR_IN);
  in->add_values("a");
  in->add_values("b");
  v1::LabelSelectorRequirement* absent = bundle.mutable_selector()->add_requirements();
  absent->set_key("spot");
  absent->set_op(v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(FormatBundle(bundle), "{GPU: 1; zone in (a,b), !spot}");
}

TEST(FormatTest, NodesTableHasFreeOverTotal) {
  v1::ListNodesResponse response;
  v1::NodeInfo* node = response.add_nodes();
  node->set_node_id("node-a");
  node->set_state(v1::NODE_STATE_ALIVE);
  node->set_address("10.0.0.1:6381");
  (*node->mutable_total()->mutable_amounts())["GPU"] = 4;
  (*node->mutable_total()->mutable_amounts())["CPU"] = 16;
  (*node->mutable_total()->mutable_amounts())["memory"] = 128 * kGi;
  (*node->mutable_available()->mutable_amounts())["GPU"] = 3;
  (*node->mutable_available()->mutable_amounts())["CPU"] = 14.5;
  (*node->mutable_available()->mutable_amounts())["memory"] = 100 * kGi;
  (*node->mutable_labels())["berth.io/accelerator-type"] = "A10G";
  (*node->mutable_labels())["zone"] = "a";
  v1::NodeInfo* cpu_node = response.add_nodes();
  cpu_node->set_node_id("node-b");
  cpu_node->set_state(v1::NODE_STATE_DRAINING);
  (*cpu_node->mutable_total()->mutable_amounts())["CPU"] = 8;

  const std::string table = FormatNodes(response);
  EXPECT_THAT(table,
              ContainsRegex("^NODE_ID +STATE +ADDRESS +ACCELERATOR +GPU +CPU +MEMORY +LABELS\n"));
  EXPECT_THAT(table, ContainsRegex("node-a +ALIVE +10.0.0.1:6381 +A10G +3/4 +14.5/16 +100/128Gi +"
                                   "berth.io/accelerator-type=A10G,zone=a\n"));
  EXPECT_THAT(table, ContainsRegex("node-b +DRAINING +- +- +- +0/8 +- +-\n"));
}

v1::PlacementGroupInfo PendingGroup() {
  v1::PlacementGroupInfo group;
  group.set_placement_group_id("pg-1");
  group.set_name("train");
  group.set_strategy(v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  group.set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  *group.add_bundles() = MakeBundle({{"GPU", 2}, {"CPU", 4}});
  *group.add_bundles() = MakeBundle({{"GPU", 0.25}});
  group.set_pending_reason("waiting for resources: bundle 0 needs GPU: 2");
  return group;
}

TEST(FormatTest, PlacementGroupListRows) {
  v1::ListPlacementGroupsResponse response;
  *response.add_placement_groups() = PendingGroup();
  v1::PlacementGroupInfo* anonymous = response.add_placement_groups();
  anonymous->set_placement_group_id("pg-2");
  anonymous->set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  anonymous->set_infeasible(true);
  *anonymous->add_bundles() = MakeBundle({{"GPU", 64}});

  const std::string table = FormatPlacementGroups(response);
  EXPECT_THAT(table, ContainsRegex("^ID +NAME +STRATEGY +STATE +BUNDLES\n"));
  EXPECT_THAT(table, ContainsRegex("pg-1 +train +STRICT_SPREAD +PENDING +2\n"));
  // UNSPECIFIED strategy means PACK.
  EXPECT_THAT(table, ContainsRegex("pg-2 +- +PACK +PENDING \\(infeasible\\) +1\n"));
}

TEST(FormatTest, PendingGroupShowsReasonAndUnplacedBundles) {
  const std::string text = FormatPlacementGroup(PendingGroup());
  EXPECT_THAT(text, ContainsRegex("state: +PENDING\n"));
  EXPECT_THAT(text, ContainsRegex("reason: +waiting for resources: bundle 0 needs GPU: 2\n"));
  EXPECT_THAT(text, ContainsRegex("BUNDLE +NODE +GPUS +RESOURCES +SELECTOR\n"));
  EXPECT_THAT(text, ContainsRegex("0 +- +- +\\{CPU: 4, GPU: 2\\} +-\n"));
}

TEST(FormatTest, CreatedGroupShowsNodesAndGpuIds) {
  v1::PlacementGroupInfo group = PendingGroup();
  group.set_state(v1::PLACEMENT_GROUP_STATE_CREATED);
  group.set_pending_reason("");
  v1::BundleLocation* first = group.add_locations();
  first->set_bundle_index(0);
  first->set_node_id("node-a");
  for (uint32_t gpu : {2, 3}) {
    v1::GpuShare* share = first->add_gpus();
    share->set_index(gpu);
    share->set_units(10000);
  }
  v1::BundleLocation* second = group.add_locations();
  second->set_bundle_index(1);
  second->set_node_id("node-b");
  v1::GpuShare* quarter = second->add_gpus();
  quarter->set_index(0);
  quarter->set_units(2500);

  const std::string text = FormatPlacementGroup(group);
  EXPECT_THAT(text, Not(HasSubstr("reason:")));
  EXPECT_THAT(text, ContainsRegex("0 +node-a +2,3 +\\{CPU: 4, GPU: 2\\}"));
  EXPECT_THAT(text, ContainsRegex("1 +node-b +0\\(0.25\\) +\\{GPU: 0.25\\}"));
}

TEST(FormatTest, PendingDemandLineIsLikeRayStatus) {
  v1::PendingDemand demand;
  for (int i = 0; i < 8; ++i) *demand.add_shape() = MakeBundle({{"GPU", 1}});
  demand.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
  demand.set_count(2);
  EXPECT_EQ(FormatPendingDemand(demand), "{GPU: 1} * 8 (PACK): 2+ pending");

  v1::PendingDemand mixed;
  *mixed.add_shape() = MakeBundle({{"CPU", 1}, {"GPU", 1}});
  *mixed.add_shape() = MakeBundle({{"GPU", 1}});
  *mixed.add_shape() = MakeBundle({{"GPU", 1}});
  mixed.set_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  mixed.set_count(1);
  mixed.set_infeasible(true);
  EXPECT_EQ(FormatPendingDemand(mixed),
            "{CPU: 1, GPU: 1} * 1, {GPU: 1} * 2 (STRICT_PACK): 1+ pending, infeasible");
}

TEST(FormatTest, ClusterStatusHasTotalsAcceleratorsAndDemand) {
  v1::GetClusterStatusResponse status;
  status.set_alive_nodes(3);
  status.set_draining_nodes(1);
  (*status.mutable_total()->mutable_amounts())["GPU"] = 8;
  (*status.mutable_total()->mutable_amounts())["memory"] = 256 * kGi;
  (*status.mutable_total()->mutable_amounts())["accelerator_type:A10G"] = 2;
  (*status.mutable_available()->mutable_amounts())["GPU"] = 1.5;
  v1::AcceleratorTypeCount* a10g = status.add_accelerators();
  a10g->set_accelerator_type("A10G");
  a10g->set_nodes(2);
  a10g->set_gpus_total(8);
  a10g->set_gpus_available(1.5);
  v1::PendingDemand* demand = status.add_pending_demand();
  *demand->add_shape() = MakeBundle({{"GPU", 1}});
  demand->set_strategy(v1::PLACEMENT_STRATEGY_SPREAD);
  demand->set_count(4);
  demand->set_reason("waiting for resources");

  const std::string text = FormatClusterStatus(status);
  EXPECT_THAT(text, HasSubstr("Nodes: 3 alive, 1 draining, 0 dead\n"));
  EXPECT_THAT(text, ContainsRegex("GPU +1.5 +8\n"));
  EXPECT_THAT(text, ContainsRegex("memory +0 +256Gi\n"));
  EXPECT_THAT(text, Not(HasSubstr("accelerator_type:")));
  EXPECT_THAT(text, ContainsRegex("A10G +2 +1.5 +8\n"));
  EXPECT_THAT(text, HasSubstr("  {GPU: 1} * 1 (SPREAD): 4+ pending\n    waiting for resources\n"));
}

TEST(FormatTest, ClusterStatusWithoutDemandSaysNone) {
  EXPECT_THAT(FormatClusterStatus(v1::GetClusterStatusResponse()),
              HasSubstr("Pending demand:\n  (none)\n"));
}

TEST(FormatTest, JsonUsesProtoFieldNamesAndPrintsDefaults) {
  v1::WaitPlacementGroupReadyResponse response;
  response.mutable_placement_group()->set_placement_group_id("pg-1");
  absl::StatusOr<std::string> json = ToJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"placement_group_id\": \"pg-1\""));
  EXPECT_THAT(*json, HasSubstr("\"ready\": false"));
  EXPECT_EQ(json->back(), '\n');
}

}  // namespace
}  // namespace berth
