// The queue replay's entitlement measures on a small cluster: two nodes that
// alone hold a big bundle, two that do not.
#include "bench/replay/queue_simulation.h"

#include "bench/replay/simulation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::replay {
namespace {

using ::testing::ElementsAre;

NodeResourceTable Cluster() {
  std::vector<TraceNode> nodes = {{"big-0", 128000, 1048576, 8, "G3"},
                                  {"big-1", 128000, 1048576, 8, "G3"},
                                  {"small-0", 32000, 262144, 8, "G2"},
                                  {"small-1", 32000, 262144, 8, "G2"}};
  return BuildCluster(nodes).value();
}

// `bundles` bundles of 8 GPUs with `cpus` CPUs each.
TeamGang Gang(std::string id, size_t team, int bundles, double cpus, int64_t arrive_s) {
  std::vector<Bundle> b(bundles, Bundle{ResourceSet::Of({{kCpu, cpus}, {kGpu, 8}}), {}});
  return TeamGang{
      std::move(id),  team,
      /*priority=*/0, PlacementGroupSpec::Create(std::move(b), PlacementStrategy::kSpread).value(),
      8.0 * bundles,  arrive_s};
}

TEST(SharedDemand, GangsThatNeedTheSameNodesCountOnce) {
  // Each team's 16-GPU gang fits only the two big nodes.
  const TeamGang a = Gang("a", 0, 2, 120, 0), b = Gang("b", 1, 2, 120, 1);
  const std::vector<double> quota = {16, 16};
  // Given the cluster each, both are entitled to theirs; sharing it, only
  // team 0, whose gang runs within its quota.
  EXPECT_THAT(UsableDemand(Cluster(), quota, {{&a, true}, {&b, false}}), ElementsAre(16, 16));
  EXPECT_THAT(SharedDemand(Cluster(), quota, {{&a, true}, {&b, false}}), ElementsAre(16, 0));
  // Running beyond its quota (it runs a small gang within it), team 0's
  // big gang is not kept, and team 0, at its quota, takes no turn.
  const TeamGang small = Gang("small", 0, 1, 8, 0);
  EXPECT_THAT(SharedDemand(Cluster(), {8, 16}, {{&small, true}, {&a, true}, {&b, false}}),
              ElementsAre(8, 16));
  EXPECT_THAT(SharedDemand(Cluster(), {24, 16}, {{&small, true}, {&a, true}, {&b, false}}),
              ElementsAre(24, 0));
}

TEST(SharedDemand, TeamsTakeTurnsBySmallestShareOfTheirQuota) {
  // Small gangs fit any node: each team gets what it asks, up to its quota.
  std::vector<TeamGang> gangs;
  for (int i = 0; i < 4; ++i) gangs.push_back(Gang("a" + std::to_string(i), 0, 1, 8, i));
  for (int i = 0; i < 4; ++i) gangs.push_back(Gang("b" + std::to_string(i), 1, 1, 8, 10 + i));
  SubmittedGangs submitted;
  for (const TeamGang& g : gangs) submitted.emplace_back(&g, false);
  EXPECT_THAT(SharedDemand(Cluster(), {24, 8}, submitted), ElementsAre(24, 8));
  // Quotas above the cluster: the 32 GPUs go 16/16 by turns, not to the
  // team that arrived first.
  EXPECT_THAT(SharedDemand(Cluster(), {32, 32}, submitted), ElementsAre(16, 16));
  EXPECT_THAT(UsableDemand(Cluster(), {32, 32}, submitted), ElementsAre(32, 32));
}

}  // namespace
}  // namespace berth::replay
