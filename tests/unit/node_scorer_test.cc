// Each NodeScorer's ranking on small tables, alone and through BundlePlacer.
#include "scheduler/node_scorer.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using testing::MakeBundle;
using testing::MakeGroup;
using testing::MakeNode;
using ::testing::HasSubstr;

// n0: 4 idle GPUs; n1: 1 idle GPU (the tighter fit); both A10G.
class ScorerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    n0_ = table_.AddNode(MakeNode("n0", 16, 4, "A10G")).value();
    n1_ = table_.AddNode(MakeNode("n1", 16, 1, "A10G")).value();
  }
  NodeIndex PlaceOneGpu(NodeScorer* scorer) {
    BundlePlacer placer(&table_, scorer);
    PlacementDecision d =
        placer.Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}}))}, PlacementStrategy::kPack))
            .value();
    EXPECT_EQ(d.outcome, PlacementOutcome::kPlaced) << d.reason;
    return d.placements.at(0).allocation.node;
  }
  ScoredDemand OneGpu() const { return {ResourceSet::Of({{kGpu, 1}}), {Quantity::Whole(1)}}; }

  NodeResourceTable table_;
  NodeIndex n0_ = 0;
  NodeIndex n1_ = 0;
};

TEST_F(ScorerTest, WithoutScorerThePlacerKeepsItsBestFit) { EXPECT_EQ(PlaceOneGpu(nullptr), n1_); }

TEST_F(ScorerTest, FirstFitTakesTheLowestIndex) {
  FirstFitScorer scorer;
  EXPECT_GT(scorer.Score(table_, n0_, OneGpu()), scorer.Score(table_, n1_, OneGpu()));
  EXPECT_EQ(PlaceOneGpu(&scorer), n0_);
}

TEST_F(ScorerTest, WorstFitTakesTheEmptiestNode) {
  WorstFitScorer scorer;
  EXPECT_GT(scorer.Score(table_, n0_, OneGpu()), scorer.Score(table_, n1_, OneGpu()));
  EXPECT_EQ(PlaceOneGpu(&scorer), n0_);
}

TEST_F(ScorerTest, BestFitTakesTheTightestNode) {
  BestFitScorer scorer;
  EXPECT_GT(scorer.Score(table_, n1_, OneGpu()), scorer.Score(table_, n0_, OneGpu()));
  EXPECT_EQ(PlaceOneGpu(&scorer), n1_);
}

TEST_F(ScorerTest, RandomIsSeededAndVisitsEveryNode) {
  RandomScorer a(7);
  RandomScorer b(7);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.Score(table_, n0_, OneGpu()), b.Score(table_, n0_, OneGpu()));
  std::set<NodeIndex> chosen;
  for (int i = 0; i < 32; ++i) {
    BundlePlacer placer(&table_, &a);
    PlacementDecision d =
        placer.Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}}))}, PlacementStrategy::kPack))
            .value();
    chosen.insert(d.placements.at(0).allocation.node);
    ASSERT_TRUE(table_.Release(d.placements.at(0).allocation).ok());
  }
  EXPECT_EQ(chosen, (std::set<NodeIndex>{n0_, n1_}));
}

TEST_F(ScorerTest, ScorerRanksOnlyNodesThatFit) {
  ASSERT_TRUE(table_.Allocate(n0_, ResourceSet::Of({{kGpu, 4}})).ok());
  FirstFitScorer scorer;  // would prefer n0, which is full
  EXPECT_EQ(PlaceOneGpu(&scorer), n1_);
}

std::unique_ptr<FragmentationScorer> WholeGpuTasks() {
  return FragmentationScorer::Create({{Quantity::Whole(1), Quantity(), Quantity::Whole(1), {}, 1}})
      .value();
}

TEST(FragmentationScorerTest, FillsAPartlyUsedGpuRatherThanBreakingAWholeOne) {
  NodeResourceTable table;
  const NodeIndex shared = table.AddNode(MakeNode("shared", 16, 2, "T4")).value();
  const NodeIndex idle = table.AddNode(MakeNode("idle", 16, 2, "T4")).value();
  ASSERT_TRUE(table.Allocate(shared, ResourceSet::Of({{kGpu, 0.5}})).ok());
  std::unique_ptr<FragmentationScorer> scorer = WholeGpuTasks();
  // The half-used GPU cannot take a whole-GPU task: 0.5 GPU fragmented.
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, shared), 0.5);
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, idle), 0);
  const ScoredDemand half{ResourceSet::Of({{kGpu, 0.5}}), {Quantity::FromUnits(5000)}};
  EXPECT_GT(scorer->Score(table, shared, half), scorer->Score(table, idle, half));

  BundlePlacer placer(&table, scorer.get());
  PlacementDecision d =
      placer.Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 0.5}}))}, PlacementStrategy::kPack))
          .value();
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(d.placements[0].allocation.node, shared);
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, shared), 0);
}

