// PlacementScorer: the kinds by name, and the default learning its
// distribution from the groups it is shown.
#include "placement/placement_scorer.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/bundle_placer.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using testing::MakeBundle;
using testing::MakeGroup;
using testing::MakeNode;

PlacementGroupSpec GpuTask(double gpu) {
  return MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, 1}, {kGpu, gpu}}))},
                   PlacementStrategy::kPack);
}

TEST(PlacementScorerTest, ParsesEveryKindByNameAndNamesTheFieldOtherwise) {
  for (const std::string& name : ScorerKindNames()) {
    absl::StatusOr<ScorerKind> kind = ParseScorerKind(name, "--placement-scorer");
    ASSERT_TRUE(kind.ok()) << name;
    EXPECT_EQ(ScorerKindName(*kind), name);
    EXPECT_EQ(PlacementScorer(*kind).name(), name);
  }
  absl::StatusOr<ScorerKind> bad = ParseScorerKind("fgd", "--placement-scorer");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--placement-scorer: unknown scorer 'fgd'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("fragmentation, builtin"));
}

TEST(PlacementScorerTest, FixedKindsNeedNoDistribution) {
  EXPECT_EQ(PlacementScorer(ScorerKind::kBuiltIn).current(), nullptr);
  PlacementScorer first_fit(ScorerKind::kFirstFit);
  ASSERT_NE(first_fit.current(), nullptr);
  EXPECT_EQ(first_fit.current()->name(), "first-fit");
  first_fit.Observe(GpuTask(1));
  EXPECT_EQ(first_fit.window(), nullptr);
  EXPECT_EQ(first_fit.builds(), 0u);
}

TEST(PlacementScorerTest, FragmentationLearnsAfterMinTasksAndRebuildsOnDrift) {
  PlacementScorerOptions options;
  options.min_tasks = 10;
  options.check_every = 10;
  options.drift = 0.2;
  options.young_growth = 100;  // drift alone here
  PlacementScorer scorer(ScorerKind::kFragmentation, options);
  // Groups without GPUs teach nothing.
  for (int i = 0; i < 50; ++i) {
    scorer.Observe(MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, 1}}))}, PlacementStrategy::kPack));
  }
  EXPECT_EQ(scorer.current(), nullptr);
  for (int i = 0; i < 9; ++i) scorer.Observe(GpuTask(1));
  EXPECT_EQ(scorer.current(), nullptr);  // the built-in ranking meanwhile
  scorer.Observe(GpuTask(1));
  ASSERT_NE(scorer.current(), nullptr);
  EXPECT_EQ(scorer.current()->name(), "fragmentation");
  EXPECT_EQ(scorer.builds(), 1u);
  // More of the same: no rebuild.
  for (int i = 0; i < 40; ++i) scorer.Observe(GpuTask(1));
  EXPECT_EQ(scorer.builds(), 1u);
  // Half GPUs take over: a rebuild once the window has moved by 0.2.
  for (int i = 0; i < 10; ++i) scorer.Observe(GpuTask(0.5));
  EXPECT_EQ(scorer.builds(), 1u);  // 10 of 60: 0.17
  for (int i = 0; i < 10; ++i) scorer.Observe(GpuTask(0.5));
  EXPECT_EQ(scorer.builds(), 2u);  // 20 of 70: 0.29
  EXPECT_EQ(scorer.window()->shape_count(), 2u);
}

// While the window fills, each doubling (young_growth 2) looks again: a
// move below `drift` still rebuilds, no move does not.
TEST(PlacementScorerTest, AYoungWindowIsRebuiltEachTimeItGrows) {
  PlacementScorerOptions options;
  options.min_tasks = 4;
  options.young_growth = 2;
  options.check_every = 1000;
  options.drift = 0.9;
  PlacementScorer scorer(ScorerKind::kFragmentation, options);
  for (int i = 0; i < 4; ++i) scorer.Observe(GpuTask(1));
  EXPECT_EQ(scorer.builds(), 1u);
  for (int i = 0; i < 4; ++i) scorer.Observe(GpuTask(1));
  EXPECT_EQ(scorer.builds(), 1u);  // 8 tasks, the same distribution
  for (int i = 0; i < 7; ++i) scorer.Observe(GpuTask(0.5));
  EXPECT_EQ(scorer.builds(), 1u);
  scorer.Observe(GpuTask(0.5));
  EXPECT_EQ(scorer.builds(), 2u);  // 16: moved by 0.5, under drift
  EXPECT_EQ(scorer.window()->shape_count(), 2u);
}

