#include "autoscaler/simulated_cluster.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/autoscaler/node_pool_test_util.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using testing::GpuPool;

void Set(v1::ResourceSet* set, const std::string& name, double value) {
  (*set->mutable_amounts())[name] = value;
}

// A registered node of `pool` with `free_gpus` of its GPUs available.
v1::NodeInfo Node(const std::string& id, const NodePool& pool, double free_gpus) {
  v1::NodeInfo n;
  n.set_node_id(id);
  n.set_state(v1::NODE_STATE_ALIVE);
  Set(n.mutable_total(), "CPU", 32);
  Set(n.mutable_available(), "CPU", 32);
  Set(n.mutable_total(), "GPU", pool.gpus);
  Set(n.mutable_available(), "GPU", free_gpus);
  Set(n.mutable_total(), "accelerator_type:" + pool.accelerator_type, 1);
  Set(n.mutable_available(), "accelerator_type:" + pool.accelerator_type, 1);
  (*n.mutable_labels())["berth.io/accelerator-type"] = pool.accelerator_type;
  (*n.mutable_labels())["berth.io/node-pool"] = pool.name;
  for (uint32_t i = 0; i < pool.gpus; ++i) n.add_gpus()->set_index(i);
  return n;
}

PlacementGroupSpec Gang(int bundles, double gpus, v1::PlacementStrategy strategy) {
  v1::PendingDemand d;
  for (int i = 0; i < bundles; ++i) Set(d.add_shape()->mutable_resources(), "GPU", gpus);
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpecFromProto(d.shape(), strategy, /*allow_internal=*/true);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(SimulatedClusterTest, AFractionOfAGpuInUseTakesAWholeGpuFromABundle) {
  const NodePool a10g = GpuPool("a10g", "A10G", 4);
  SimulatedCluster cluster;
  cluster.AddRegisteredNode(Node("a-1", a10g, 3.5));
  // 3.5 GPUs free, but only 3 whole ones: no room for 4 one-GPU bundles.
  EXPECT_FALSE(cluster.Place(Gang(4, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK)));
  EXPECT_THAT(cluster.receives_demand(), IsEmpty());
  EXPECT_TRUE(cluster.Place(Gang(3, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK)));
  EXPECT_THAT(cluster.receives_demand(), ElementsAre("a-1"));
}

TEST(SimulatedClusterTest, APlacedGangKeepsItsReservation) {
  const NodePool a10g = GpuPool("a10g", "A10G", 4);
  SimulatedCluster cluster;
  ASSERT_TRUE(cluster.AddPoolNode(a10g));
  EXPECT_TRUE(cluster.Place(Gang(1, 3, v1::PLACEMENT_STRATEGY_PACK)));
  EXPECT_FALSE(cluster.Place(Gang(1, 2, v1::PLACEMENT_STRATEGY_PACK)));
}

TEST(SimulatedClusterTest, GrowingTooLittleKeepsNoNodes) {
  const NodePool a10g = GpuPool("a10g", "A10G", 4);
  SimulatedCluster cluster;
  const PlacementGroupSpec gang = Gang(2, 4, v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  EXPECT_EQ(cluster.GrowUntilPlaced(a10g, gang, 1), 0u);
  // Had the first try kept its node, one more would do.
  EXPECT_EQ(cluster.GrowUntilPlaced(a10g, gang, 2), 2u);
  // The gang holds both new nodes.
  EXPECT_FALSE(cluster.Place(Gang(1, 1, v1::PLACEMENT_STRATEGY_PACK)));
}

TEST(SimulatedClusterTest, PoolNodesCouldHoldAsksOnlyTheNodeShape) {
  const NodePool t4 = GpuPool("t4", "T4", 1);
  EXPECT_TRUE(PoolNodesCouldHold(t4, Gang(3, 1, v1::PLACEMENT_STRATEGY_STRICT_SPREAD)));
  EXPECT_FALSE(PoolNodesCouldHold(t4, Gang(3, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK)));
  EXPECT_FALSE(PoolNodesCouldHold(t4, Gang(1, 2, v1::PLACEMENT_STRATEGY_PACK)));
}

}  // namespace
}  // namespace berth
