#include "placement/bundle_placer.h"

#include <set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeBundle;
using ::berth::testing::MakeGroup;
using ::berth::testing::MakeNode;
using ::berth::testing::Repeat;
using ::testing::HasSubstr;

const ResourceSet kOneGpu = ResourceSet::Of({{kGpu, 1}});

class BundlePlacerTest : public ::testing::Test {
 protected:
  NodeIndex Add(NodeSpec spec) { return table_.AddNode(std::move(spec)).value(); }
  PlacementDecision Place(const PlacementGroupSpec& spec,
                          const std::vector<BundlePlacement>& placed = {}) {
    return BundlePlacer(&table_).Place(spec, placed).value();
  }
  std::string NodeOf(const BundlePlacement& p) { return table_.node(p.allocation.node).id; }
  std::set<std::string> Nodes(const PlacementDecision& d) {
    std::set<std::string> nodes;
    for (const auto& p : d.placements) nodes.insert(NodeOf(p));
    return nodes;
  }

  NodeResourceTable table_;
};

TEST_F(BundlePlacerTest, PackSingleBundleBestFits) {
  Add(MakeNode("big", 32, 8));
  Add(MakeNode("mid", 32, 4));
  Add(MakeNode("small", 32, 2));
  auto two = Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 2}}))}, PlacementStrategy::kPack));
  ASSERT_EQ(two.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(two.placements[0]), "small");
  auto three =
      Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 3}}))}, PlacementStrategy::kPack));
  ASSERT_EQ(three.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(three.placements[0]), "mid");
  EXPECT_EQ(three.placements[0].allocation.gpus.size(), 3u);
}

TEST_F(BundlePlacerTest, PackPutsTheWholeGroupOnTheTightestNodeThatHoldsIt) {
  Add(MakeNode("eight", 32, 8));
  Add(MakeNode("four", 32, 4));
  auto d = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 4), PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(d), std::set<std::string>{"four"});
  // GPU ids follow bundle order on the node.
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(d.placements[i].allocation.gpus[0].index, i);
}

TEST_F(BundlePlacerTest, PackSpillsOntoFewestNodes) {
  Add(MakeNode("a", 32, 4));
  Add(MakeNode("b", 32, 4));
  Add(MakeNode("c", 32, 4));
  auto d = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 6), PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(d).size(), 2u);
}

TEST_F(BundlePlacerTest, SpreadUsesDistinctNodesThenReuses) {
  Add(MakeNode("a", 8, 4));
  Add(MakeNode("b", 8, 4));
  auto two = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 2), PlacementStrategy::kSpread));
  ASSERT_EQ(two.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(two).size(), 2u);
  auto five = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 5), PlacementStrategy::kSpread));
  ASSERT_EQ(five.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(five).size(), 2u);
}

TEST_F(BundlePlacerTest, SpreadPrefersTheLeastLoadedNode) {
  NodeIndex a = Add(MakeNode("a", 8, 4));
  Add(MakeNode("b", 8, 4));
  ASSERT_TRUE(table_.Allocate(a, ResourceSet::Of({{kGpu, 3}})).ok());
  auto d = Place(MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kSpread));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(d.placements[0]), "b");
}

TEST_F(BundlePlacerTest, StrictPackNeedsOneNode) {
  Add(MakeNode("a", 16, 4));
  Add(MakeNode("b", 16, 4));
  auto fits = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 4), PlacementStrategy::kStrictPack));
  ASSERT_EQ(fits.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(fits).size(), 1u);
  // 4 more fit the other node; 8 could never share one node.
  auto never = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 8), PlacementStrategy::kStrictPack));
  EXPECT_EQ(never.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(never.reason.why, PlacementWhy::kPackShortfall);
  EXPECT_THAT(PlacementReasonText(never.reason), HasSubstr("STRICT_PACK"));
  EXPECT_THAT(PlacementReasonText(never.reason), HasSubstr("largest node has GPU: 4"));
  auto more = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 4), PlacementStrategy::kStrictPack));
  ASSERT_EQ(more.outcome, PlacementOutcome::kPlaced);
  auto wait = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 2), PlacementStrategy::kStrictPack));
  EXPECT_EQ(wait.outcome, PlacementOutcome::kRetryLater);
  EXPECT_THAT(PlacementReasonText(wait.reason), HasSubstr("waiting for resources"));
}

