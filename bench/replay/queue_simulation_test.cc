// The queue replay's entitlement measures on a small cluster: two nodes that
// alone hold a big bundle, two that do not.
#include "bench/replay/queue_simulation.h"

#include "bench/replay/simulation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::replay {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

const std::vector<TraceNode> kNodes = {{"big-0", 128000, 1048576, 8, "G3"},
                                       {"big-1", 128000, 1048576, 8, "G3"},
                                       {"small-0", 32000, 262144, 8, "G2"},
                                       {"small-1", 32000, 262144, 8, "G2"}};

NodeResourceTable Cluster() { return BuildCluster(kNodes).value(); }

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

// Gangs no set of the nodes could hold are left out of the workload (in
// the replay they would wait forever); the rest keep their order.
TEST(GangsThatFit, LeavesOutTheGangsNoNodesCouldHold) {
  auto pinned = [](std::string id, const std::string& type, int gpus) {
    TeamGang g = Gang(std::move(id), 0, 1, 8, 0);
    g.spec =
        PlacementGroupSpec::Create(
            {Bundle{ResourceSet::Of({{kGpu, gpus}}),
                    LabelSelector::Parse("berth.io/accelerator-type in (" + type + ")", "selector")
                        .value()}},
            PlacementStrategy::kPack)
            .value();
    return g;
  };
  const TeamGang g2 = pinned("g2", "G2", 8), a100 = pinned("a100", "A100", 1);
  const std::vector<TeamGang> gangs = {Gang("three-big", 0, 3, 120, 0), g2, a100,
                                       Gang("two-big", 1, 2, 120, 1), Gang("four", 1, 4, 8, 2)};
  absl::StatusOr<std::vector<TeamGang>> fit = GangsThatFit(kNodes, gangs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  std::vector<std::string> ids;
  for (const TeamGang& g : *fit) ids.push_back(g.id);
  EXPECT_THAT(ids, ElementsAre("g2", "two-big", "four"));
}

// The teams' quotas add up to the cluster: one team alone, borrowing the
// others' idle quota, takes every GPU (with quotas rounded down each, 31 of
// these 32).
TEST(RunQueues, OneTeamAloneTakesEveryGpu) {
  const std::vector<Team> teams = {{"a", 0.3, 1, 0}, {"b", 0.7, 0, 0}};
  std::vector<TeamGang> gangs;
  for (int i = 0; i < 32; ++i) {
    gangs.push_back(
        {"g" + std::to_string(i), 0, 0,
         PlacementGroupSpec::Create({Bundle{ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}), {}}},
                                    PlacementStrategy::kPack)
             .value(),
         1, 0, 3600, 3600});
  }
  QueueRunOptions options;
  options.measure_hours = 1;
  absl::StatusOr<QueueRun> run = RunQueues(kNodes, teams, gangs, QueuePolicy::kQueues, options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->allocation_by_hour, ElementsAre(DoubleNear(1.0, 1e-9)));
}

}  // namespace
}  // namespace berth::replay
