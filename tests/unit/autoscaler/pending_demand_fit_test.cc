#include "autoscaler/pending_demand_fit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/autoscaler/node_pool_test_util.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::GpuPool;

v1::PendingDemand Gang(int bundles, double gpus, v1::PlacementStrategy strategy, int count = 1) {
  v1::PendingDemand d;
  for (int i = 0; i < bundles; ++i)
    (*d.add_shape()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
  d.set_strategy(strategy);
  d.set_count(count);
  return d;
}

TEST(PendingDemandFitTest, EachCopyOfAGangGetsItsNodesAndIsNamedPerGang) {
  const std::vector<NodePool> pools = {GpuPool("a10g", "A10G", 4, 8)};
  SimulatedCluster cluster;
  const PendingDemandFit fit =
      FitPendingDemand(pools, {{"a10g", 0}},
                       {Gang(2, 4, v1::PLACEMENT_STRATEGY_STRICT_SPREAD, /*count=*/2)}, &cluster);
  EXPECT_EQ(fit.added.at("a10g"), 4u);
  EXPECT_THAT(fit.added_for.at("a10g"),
              ElementsAre("{GPU: 4} * 2 (STRICT_SPREAD)", "{GPU: 4} * 2 (STRICT_SPREAD)"));
  EXPECT_THAT(fit.unsatisfiable, IsEmpty());
}

TEST(PendingDemandFitTest, TheNextPoolGrowsWhenTheFirstIsAtItsTarget) {
  const std::vector<NodePool> pools = {GpuPool("small", "A10G", 4, 2),
                                       GpuPool("big", "A10G", 4, 8)};
  SimulatedCluster cluster;
  // small was asked for its max_nodes already: no room to grow.
  const PendingDemandFit fit = FitPendingDemand(
      pools, {{"small", 2}, {"big", 0}}, {Gang(1, 4, v1::PLACEMENT_STRATEGY_PACK)}, &cluster);
  EXPECT_EQ(fit.added.at("small"), 0u);
  EXPECT_EQ(fit.added.at("big"), 1u);
}

TEST(PendingDemandFitTest, AnUnsatisfiableGangIsReportedOnce) {
  const std::vector<NodePool> pools = {GpuPool("a10g", "A10G", 4, 1)};
  SimulatedCluster cluster;
  const PendingDemandFit fit = FitPendingDemand(
      pools, {{"a10g", 1}},
      {Gang(1, 4, v1::PLACEMENT_STRATEGY_PACK, /*count=*/3),
       Gang(1, 4, v1::PLACEMENT_STRATEGY_PACK), Gang(1, 8, v1::PLACEMENT_STRATEGY_PACK)},
      &cluster);
  EXPECT_EQ(fit.added.at("a10g"), 0u);
  ASSERT_EQ(fit.unsatisfiable.size(), 2u);
  EXPECT_EQ(fit.unsatisfiable[0].reason(), "pool a10g could hold it but is at max_nodes (1)");
  EXPECT_THAT(fit.unsatisfiable[1].reason(), HasSubstr("no node pool's node shape"));
}

}  // namespace
}  // namespace berth