TEST_F(BundlePlacerTest, StrictPackChecksGpuInstancesNotJustTheSum) {
  Add(MakeNode("two", 16, 2));
  // 3 x 0.6 = 1.8 <= 2 GPUs, but no two shares fit one instance: needs 3.
  auto d = Place(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 0.6}})), 3),
                           PlacementStrategy::kStrictPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  auto two = Place(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 0.6}})), 2),
                             PlacementStrategy::kStrictPack));
  ASSERT_EQ(two.outcome, PlacementOutcome::kPlaced);
  EXPECT_NE(two.placements[0].allocation.gpus[0].index, two.placements[1].allocation.gpus[0].index);
}

TEST_F(BundlePlacerTest, StrictSpreadNeedsDistinctNodes) {
  Add(MakeNode("a", 8, 2));
  Add(MakeNode("b", 8, 2));
  auto never = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 3), PlacementStrategy::kStrictSpread));
  EXPECT_EQ(never.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(never.reason.why, PlacementWhy::kTooFewDistinctNodes);
  EXPECT_EQ(never.reason.count, 3u);
  EXPECT_THAT(PlacementReasonText(never.reason), HasSubstr("3 distinct nodes"));
  Add(MakeNode("c", 8, 2));
  auto d = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 3), PlacementStrategy::kStrictSpread));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(d).size(), 3u);
}

TEST_F(BundlePlacerTest, StrictSpreadReschedulingAvoidsTheGroupsOwnNodes) {
  Add(MakeNode("a", 8, 2));
  Add(MakeNode("b", 8, 2));
  Add(MakeNode("c", 8, 2));
  auto group = MakeGroup(Repeat(MakeBundle(kOneGpu), 3), PlacementStrategy::kStrictSpread);
  auto first = Place(group);
  ASSERT_EQ(first.outcome, PlacementOutcome::kPlaced);
  // Node of bundle 2 dies; bundles 0 and 1 stay. Bundle 2 must avoid their nodes.
  std::vector<BundlePlacement> kept = {first.placements[0], first.placements[1]};
  const std::string lost = NodeOf(first.placements[2]);
  ASSERT_TRUE(table_.SetNodeState(lost, NodeState::kDead).ok());
  auto again = Place(group, kept);
  EXPECT_EQ(again.outcome, PlacementOutcome::kInfeasible);  // only 2 ALIVE nodes, both used
  EXPECT_EQ(again.reason.why, PlacementWhy::kSpreadOwnNode);
  EXPECT_THAT(PlacementReasonText(again.reason),
              HasSubstr("already holds one of the group's bundles"));
  Add(MakeNode("d", 8, 2));
  again = Place(group, kept);
  ASSERT_EQ(again.outcome, PlacementOutcome::kPlaced);
  ASSERT_EQ(again.placements.size(), 1u);
  EXPECT_EQ(again.placements[0].bundle_index, 2u);
  EXPECT_EQ(NodeOf(again.placements[0]), "d");
}

TEST_F(BundlePlacerTest, StrictPackReschedulingJoinsThePlacedBundles) {
  Add(MakeNode("a", 8, 4));
  NodeIndex b = Add(MakeNode("b", 8, 2));
  auto group = MakeGroup(Repeat(MakeBundle(kOneGpu), 2), PlacementStrategy::kStrictPack);
  BundlePlacement on_b{0, table_.Allocate(b, kOneGpu).value()};
  auto d = Place(group, {on_b});
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(d.placements[0]), "b");
}

TEST_F(BundlePlacerTest, AlreadyPlacedIsValidated) {
  Add(MakeNode("a", 8, 4));
  auto group = MakeGroup(Repeat(MakeBundle(kOneGpu), 2), PlacementStrategy::kPack);
  BundlePlacement bogus{5, {}};
  auto r = BundlePlacer(&table_).Place(group, {bogus});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("already_placed[0].bundle_index"));
}