TEST(FragmentationScorerTest, UnusableNodesCountAllTheirFreeGpu) {
  NodeResourceTable table;
  const NodeIndex t4 = table.AddNode(MakeNode("t4", 16, 2, "T4")).value();
  const NodeIndex busy_cpu = table.AddNode(MakeNode("busy", 16, 2, "A10G")).value();
  ASSERT_TRUE(table.Allocate(busy_cpu, ResourceSet::Of({{kCpu, 15}})).ok());
  // Tasks want 2 CPUs and one A10G GPU.
  std::unique_ptr<FragmentationScorer> scorer =
      FragmentationScorer::Create({{Quantity::Whole(2), Quantity(), Quantity::Whole(1), {"A10G"}, 1}})
          .value();
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, t4), 2);        // wrong model
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, busy_cpu), 2);  // too little CPU
}

TEST(FragmentationScorerTest, WeighsShapesByPopularity) {
  NodeResourceTable table;
  const NodeIndex n = table.AddNode(MakeNode("n", 16, 1, "T4")).value();
  ASSERT_TRUE(table.Allocate(n, ResourceSet::Of({{kGpu, 0.5}})).ok());
  // 3 of 4 tasks take a quarter GPU (fit in the free half), 1 of 4 a whole one.
  std::unique_ptr<FragmentationScorer> scorer =
      FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::FromUnits(2500), {}, 3},
                                   {Quantity(), Quantity(), Quantity::Whole(1), {}, 1}})
          .value();
  EXPECT_DOUBLE_EQ(scorer->NodeFragmentation(table, n), 0.25 * 0.5);
}

TEST(FragmentationScorerTest, BreaksEqualGrowthTowardsTheFullerNode) {
  NodeResourceTable table;
  const NodeIndex big = table.AddNode(MakeNode("big", 64, 8, "G2")).value();
  const NodeIndex small = table.AddNode(MakeNode("small", 64, 2, "G2")).value();
  std::unique_ptr<FragmentationScorer> scorer = WholeGpuTasks();
  const ScoredDemand one{ResourceSet::Of({{kGpu, 1}}), {Quantity::Whole(1)}};
  EXPECT_GT(scorer->Score(table, small, one), scorer->Score(table, big, one));
}

TEST(FragmentationScorerTest, StrandingCountsGpusTheCpuLeftCannotFeed) {
  NodeResourceTable table;
  const NodeIndex n = table.AddNode(MakeNode("n", 16, 4, "G2")).value();
  ASSERT_TRUE(table.Allocate(n, ResourceSet::Of({{kCpu, 12}})).ok());
  // Tasks take 4 CPUs per GPU: 4 free CPUs feed 1 of the 4 free GPUs.
  const std::vector<TaskShape> shapes = {{Quantity::Whole(4), Quantity(), Quantity::Whole(1), {}, 1}};
  std::unique_ptr<FragmentationScorer> fgd = FragmentationScorer::Create(shapes).value();
  FragmentationOptions options;
  options.stranding_weight = 0.5;
  std::unique_ptr<FragmentationScorer> stranding = FragmentationScorer::Create(shapes, options).value();
  EXPECT_DOUBLE_EQ(fgd->NodeFragmentation(table, n), 0);  // one more task still fits
  EXPECT_DOUBLE_EQ(stranding->NodeFragmentation(table, n), 0.5 * 3);
}

TEST(FragmentationScorerTest, ScarcityKeepsUnrestrictedTasksOffModelsOthersNeed) {
  NodeResourceTable table;
  const NodeIndex t4 = table.AddNode(MakeNode("t4", 16, 2, "T4")).value();
  const NodeIndex g2 = table.AddNode(MakeNode("g2", 16, 2, "G2")).value();
  // Half the tasks need a T4; the other half take any model.
  const std::vector<TaskShape> shapes = {
      {Quantity::Whole(1), Quantity(), Quantity::Whole(1), {"T4"}, 1},
      {Quantity::Whole(1), Quantity(), Quantity::Whole(1), {}, 1}};
  const ScoredDemand any{ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}), {Quantity::Whole(1)}};
  std::unique_ptr<FragmentationScorer> fgd = FragmentationScorer::Create(shapes).value();
  FragmentationOptions options;
  options.scarcity_weight = 1;
  std::unique_ptr<FragmentationScorer> scarce = FragmentationScorer::Create(shapes, options).value();
  // P(T4) = 1.5 and P(G2) = 0.5: the T4-only half's demand falls on the
  // T4 GPUs alone, the rest spreads over all four. One GPU taken on the T4
  // node therefore costs 1 more than on the G2 node than under FGD alone.
  const double fgd_gap = fgd->Score(table, g2, any) - fgd->Score(table, t4, any);
  const double scarce_gap = scarce->Score(table, g2, any) - scarce->Score(table, t4, any);
  EXPECT_NEAR(scarce_gap - fgd_gap, 1.0, 1e-9);
}

TEST(FragmentationScorerTest, RejectsBadShapesAndOptions) {
  EXPECT_THAT(FragmentationScorer::Create({}).status().message(), HasSubstr("empty"));
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, -1}})
                  .status()
                  .message(),
              HasSubstr("shapes[0].weight"));
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::FromUnits(15000), {}, 1}})
                  .status()
                  .message(),
              HasSubstr("shapes[0].gpu"));
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, 0}})
                  .status()
                  .message(),
              HasSubstr("every weight is zero"));
  FragmentationOptions options;
  options.stranding_weight = -1;
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, 1}},
                                          options)
                  .status()
                  .message(),
              HasSubstr("options.stranding_weight"));
}

}  // namespace
}  // namespace berth
