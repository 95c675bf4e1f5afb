// Each NodeScorer's ranking on small tables, alone and through BundlePlacer.
#include "placement/node_scorer.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/fragmentation_scorer.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using testing::MakeBundle;
using testing::MakeGroup;
using testing::MakeNode;

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
        placer
            .Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}}))}, PlacementStrategy::kPack))
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
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(a.Score(table_, n0_, OneGpu()), b.Score(table_, n0_, OneGpu()));
  std::set<NodeIndex> chosen;
  for (int i = 0; i < 32; ++i) {
    BundlePlacer placer(&table_, &a);
    PlacementDecision d =
        placer
            .Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}}))}, PlacementStrategy::kPack))
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
      placer
          .Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 0.5}}))}, PlacementStrategy::kPack))
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
      FragmentationScorer::Create(
          {{Quantity::Whole(2), Quantity(), Quantity::Whole(1), {"A10G"}, 1}})
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
  const std::vector<TaskShape> shapes = {
      {Quantity::Whole(4), Quantity(), Quantity::Whole(1), {}, 1}};
  std::unique_ptr<FragmentationScorer> fgd = FragmentationScorer::Create(shapes).value();
  FragmentationOptions options;
  options.stranding_weight = 0.5;
  std::unique_ptr<FragmentationScorer> stranding =
      FragmentationScorer::Create(shapes, options).value();
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
  std::unique_ptr<FragmentationScorer> scarce =
      FragmentationScorer::Create(shapes, options).value();
  // P(T4) = 1.5 and P(G2) = 0.5: the T4-only half's demand falls on the
  // T4 GPUs alone, the rest spreads over all four. One GPU taken on the T4
  // node therefore costs 1 more than on the G2 node than under FGD alone.
  const double fgd_gap = fgd->Score(table, g2, any) - fgd->Score(table, t4, any);
  const double scarce_gap = scarce->Score(table, g2, any) - scarce->Score(table, t4, any);
  EXPECT_NEAR(scarce_gap - fgd_gap, 1.0, 1e-9);
}

TEST(FragmentationScorerTest, ScarcityFollowsANodeDyingAndAnotherJoining) {
  // A T4 node dies and a G2 node joins: the ALIVE count stays at three, but
  // the T4 capacity the T4-only tasks' demand falls on halves, so taking a
  // T4 costs more. The scores must be those of a scorer that never saw
  // the dead node.
  NodeResourceTable table;
  const NodeIndex t4 = table.AddNode(MakeNode("t4", 16, 2, "T4")).value();
  ASSERT_TRUE(table.AddNode(MakeNode("t4b", 16, 2, "T4")).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("g2", 16, 2, "G2")).ok());
  const std::vector<TaskShape> shapes = {
      {Quantity::Whole(1), Quantity(), Quantity::Whole(1), {"T4"}, 1},
      {Quantity::Whole(1), Quantity(), Quantity::Whole(1), {}, 1}};
  const ScoredDemand any{ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}), {Quantity::Whole(1)}};
  FragmentationOptions options;
  options.scarcity_weight = 1;
  std::unique_ptr<FragmentationScorer> seen = FragmentationScorer::Create(shapes, options).value();
  const double before = seen->Score(table, t4, any);
  ASSERT_TRUE(table.SetNodeState("t4b", NodeState::kDead).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("g2b", 16, 2, "G2")).ok());
  std::unique_ptr<FragmentationScorer> fresh = FragmentationScorer::Create(shapes, options).value();
  const double after = seen->Score(table, t4, any);
  EXPECT_EQ(after, fresh->Score(table, t4, any));
  // P(T4) went from 1.25 to 2.
  EXPECT_NEAR(before - after, 0.75, 1e-9);
}

TEST(FragmentationScorerTest, RejectsBadShapesAndOptions) {
  EXPECT_THAT(FragmentationScorer::Create({}).status().message(), HasSubstr("empty"));
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, -1}})
                  .status()
                  .message(),
              HasSubstr("shapes[0].weight"));
  EXPECT_THAT(
      FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::FromUnits(15000), {}, 1}})
          .status()
          .message(),
      HasSubstr("shapes[0].gpu"));
  EXPECT_THAT(FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, 0}})
                  .status()
                  .message(),
              HasSubstr("every weight is zero"));
  FragmentationOptions options;
  options.stranding_weight = -1;
  EXPECT_THAT(
      FragmentationScorer::Create({{Quantity(), Quantity(), Quantity::Whole(1), {}, 1}}, options)
          .status()
          .message(),
      HasSubstr("options.stranding_weight"));
}