TEST_F(BundlePlacerTest, RetryLaterWhenBusyInfeasibleWhenTooBig) {
  NodeIndex a = Add(MakeNode("a", 8, 2, "A10G"));
  Add(MakeNode("t", 8, 4, "T4"));
  auto hold = table_.Allocate(a, ResourceSet::Of({{kGpu, 2}})).value();
  ResourceSet two_a10g = ResourceSet::Of({{kGpu, 2}, {"accelerator_type:A10G", 0.001}});
  auto busy = Place(MakeGroup({MakeBundle(two_a10g)}, PlacementStrategy::kPack));
  EXPECT_EQ(busy.outcome, PlacementOutcome::kRetryLater);
  EXPECT_THAT(PlacementReasonText(busy.reason),
              HasSubstr("the most free A10G node has GPU: 0 free"));
  ASSERT_TRUE(table_.Release(hold).ok());
  EXPECT_EQ(Place(MakeGroup({MakeBundle(two_a10g)}, PlacementStrategy::kPack)).outcome,
            PlacementOutcome::kPlaced);
  ResourceSet eight_a10g = ResourceSet::Of({{kGpu, 8}, {"accelerator_type:A10G", 0.001}});
  auto never = Place(MakeGroup({MakeBundle(eight_a10g)}, PlacementStrategy::kPack));
  EXPECT_EQ(never.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(PlacementReasonText(never.reason),
            "bundle 0 needs GPU: 8 with accelerator_type A10G; the largest A10G node has GPU: 2");
}

TEST_F(BundlePlacerTest, NoAliveNodesIsInfeasible) {
  auto d = Place(MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(d.reason.why, PlacementWhy::kNoAliveNodes);
  EXPECT_EQ(PlacementReasonText(d.reason), "no ALIVE nodes in the cluster");
}

TEST_F(BundlePlacerTest, OnlyAliveNodesReceiveBundles) {
  Add(MakeNode("draining", 8, 4));
  Add(MakeNode("dead", 8, 4));
  Add(MakeNode("alive", 8, 1));
  ASSERT_TRUE(table_.SetNodeState("draining", NodeState::kDraining).ok());
  ASSERT_TRUE(table_.SetNodeState("dead", NodeState::kDead).ok());
  auto one = Place(MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kSpread));
  ASSERT_EQ(one.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(one.placements[0]), "alive");
  // Two GPUs: only the non-ALIVE nodes have them, so it can never fit.
  auto two = Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 2}}))}, PlacementStrategy::kPack));
  EXPECT_EQ(two.outcome, PlacementOutcome::kInfeasible);
}

TEST_F(BundlePlacerTest, AcceleratorTypeRestrictsToItsNodes) {
  Add(MakeNode("t4", 8, 1, "T4"));
  Add(MakeNode("a10g", 8, 4, "A10G"));
  ResourceSet req = ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A10G", 0.001}});
  auto d = Place(MakeGroup({MakeBundle(req)}, PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(d.placements[0]), "a10g");  // though t4 is the tighter fit
  // Without the type, best fit takes the T4.
  auto any = Place(MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack));
  EXPECT_EQ(NodeOf(any.placements[0]), "t4");
  ResourceSet h100 = ResourceSet::Of({{kGpu, 1}, {"accelerator_type:H100", 0.001}});
  auto none = Place(MakeGroup({MakeBundle(h100)}, PlacementStrategy::kPack));
  EXPECT_EQ(none.outcome, PlacementOutcome::kInfeasible);
  EXPECT_THAT(PlacementReasonText(none.reason), HasSubstr("no ALIVE H100 node with GPUs matches"));
}

TEST_F(BundlePlacerTest, LabelSelectorsPerBundle) {
  Add(MakeNode("a1", 8, 2, "A10G", {{"zone", "a"}}));
  Add(MakeNode("b1", 8, 2, "A10G", {{"zone", "b"}}));
  Add(MakeNode("t1", 8, 2, "T4", {{"zone", "b"}}));
  auto d = Place(MakeGroup({MakeBundle(kOneGpu, "zone in (b), berth.io/accelerator-type in (A10G)"),
                            MakeBundle(kOneGpu, "zone notin (b)")},
                           PlacementStrategy::kSpread));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(d.placements[0]), "b1");
  EXPECT_EQ(NodeOf(d.placements[1]), "a1");
  auto none = Place(MakeGroup({MakeBundle(kOneGpu, "zone in (c)")}, PlacementStrategy::kPack));
  EXPECT_EQ(none.outcome, PlacementOutcome::kInfeasible);
  EXPECT_THAT(PlacementReasonText(none.reason), HasSubstr("matching 'zone in (c)'"));
}

