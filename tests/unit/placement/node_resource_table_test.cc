#include "placement/node_resource_table.h"

#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

NodeSpec Gpu(const std::string& id, double gpus, const std::string& type, double cpus = 8) {
  NodeSpec s;
  s.node_id = id;
  s.resources = ResourceSet::Of({{kCpu, cpus}, {kGpu, gpus}, {kMemory, 64e9}});
  s.accelerator_type = type;
  return s;
}

TEST(NodeResourceTableTest, AcceleratorTypeBecomesResourceAndLabel) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 4, "A10G")).value();
  const auto& node = table.node(n);
  EXPECT_EQ(node.total.Get("accelerator_type:A10G"), Quantity::Whole(1));
  EXPECT_EQ(node.labels.at("berth.io/accelerator-type"), "A10G");
  EXPECT_EQ(node.gpus.count(), 4u);
  ASSERT_NE(table.FindPool("A10G"), nullptr);
  EXPECT_TRUE(table.FindPool("A10G")->has_gpus);
}

TEST(NodeResourceTableTest, RejectsBadNodes) {
  NodeResourceTable table;
  NodeSpec frac = Gpu("n", 1.5, "");
  auto s = table.AddNode(frac, NodeSpecFields::Under("nodes[0]"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nodes[0].resources[\"GPU\"]"), std::string::npos);
  NodeSpec cpu_only;
  cpu_only.node_id = "c";
  cpu_only.resources = ResourceSet::Of({{kCpu, 4}});
  cpu_only.accelerator_type = "T4";
  EXPECT_FALSE(table.AddNode(cpu_only).ok());
  NodeSpec internal = Gpu("i", 1, "");
  internal.resources.Set("accelerator_type:T4", Quantity::Whole(1));
  auto i = table.AddNode(internal, NodeSpecFields::Under("nodes[1]"));
  ASSERT_FALSE(i.ok());
  EXPECT_NE(i.status().message().find("accelerator_type"), std::string::npos);
  EXPECT_TRUE(table.AddNode(Gpu("dup", 1, "T4")).ok());
  EXPECT_EQ(table.AddNode(Gpu("dup", 1, "T4")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(table.alive_count(), 1u);
}

TEST(NodeResourceTableTest, AllocateReleaseKeepIndicesExact) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 4, "A10G")).value();
  const auto& pool = *table.FindPool("A10G");
  const int gpu = static_cast<int>(IndexedResource::kGpu);
  EXPECT_TRUE(pool.by_free[gpu].contains({Quantity::Whole(4).units(), n}));
  auto a = table.Allocate(n, ResourceSet::Of({{kGpu, 2}, {kCpu, 1}}));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(pool.by_free[gpu].contains({Quantity::Whole(2).units(), n}));
  EXPECT_EQ(pool.by_free[gpu].size(), 1u);
  ASSERT_TRUE(table.Release(*a).ok());
  EXPECT_TRUE(pool.by_free[gpu].contains({Quantity::Whole(4).units(), n}));
  EXPECT_EQ(table.node(n).available, table.node(n).total);
  // Releasing twice would over-fill the node: refused, nothing changes.
  EXPECT_FALSE(table.Release(*a).ok());
  EXPECT_EQ(table.node(n).available, table.node(n).total);
}

TEST(NodeResourceTableTest, AWithheldGpuLeavesTheAvailableGpusAndIndicesUntilOfferedAgain) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 4, "A10G")).value();
  const Allocation held = table.Allocate(n, ResourceSet::Of({{kGpu, 2}})).value();  // GPUs 0, 1
  ASSERT_TRUE(table.SetGpuWithheld(n, 1, true).ok());
  ASSERT_TRUE(table.SetGpuWithheld(n, 3, true).ok());
  EXPECT_EQ(table.SetGpuWithheld(n, 4, true).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.node(n).available.Get(kGpu), Quantity::Whole(1));  // GPU 2
  EXPECT_FALSE(table.CanAllocate(n, ResourceSet::Of({{kGpu, 2}})));
  const auto& by_free = table.FindPool("A10G")->by_free[static_cast<int>(IndexedResource::kGpu)];
  EXPECT_EQ(by_free.begin()->first,
            NodeResourceTable::IndexKey(table.node(n).available, IndexedResource::kGpu));
  // Releasing GPUs 0 and 1 offers only GPU 0 again.
  ASSERT_TRUE(table.Release(held).ok());
  EXPECT_EQ(table.node(n).available.Get(kGpu), Quantity::Whole(2));
  // A head restoring a bundle on a withheld GPU takes it without room offered.
  const Allocation restored{n, ResourceSet::Of({{kGpu, 1}}), {{1, Quantity::Whole(1)}}};
  ASSERT_TRUE(table.Reserve(restored).ok());
  EXPECT_EQ(table.node(n).available.Get(kGpu), Quantity::Whole(2));
  ASSERT_TRUE(table.Release(restored).ok());
  ASSERT_TRUE(table.SetGpuWithheld(n, 1, false).ok());
  ASSERT_TRUE(table.SetGpuWithheld(n, 3, false).ok());
  EXPECT_EQ(table.node(n).available.Get(kGpu), Quantity::Whole(4));
  EXPECT_TRUE(table.CanAllocate(n, ResourceSet::Of({{kGpu, 4}})));
}