// FragmentationScorer's scores, searched node by node (NodeScorer's Best):
// the reference the class-based search must agree with.
class PerNodeFragmentation : public NodeScorer {
 public:
  explicit PerNodeFragmentation(std::unique_ptr<FragmentationScorer> scorer)
      : scorer_(std::move(scorer)) {}
  absl::string_view name() const override { return "per-node"; }
  double Score(const NodeResourceTable& table, NodeIndex node,
               const ScoredDemand& demand) override {
    return scorer_->Score(table, node, demand);
  }

 private:
  std::unique_ptr<FragmentationScorer> scorer_;
};

std::vector<TaskShape> RandomShapes(std::mt19937& rng) {
  const std::vector<std::vector<std::string>> types = {{}, {}, {"T4"}, {"A10G", "T4"}, {"A10G"}};
  std::vector<TaskShape> shapes;
  const int count = 3 + static_cast<int>(rng() % 6);
  for (int i = 0; i < count; ++i) {
    TaskShape s;
    s.cpu = Quantity::Whole(rng() % 9);
    s.memory = Quantity::Whole(static_cast<int64_t>(rng() % 4) * 8);
    const int64_t gpu_units[] = {0, 2500, 5000, 7000, 10000, 20000, 40000};
    s.gpu = Quantity::FromUnits(gpu_units[rng() % 7]);
    s.accelerator_types = types[rng() % types.size()];
    s.weight = 1 + static_cast<double>(rng() % 5);
    shapes.push_back(s);
  }
  return shapes;
}