TEST_F(BundlePlacerTest, CpuBundlesAvoidGpuNodesWhileCpuNodesHaveRoom) {
  Add(MakeNode("gpu", 4, 4));
  NodeIndex cpu = Add(MakeNode("cpu", 64, 0));
  auto d = Place(MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, 2}}))}, PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(d.placements[0]), "cpu");  // though the GPU node is the tighter fit
  ASSERT_TRUE(table_.Allocate(cpu, ResourceSet::Of({{kCpu, 62}})).ok());
  auto spill =
      Place(MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, 2}}))}, PlacementStrategy::kPack));
  ASSERT_EQ(spill.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(NodeOf(spill.placements[0]), "gpu");
}

// Bundles are placed largest first, yet a node's whole GPUs go out in
// bundle order: rank i of a train job whose ranks differ is bundle i, and
// its GPU ids must come below rank i+1's on a node (rank_assignment.h).
TEST_F(BundlePlacerTest, WholeGpusOfANodeGoOutInBundleOrderWhateverTheBundleSizes) {
  Add(MakeNode("n", 32, 8));
  auto d = Place(MakeGroup(
      {MakeBundle(ResourceSet::Of({{kGpu, 1}})), MakeBundle(ResourceSet::Of({{kGpu, 2}})),
       MakeBundle(ResourceSet::Of({{kGpu, 0.5}})), MakeBundle(ResourceSet::Of({{kGpu, 4}}))},
      PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  auto ids = [&](uint32_t b) {
    std::vector<uint32_t> out;
    for (const GpuShare& g : d.placements[b].allocation.gpus) out.push_back(g.index);
    return out;
  };
  // Largest first took 0-3 for bundle 3, 4-5 for bundle 1, 6 for bundle 0.
  EXPECT_EQ(ids(0), (std::vector<uint32_t>{0}));
  EXPECT_EQ(ids(1), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(ids(3), (std::vector<uint32_t>{3, 4, 5, 6}));
  EXPECT_EQ(ids(2), (std::vector<uint32_t>{7}));  // a share keeps the instance it fit on
  // The table holds exactly what the placements say: releasing them all
  // frees every instance.
  for (const BundlePlacement& p : d.placements) ASSERT_TRUE(table_.Release(p.allocation).ok());
  EXPECT_EQ(table_.node(0).gpus.TotalFree(), Quantity::Whole(8));
  EXPECT_EQ(table_.node(0).gpus.LargestRequest(), Quantity::Whole(8));
}

// PACK fills the node it opens with the bundles that may only go there
// first: here bundle 2 may only use "nvme", which bundle 1 would otherwise
// have filled.
TEST_F(BundlePlacerTest, PackFillsANodeWithSelectedBundlesFirst) {
  NodeSpec nvme = MakeNode("nvme", 8, 2);
  nvme.labels = {{"disk", "nvme"}};
  Add(nvme);
  Add(MakeNode("plain", 8, 2));
  auto d = Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 4}}), "disk=nvme"),
                            MakeBundle(kOneGpu), MakeBundle(kOneGpu, "disk=nvme")},
                           PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced) << d.reason;
  EXPECT_EQ(NodeOf(d.placements[0]), "nvme");
  EXPECT_EQ(NodeOf(d.placements[1]), "plain");
  EXPECT_EQ(NodeOf(d.placements[2]), "nvme");
}

TEST_F(BundlePlacerTest, FractionalGpusShareInstances) {
  Add(MakeNode("n", 8, 2));
  auto quarters = Place(
      MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 0.25}})), 4), PlacementStrategy::kPack));
  ASSERT_EQ(quarters.outcome, PlacementOutcome::kPlaced);
  for (const auto& p : quarters.placements) {
    ASSERT_EQ(p.allocation.gpus.size(), 1u);
    EXPECT_EQ(p.allocation.gpus[0].index, 0u);
    EXPECT_EQ(p.allocation.gpus[0].amount, Quantity::FromUnits(2500));
  }
  auto half =
      Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 0.5}}))}, PlacementStrategy::kPack));
  ASSERT_EQ(half.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(half.placements[0].allocation.gpus[0].index, 1u);
  auto whole = Place(MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack));
  EXPECT_EQ(whole.outcome, PlacementOutcome::kRetryLater);  // 0.5 free, but on one instance
}