TEST(NodeResourceTableTest, AllocateFailsWithoutChange) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 2, "T4", 2)).value();
  auto a = table.Allocate(n, ResourceSet::Of({{kGpu, 1}, {kCpu, 3}}));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.node(n).available, table.node(n).total);
  EXPECT_EQ(table.node(n).gpus.TotalFree(), Quantity::Whole(2));
  auto frac = table.Allocate(n, ResourceSet::Of({{kGpu, 1.5}}));
  EXPECT_EQ(frac.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NodeResourceTableTest, OnlyAliveNodesAreIndexed) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 1, "T4")).value();
  table.AddNode(Gpu("n2", 1, "T4")).value();
  auto a = table.Allocate(n, ResourceSet::Of({{kGpu, 1}})).value();
  ASSERT_TRUE(table.SetNodeState("n1", NodeState::kDraining).ok());
  EXPECT_EQ(table.alive_count(), 1u);
  EXPECT_EQ(table.FindPool("T4")->by_free[0].size(), 1u);
  EXPECT_EQ(table.AliveTotal(kGpu), Quantity::Whole(1));
  // Bundles on a draining node are released normally; the node comes back clean.
  ASSERT_TRUE(table.Release(a).ok());
  ASSERT_TRUE(table.SetNodeState("n1", NodeState::kAlive).ok());
  EXPECT_EQ(table.alive_count(), 2u);
  EXPECT_TRUE(table.FindPool("T4")->by_free[static_cast<int>(IndexedResource::kGpu)].contains(
      {Quantity::Whole(1).units(), n}));
  ASSERT_TRUE(table.SetNodeState("n1", NodeState::kDead).ok());
  EXPECT_EQ(table.SetNodeState("n1", NodeState::kAlive).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.SetNodeState("nope", NodeState::kAlive).code(), absl::StatusCode::kNotFound);
}

TEST(NodeResourceTableTest, RemovedNodeAllocationsAreNotFound) {
  NodeResourceTable table;
  NodeIndex n = table.AddNode(Gpu("n1", 1, "T4")).value();
  auto a = table.Allocate(n, ResourceSet::Of({{kGpu, 1}})).value();
  ASSERT_TRUE(table.RemoveNode("n1").ok());
  EXPECT_EQ(table.Release(a).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(table.FindNode("n1").has_value());
  EXPECT_EQ(table.alive_count(), 0u);
  // The id can register again as a fresh node.
  EXPECT_TRUE(table.AddNode(Gpu("n1", 1, "T4")).ok());
}

TEST(NodeResourceTableTest, AliveTotalsDoNotOverflowAtScale) {
  NodeResourceTable table;
  for (int i = 0; i < 2000; ++i) {
    NodeSpec s;
    s.node_id = "n" + std::to_string(i);
    s.resources = ResourceSet::Of({{kMemory, 16e12}});  // 16 TB each: sums pass int64
    ASSERT_TRUE(table.AddNode(s).ok());
  }
  EXPECT_TRUE(table.AliveTotalCovers(ResourceSet::Of({{kMemory, 1e13}})));
  EXPECT_EQ(table.AliveTotal(kMemory).units(), INT64_MAX);  // saturates when shown
}

using ::berth::testing::MakeNode;

TEST(NodeResourceTableTest, DomainsSumTheirAliveNodesAndFollowEveryChange) {
  NodeResourceTable table;
  const std::string rack = "berth.io/topology-rack";
  ASSERT_TRUE(table.AddNode(MakeNode("a", 8, 4, "", {{rack, "r1"}})).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("b", 8, 4, "", {{rack, "r1"}})).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("c", 8, 8, "", {{rack, "r2"}})).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("loose", 8, 8)).ok());
  EXPECT_TRUE(table.HasLabelKey(rack));
  EXPECT_FALSE(table.HasLabelKey("berth.io/topology-block"));
  const int gpu = static_cast<int>(IndexedResource::kGpu);
  auto gpus_of = [&](const std::string& value, bool free) {
    const NodeResourceTable::DomainIndex& index = table.Domains(rack);
    const NodeResourceTable::Domain& d = index.domains[index.by_value.at(value)];
    return Quantity::FromUnits(free ? d.free[gpu] : d.total[gpu]);
  };
  EXPECT_EQ(table.Domains(rack).domains.size(), 2u);  // the unlabelled node is in none
  EXPECT_EQ(gpus_of("r1", false), Quantity::Whole(8));
  // Built once, then kept up to date: an allocation, a node leaving, one joining.
  absl::StatusOr<Allocation> a = table.Allocate(0, ResourceSet::Of({{kGpu, 3}}));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(gpus_of("r1", true), Quantity::Whole(5));
  ASSERT_TRUE(table.SetNodeState("b", NodeState::kDead).ok());
  EXPECT_EQ(gpus_of("r1", true), Quantity::Whole(1));
  EXPECT_EQ(gpus_of("r1", false), Quantity::Whole(4));
  EXPECT_EQ(table.Domains(rack).domains[0].nodes.size(), 1u);
  ASSERT_TRUE(table.Release(*a).ok());
  EXPECT_EQ(gpus_of("r1", true), Quantity::Whole(4));
  ASSERT_TRUE(table.AddNode(MakeNode("d", 8, 2, "", {{rack, "r3"}})).ok());
  EXPECT_EQ(gpus_of("r3", true), Quantity::Whole(2));
  ASSERT_TRUE(table.RemoveNode("c").ok());
  EXPECT_TRUE(table.Domains(rack).domains[1].nodes.empty());
  EXPECT_EQ(gpus_of("r2", false), Quantity());
}

}  // namespace
}  // namespace berth