// Learned from few tasks, half of them A100-only: taking an A100 costs more
// than it will once many tasks are seen (the boost fades to none by
// uncertain_tasks), and more than a T4, which no task insists on.
TEST(PlacementScorerTest, ScarcityWeighsMoreWhileFewTasksAreKnown) {
  NodeResourceTable table;
  const NodeIndex a100 = table.AddNode(MakeNode("a", 8, 1, "A100")).value();
  const NodeIndex t4 = table.AddNode(MakeNode("t", 8, 1, "T4")).value();
  auto learn = [](size_t uncertain_tasks) {
    PlacementScorerOptions options;
    options.min_tasks = 4;
    options.uncertain_tasks = uncertain_tasks;
    auto scorer = std::make_unique<PlacementScorer>(ScorerKind::kFragmentation, options);
    for (int i = 0; i < 2; ++i) {
      scorer->Observe(GpuTask(1));
      scorer->Observe(MakeGroup(
          {MakeBundle(ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}), "berth.io/accelerator-type=A100")},
          PlacementStrategy::kPack));
    }
    return scorer;
  };
  std::unique_ptr<PlacementScorer> uncertain = learn(100);
  std::unique_ptr<PlacementScorer> settled = learn(0);
  ASSERT_NE(uncertain->current(), nullptr);
  ASSERT_NE(settled->current(), nullptr);
  ScoredDemand any{ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}), {Quantity::Whole(1)}};
  const double a100_cost =
      settled->current()->Score(table, a100, any) - uncertain->current()->Score(table, a100, any);
  const double t4_cost =
      settled->current()->Score(table, t4, any) - uncertain->current()->Score(table, t4, any);
  EXPECT_GT(a100_cost, 0);
  EXPECT_GT(a100_cost, t4_cost);
}

TEST(PlacementScorerTest, PlacesAsAFragmentationScorerOfTheLearnedShapes) {
  // Learned: tasks take a quarter GPU or a whole one. A quarter then goes
  // where it strands least, as a scorer given those shapes decides.
  NodeResourceTable table;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(table.AddNode(MakeNode(absl::StrCat("n", i), 8, 1 + i % 3, "T4")).ok());
  }
  PlacementScorerOptions options;
  options.min_tasks = 4;
  PlacementScorer learned(ScorerKind::kFragmentation, options);
  for (double gpu : {0.25, 0.25, 1.0, 0.25}) learned.Observe(GpuTask(gpu));
  ASSERT_NE(learned.current(), nullptr);
  std::unique_ptr<FragmentationScorer> given =
      FragmentationScorer::Create(learned.window()->Shapes(), options.fragmentation).value();
  NodeResourceTable copy = table;
  for (int i = 0; i < 12; ++i) {
    const PlacementGroupSpec task = GpuTask(i % 3 == 0 ? 1.0 : 0.25);
    const PlacementDecision a = BundlePlacer(&table, learned.current()).Place(task).value();
    const PlacementDecision b = BundlePlacer(&copy, given.get()).Place(task).value();
    ASSERT_EQ(a.outcome, PlacementOutcome::kPlaced) << a.reason;
    ASSERT_EQ(b.outcome, PlacementOutcome::kPlaced) << b.reason;
    EXPECT_EQ(a.placements[0].allocation.node, b.placements[0].allocation.node) << i;
    EXPECT_EQ(a.placements[0].allocation.gpus, b.placements[0].allocation.gpus) << i;
  }
}

}  // namespace
}  // namespace berth