TEST_F(BundlePlacerTest, CustomResourceOnlyBundles) {
  Add(MakeNode("plain", 8, 0));
  NodeSpec with = MakeNode("with-ssd", 8, 0);
  with.resources.Set("local_ssd", Quantity::Whole(2));
  Add(with);
  auto d = Place(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{"local_ssd", 1}})), 2),
                           PlacementStrategy::kPack));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(d), std::set<std::string>{"with-ssd"});
  auto third =
      Place(MakeGroup({MakeBundle(ResourceSet::Of({{"local_ssd", 1}}))}, PlacementStrategy::kPack));
  EXPECT_EQ(third.outcome, PlacementOutcome::kRetryLater);
}

TEST_F(BundlePlacerTest, FailedPlacementLeavesTheTableUntouched) {
  Add(MakeNode("a", 8, 2));
  Add(MakeNode("b", 8, 2));
  std::vector<ResourceSet> before;
  for (NodeIndex n = 0; n < table_.slot_count(); ++n) before.push_back(table_.node(n).available);
  // 5 GPUs in all exist but only 4: PACK places 4 then fails; all undone.
  auto d = Place(MakeGroup(Repeat(MakeBundle(kOneGpu), 5), PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(d.reason.why, PlacementWhy::kClusterTotal);
  EXPECT_EQ(d.reason.amount.need, Quantity::Whole(5));
  EXPECT_THAT(PlacementReasonText(d.reason),
              HasSubstr("the group needs GPU: 5 in all; the ALIVE nodes have GPU: 4"));
  for (NodeIndex n = 0; n < table_.slot_count(); ++n) {
    EXPECT_EQ(table_.node(n).available, before[n]);
    EXPECT_EQ(table_.node(n).gpus.TotalFree(), Quantity::Whole(2));
  }
}

// A trial placement (the queueing core's "would it fit") skips the why: a
// group that does not fit is kRetryLater without a reason, the table
// untouched; one that fits is placed as it would be with the explanations.
TEST_F(BundlePlacerTest, WithoutExplanationsAFailedPlacementSaysOnlyThatItDidNotFit) {
  Add(MakeNode("a", 8, 2));
  Add(MakeNode("b", 8, 2));
  const PlacementGroupSpec five =
      MakeGroup(Repeat(MakeBundle(kOneGpu), 5), PlacementStrategy::kPack);
  PlacementDecision d = BundlePlacer(&table_).WithoutExplanations().Place(five).value();
  EXPECT_EQ(d.outcome, PlacementOutcome::kRetryLater);
  EXPECT_THAT(PlacementReasonText(d.reason), ::testing::IsEmpty());
  for (NodeIndex n = 0; n < table_.slot_count(); ++n)
    EXPECT_EQ(table_.node(n).gpus.TotalFree(), Quantity::Whole(2));
  const PlacementGroupSpec three =
      MakeGroup(Repeat(MakeBundle(kOneGpu), 3), PlacementStrategy::kPack);
  PlacementDecision placed = BundlePlacer(&table_).WithoutExplanations().Place(three).value();
  ASSERT_EQ(placed.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(placed.placements.size(), 3u);
}

// Avoiding nodes (the room a queue keeps for a reserved gang): a group goes
// elsewhere though the avoided node fits it best, waits when only they
// would hold it, and its feasibility still counts them.
TEST_F(BundlePlacerTest, AvoidingNodesTakesNothingFreeOnThem) {
  const NodeIndex tight = Add(MakeNode("tight", 8, 2));
  Add(MakeNode("roomy", 8, 4));
  const PlacementGroupSpec two =
      MakeGroup(Repeat(MakeBundle(kOneGpu), 2), PlacementStrategy::kPack);
  const absl::flat_hash_set<NodeIndex> avoid = {tight};
  PlacementDecision d = BundlePlacer(&table_).Avoiding(&avoid).Place(two).value();
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Nodes(d), std::set<std::string>{"roomy"});  // best fit would be "tight"
  const PlacementGroupSpec three =
      MakeGroup(Repeat(MakeBundle(kOneGpu), 3), PlacementStrategy::kStrictPack);
  PlacementDecision waits = BundlePlacer(&table_).Avoiding(&avoid).Place(three).value();
  EXPECT_EQ(waits.outcome, PlacementOutcome::kRetryLater);
  EXPECT_EQ(table_.node(tight).gpus.TotalFree(), Quantity::Whole(2));
  EXPECT_EQ(Place(two).outcome, PlacementOutcome::kPlaced);  // without: "tight" again
}

TEST_F(BundlePlacerTest, SameInputSamePlacement) {
  auto build = [](NodeResourceTable& t) {
    for (int i = 0; i < 20; ++i) {
      t.AddNode(MakeNode("n" + std::to_string(i), 8 + i % 3, 4, i % 2 ? "A10G" : "T4")).value();
    }
  };
  NodeResourceTable t1, t2;
  build(t1);
  build(t2);
  auto group = MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 2}})), 9),
                         PlacementStrategy::kSpread);
  auto d1 = BundlePlacer(&t1).Place(group).value();
  auto d2 = BundlePlacer(&t2).Place(group).value();
  ASSERT_EQ(d1.placements.size(), d2.placements.size());
  for (size_t i = 0; i < d1.placements.size(); ++i) {
    EXPECT_EQ(d1.placements[i].allocation.node, d2.placements[i].allocation.node);
    EXPECT_EQ(d1.placements[i].allocation.gpus, d2.placements[i].allocation.gpus);
  }
}