// Two tables changed the same way, one placed with the class-based search,
// the other node by node: every decision, reason and GPU share must agree.
class ClassSearchTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  void AddNode(int i) {
    const char* types[] = {"T4", "A10G", "", ""};
    const double gpus[] = {1, 2, 4, 8};
    // One draw per statement: argument order differs between compilers.
    const char* type = types[rng_() % 4];
    const double node_gpus = *type == 0 && rng_() % 2 == 0 ? 0 : gpus[rng_() % 4];
    const double cpus = 8.0 * (1 + rng_() % 4);
    const char* zone = rng_() % 2 ? "a" : "b";
    const double memory = 32e9 * (1 + rng_() % 2);
    NodeSpec spec = MakeNode(absl::StrCat("n", i), cpus, node_gpus, node_gpus == 0 ? "" : type,
                             {{"zone", zone}}, memory);
    for (NodeResourceTable* t : {&classes_, &nodes_}) ASSERT_TRUE(t->AddNode(spec).ok());
  }
  PlacementGroupSpec RandomGroup() {
    const char* selectors[] = {"", "", "zone in (a)", "berth.io/accelerator-type in (T4, A10G)",
                               "berth.io/accelerator-type in (A10G)"};
    const int64_t gpu_units[] = {0, 2500, 5000, 10000, 10000, 20000};
    const PlacementStrategy strategies[] = {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                                            PlacementStrategy::kStrictPack,
                                            PlacementStrategy::kStrictSpread};
    std::vector<Bundle> bundles;
    const int count = 1 + static_cast<int>(rng_() % 3);
    for (int b = 0; b < count; ++b) {
      ResourceSet r;
      r.Set(kCpu, Quantity::Whole(1 + rng_() % 6));
      r.Set(kMemory, Quantity::Whole(static_cast<int64_t>(rng_() % 3) * 4'000'000'000));
      r.Set(kGpu, Quantity::FromUnits(gpu_units[rng_() % 6]));
      bundles.push_back(MakeBundle(r, selectors[rng_() % 5]));
    }
    return MakeGroup(std::move(bundles), strategies[rng_() % 4]);
  }

  std::mt19937 rng_{GetParam()};
  NodeResourceTable classes_;
  NodeResourceTable nodes_;
};

TEST_P(ClassSearchTest, PicksTheNodesThePerNodeSearchPicks) {
  const std::vector<TaskShape> shapes = RandomShapes(rng_);
  FragmentationOptions options;
  options.scarcity_weight = rng_() % 2;
  options.stranding_weight = rng_() % 2;
  std::unique_ptr<FragmentationScorer> by_class =
      FragmentationScorer::Create(shapes, options).value();
  PerNodeFragmentation by_node(FragmentationScorer::Create(shapes, options).value());
  int added = 0;
  for (; added < 24; ++added) AddNode(added);
  BundlePlacer class_placer(&classes_, by_class.get());
  BundlePlacer node_placer(&nodes_, &by_node);
  std::vector<std::vector<BundlePlacement>> running;
  int placed = 0;
  for (int step = 0; step < 300; ++step) {
    const uint32_t action = rng_() % 20;
    if (action < 3 && !running.empty()) {  // a group leaves
      const size_t i = rng_() % running.size();
      for (const BundlePlacement& p : running[i]) {
        ASSERT_TRUE(classes_.Release(p.allocation).ok());
        ASSERT_TRUE(nodes_.Release(p.allocation).ok());
      }
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (action == 3) {  // a node drains, comes back, dies or joins
      const std::string id = absl::StrCat("n", rng_() % added);
      const NodeState states[] = {NodeState::kAlive, NodeState::kDraining, NodeState::kDead};
      const NodeState state = states[rng_() % 3];
      EXPECT_EQ(classes_.SetNodeState(id, state).ok(), nodes_.SetNodeState(id, state).ok());
      continue;
    }
    if (action == 4) {
      AddNode(added++);
      continue;
    }
    const PlacementGroupSpec group = RandomGroup();
    const PlacementDecision got = class_placer.Place(group).value();
    const PlacementDecision want = node_placer.Place(group).value();
    ASSERT_EQ(got.outcome, want.outcome) << "step " << step;
    ASSERT_EQ(got.reason, want.reason) << "step " << step;
    ASSERT_EQ(got.placements.size(), want.placements.size());
    for (size_t i = 0; i < got.placements.size(); ++i) {
      EXPECT_EQ(got.placements[i].bundle_index, want.placements[i].bundle_index);
      EXPECT_EQ(got.placements[i].allocation.node, want.placements[i].allocation.node)
          << "step " << step;
      EXPECT_EQ(got.placements[i].allocation.gpus, want.placements[i].allocation.gpus);
    }
    if (got.outcome == PlacementOutcome::kPlaced) {
      running.push_back(got.placements);
      ++placed;
    }
  }
  EXPECT_GT(placed, 20);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ClassSearchTest, ::testing::Range(1u, 81u));

TEST(FragmentationScorerTest, FollowsTheTableItIsAskedAbout) {
  // One scorer, two tables in different states: each search sees its own.
  const std::vector<TaskShape> shapes = {{Quantity(), Quantity(), Quantity::Whole(1), {}, 1}};
  std::unique_ptr<FragmentationScorer> scorer = FragmentationScorer::Create(shapes).value();
  NodeResourceTable a;
  NodeResourceTable b;
  for (NodeResourceTable* t : {&a, &b}) {
    ASSERT_TRUE(t->AddNode(MakeNode("n0", 16, 2, "T4")).ok());
    ASSERT_TRUE(t->AddNode(MakeNode("n1", 16, 2, "T4")).ok());
  }
  ASSERT_TRUE(b.Allocate(1, ResourceSet::Of({{kGpu, 0.5}})).ok());
  const PlacementGroupSpec half =
      MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 0.5}}))}, PlacementStrategy::kPack);
  for (int round = 0; round < 2; ++round) {
    const PlacementDecision on_a = BundlePlacer(&a, scorer.get()).Place(half).value();
    // On b the half-used GPU of n1 takes it, leaving n0's whole GPUs.
    const PlacementDecision on_b = BundlePlacer(&b, scorer.get()).Place(half).value();
    EXPECT_EQ(on_a.placements.at(0).allocation.node, 0u);
    EXPECT_EQ(on_b.placements.at(0).allocation.node, 1u);
    ASSERT_TRUE(a.Release(on_a.placements[0].allocation).ok());
    ASSERT_TRUE(b.Release(on_b.placements[0].allocation).ok());
  }
}

}  // namespace
}  // namespace berth