// Malformed input is an error naming the field, never an abort.
TEST(PlacementGroupSpecTest, MalformedInputNamesTheField) {
  struct Case {
    PlacementGroupInput input;
    std::string field;
  };
  auto one = [](std::map<std::string, double> r, std::string strategy = "PACK") {
    return PlacementGroupInput{{BundleInput{std::move(r), {}}}, std::move(strategy)};
  };
  std::vector<Case> cases = {
      {PlacementGroupInput{{}, "PACK"}, "bundles:"},
      {one({{"CPU", -1}}), "bundles[0].resources[\"CPU\"]"},
      {one({{"GPU", std::nan("")}}), "bundles[0].resources[\"GPU\"]"},
      {one({{"GPU", 1.5}}), "bundles[0].resources[\"GPU\"]"},
      {one({{"GPU", 0}}), "bundles[0].resources: empty bundle"},
      {one({{"GPU", 1}}, "BALANCED"), "strategy: unknown strategy 'BALANCED'"},
      {one({{"bad name", 1}}), "bundles[0].resources[\"bad name\"]"},
      {one({{"GPU", 1e300}}), "bundles[0].resources[\"GPU\"]"},
  };
  cases.push_back(
      {PlacementGroupInput{{BundleInput{{{"CPU", 1}}, {}},
                            BundleInput{{{"CPU", 1}}, {{"", LabelOperator::kIn, {"a"}}}}},
                           "SPREAD"},
       "bundles[1].selector.requirements[0].key"});
  for (const Case& c : cases) {
    absl::StatusOr<PlacementGroupSpec> spec = PlacementGroupSpec::FromInput(c.input);
    ASSERT_FALSE(spec.ok()) << c.field;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.field));
  }
  auto good = PlacementGroupSpec::FromInput(one({{"GPU", 2}, {"CPU", 0.5}}, "strict_spread"));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->strategy(), PlacementStrategy::kStrictSpread);
}

constexpr char kRack[] = "berth.io/topology-rack";

PlacementGroupSpec RackGang(int bundles, Topology topology,
                            PlacementStrategy strategy = PlacementStrategy::kPack) {
  return PlacementGroupSpec::Create(Repeat(MakeBundle(kOneGpu), bundles), strategy,
                                    std::move(topology))
      .value();
}

TEST(TopologySpecTest, BadTopologiesNameTheField) {
  auto make = [](Topology t) {
    return PlacementGroupSpec::Create({MakeBundle(kOneGpu)}, PlacementStrategy::kPack, t).status();
  };
  EXPECT_THAT(make({"bad key!", {}}).message(), HasSubstr("topology.required"));
  EXPECT_THAT(make({kRack, {kRack}}).message(), HasSubstr("not both"));
  EXPECT_THAT(make({"", {kRack, kRack}}).message(), HasSubstr("topology.preferred[1]"));
  EXPECT_THAT(make({"", {kRack, ""}}).message(), HasSubstr("topology.preferred[1]"));
  EXPECT_TRUE(make({"", {"berth.io/nvlink-domain", kRack}}).ok());
  // The topology is part of the placement problem.
  EXPECT_FALSE(RackGang(2, {kRack, {}}) == RackGang(2, {}));
}

// Specs hash as they compare: the queue scheduler takes the hash for "the
// same placement problem", and a gang pinned to a GPU model (or a rack)
// must not pass for an unpinned one with the same bundles.
TEST(PlacementGroupSpecTest, SpecsThatDifferOnlyInSelectorOrTopologyHashApart) {
  auto pinned = [](const std::string& selector) {
    return MakeGroup(Repeat(MakeBundle(kOneGpu, selector), 2), PlacementStrategy::kPack);
  };
  const PlacementGroupSpec plain = pinned("");
  const std::vector<PlacementGroupSpec> others = {
      pinned("berth.io/accelerator-type in (G3)"), pinned("berth.io/accelerator-type in (T4)"),
      RackGang(2, {kRack, {}}), RackGang(2, {"", {kRack}})};
  ASSERT_TRUE(RackGang(2, {}) == plain);
  EXPECT_EQ(absl::HashOf(RackGang(2, {})), absl::HashOf(plain));
  EXPECT_EQ(absl::HashOf(pinned("berth.io/accelerator-type in (G3)")), absl::HashOf(others[0]));
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_FALSE(others[i] == plain) << i;
    EXPECT_NE(absl::HashOf(others[i]), absl::HashOf(plain)) << i;
    for (size_t j = i + 1; j < others.size(); ++j)
      EXPECT_NE(absl::HashOf(others[i]), absl::HashOf(others[j])) << i << " " << j;
  }
}

class TopologyPlacerTest : public BundlePlacerTest {
 protected:
  // Racks r1..r<racks> of `per_rack` nodes with `gpus` GPUs each.
  void AddRacks(int racks, int per_rack, double gpus) {
    for (int r = 1; r <= racks; ++r) {
      for (int n = 0; n < per_rack; ++n) {
        Add(MakeNode(absl::StrCat("r", r, "n", n), 32, gpus, "", {{kRack, absl::StrCat("r", r)}}));
      }
    }
  }
  std::set<std::string> Racks(const PlacementDecision& d) {
    std::set<std::string> racks;
    for (const auto& p : d.placements)
      racks.insert(table_.node(p.allocation.node).labels.at(kRack));
    return racks;
  }
};

TEST_F(TopologyPlacerTest, RequiredGangStaysInOneRackAndTakesTheTightestThatHoldsIt) {
  AddRacks(3, 2, 4);  // 8 GPUs a rack
  // Fill most of r1 and some of r3: r3 is then the tightest rack for 5 GPUs.
  ASSERT_EQ(Place(RackGang(6, {kRack, {}})).topology_domain, absl::StrCat(kRack, "=r1"));
  ASSERT_EQ(Place(RackGang(3, {kRack, {}})).topology_domain, absl::StrCat(kRack, "=r2"));
  // r1 has 2 free, r2 5, r3 8: a 5-GPU gang fits r2 exactly.
  PlacementDecision d = Place(RackGang(5, {kRack, {}}));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Racks(d), std::set<std::string>{"r2"});
  // Without a topology PACK would have spread 5 bundles over r1 and r2's leftovers.
  PlacementDecision spread = Place(RackGang(8, {kRack, {}}, PlacementStrategy::kSpread));
  ASSERT_EQ(spread.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Racks(spread), std::set<std::string>{"r3"});
  EXPECT_EQ(Nodes(spread).size(), 2u);
}

TEST_F(TopologyPlacerTest, RequiredGangThatNoRackFitsWaitsNamingTheRack) {
  AddRacks(2, 2, 4);
  // 5 GPUs free in each rack, 10 in all.
  for (const char* node : {"r1n0", "r2n0"}) {
    ASSERT_TRUE(table_.Allocate(*table_.FindNode(node), ResourceSet::Of({{kGpu, 3}})).ok());
  }
  PlacementDecision d = Place(RackGang(6, {kRack, {}}));
  EXPECT_EQ(d.outcome, PlacementOutcome::kRetryLater);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_THAT(PlacementReasonText(d.reason), HasSubstr("topology.required berth.io/topology-rack"));
  EXPECT_THAT(PlacementReasonText(d.reason),
              HasSubstr("berth.io/topology-rack=r1 has GPU: 5 free"));
  // The same gang without a topology fits across the racks.
  EXPECT_EQ(Place(RackGang(6, {})).outcome, PlacementOutcome::kPlaced);
  // Larger than any rack: infeasible, naming the largest.
  PlacementDecision never = Place(RackGang(9, {kRack, {}}));
  EXPECT_EQ(never.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(never.reason.why, PlacementWhy::kNoDomain);
  EXPECT_FALSE(never.reason.waiting);
  EXPECT_THAT(PlacementReasonText(never.reason), HasSubstr("no domain can ever hold"));
  EXPECT_THAT(PlacementReasonText(never.reason), HasSubstr("has GPU: 8 in all"));
  // A key no node carries.
  PlacementDecision unlabelled = Place(RackGang(1, {"berth.io/topology-block", {}}));
  EXPECT_EQ(unlabelled.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(unlabelled.reason.why, PlacementWhy::kNoDomainLabel);
  EXPECT_THAT(PlacementReasonText(unlabelled.reason), HasSubstr("no ALIVE node carries the label"));
}

TEST_F(TopologyPlacerTest, LostBundlesComeBackInTheGroupsRack) {
  AddRacks(2, 3, 4);
  const PlacementGroupSpec gang = RackGang(6, {kRack, {}});
  PlacementDecision first = Place(gang);
  ASSERT_EQ(first.outcome, PlacementOutcome::kPlaced);
  ASSERT_EQ(Nodes(first).size(), 2u);
  const std::string rack = *Racks(first).begin();
  // Lose the bundles of one node; the rest stay.
  const NodeIndex lost = first.placements[0].allocation.node;
  std::vector<BundlePlacement> kept;
  for (const BundlePlacement& p : first.placements) {
    if (p.allocation.node != lost) {
      kept.push_back(p);
    } else {
      ASSERT_TRUE(table_.Release(p.allocation).ok());
    }
  }
  ASSERT_TRUE(table_.SetNodeState(table_.node(lost).id, NodeState::kDead).ok());
  PlacementDecision again = Place(gang, kept);
  ASSERT_EQ(again.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Racks(again), std::set<std::string>{rack});
  // With its rack full the lost bundles wait there, though the other rack is empty.
  for (const BundlePlacement& p : again.placements) ASSERT_TRUE(table_.Release(p.allocation).ok());
  for (const auto& [value, index] : table_.Domains(kRack).by_value) {
    if (value != rack) continue;
    for (NodeIndex n : table_.Domains(kRack).domains[index].nodes) {
      if (table_.node(n).available.Get(kGpu).IsZero()) continue;
      ASSERT_TRUE(
          table_
              .Allocate(n, ResourceSet::Of({{kGpu, table_.node(n).available.Get(kGpu).ToDouble()}}))
              .ok());
    }
  }
  PlacementDecision wait = Place(gang, kept);
  EXPECT_EQ(wait.outcome, PlacementOutcome::kRetryLater);
  EXPECT_EQ(wait.reason.why, PlacementWhy::kDomainLost);
  EXPECT_TRUE(wait.reason.waiting);
  EXPECT_THAT(PlacementReasonText(wait.reason), HasSubstr("wait for room in the group's domain"));
}

TEST_F(TopologyPlacerTest, PreferredTriesTheInnermostKeyThenTheNextThenAnywhere) {
  const std::string nvl = "berth.io/nvlink-domain";
  // Two racks, each of two NVLink domains of one 4-GPU node.
  for (int r = 1; r <= 2; ++r) {
    for (int n = 0; n < 2; ++n) {
      Add(MakeNode(absl::StrCat("r", r, "n", n), 32, 4, "",
                   {{kRack, absl::StrCat("r", r)}, {nvl, absl::StrCat("r", r, "-nvl", n)}}));
    }
  }
  const Topology preferred{"", {nvl, kRack}};
  PlacementDecision inner = Place(RackGang(4, preferred, PlacementStrategy::kSpread));
  ASSERT_EQ(inner.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(inner.topology_domain, nvl + "=r1-nvl0");  // SPREAD, but within one NVLink domain
  PlacementDecision rack = Place(RackGang(8, preferred));
  ASSERT_EQ(rack.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(rack.topology_domain, absl::StrCat(kRack, "=r2"));
  EXPECT_EQ(Place(RackGang(4, preferred)).topology_domain, nvl + "=r1-nvl1");
  EXPECT_EQ(Place(RackGang(1, preferred)).outcome, PlacementOutcome::kRetryLater);  // full
}

TEST_F(TopologyPlacerTest, PreferredFallsBackToTheWholeClusterWhenNoDomainHasRoom) {
  AddRacks(2, 1, 4);
  PlacementDecision d = Place(RackGang(6, {"", {kRack}}));
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced);
  EXPECT_EQ(Racks(d).size(), 2u);
  EXPECT_EQ(d.topology_domain, "");
}

}  // namespace
}  // namespace berth
