#include "placement/placement_explanation.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/node_filters.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeBundle;
using ::berth::testing::MakeGroup;
using ::berth::testing::MakeNode;
using ::testing::HasSubstr;

class PlacementExplainerTest : public ::testing::Test {
 protected:
  NodeIndex Add(NodeSpec spec) { return table_.AddNode(std::move(spec)).value(); }
  // Explains the group's bundles in index order, with nothing excluded.
  PlacementDecision Explain(const PlacementGroupSpec& spec) {
    NodeSearch search(table_, spec, nullptr, nullptr);
    PlacementDecision d = PlacementExplainer(table_, search).Explain(Order(spec), {}, {});
    rejected_ = search.rejected();
    return d;
  }
  static std::vector<uint32_t> Order(const PlacementGroupSpec& spec) {
    std::vector<uint32_t> order;
    for (uint32_t b = 0; b < spec.bundles().size(); ++b) order.push_back(b);
    return order;
  }

  NodeResourceTable table_;
  std::vector<uint64_t> rejected_;
};

TEST_F(PlacementExplainerTest, ABundleNoNodeCouldHoldIsInfeasibleAndNamesTheLargest) {
  Add(MakeNode("a", 32, 4));
  Add(MakeNode("b", 32, 8));
  PlacementDecision d =
      Explain(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 16}}))}, PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(d.reason.why, PlacementWhy::kShortfall);
  EXPECT_FALSE(d.reason.waiting);
  EXPECT_EQ(d.reason.demand.bundles, std::vector<uint32_t>{0});
  EXPECT_EQ(d.reason.gap, PlacementReason::Gap::kTooLittle);
  EXPECT_EQ(d.reason.amount.resource, kGpu);
  EXPECT_EQ(d.reason.amount.need, Quantity::Whole(16));
  EXPECT_EQ(d.reason.amount.have, Quantity::Whole(8));
  EXPECT_EQ(PlacementReasonText(d.reason), "bundle 0 needs GPU: 16; the largest node has GPU: 8");
}

TEST_F(PlacementExplainerTest, ItsChecksCountInTheDecisionsRejections) {
  Add(MakeNode("b", 32, 8, "", {{"zone", "b"}}));
  PlacementDecision d = Explain(
      MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}}), "zone=a")}, PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  EXPECT_EQ(d.reason.gap, PlacementReason::Gap::kNoMatchingNode);
  ASSERT_EQ(d.reason.demand.selectors.size(), 1u);
  EXPECT_EQ(d.reason.demand.selectors[0].ToString(), "zone in (a)");
  EXPECT_THAT(PlacementReasonText(d.reason), HasSubstr("no ALIVE node with GPUs matches"));
  ASSERT_EQ(NodeFilters()[0]->name(), "label_selector");
  EXPECT_EQ(rejected_[0], 1u);
}

TEST_F(PlacementExplainerTest, ABundleThatFitsTotalsWaitsWithTheFreeGap) {
  const NodeIndex n = Add(MakeNode("a", 32, 4));
  table_.Allocate(n, ResourceSet::Of({{kGpu, 3}})).value();
  PlacementDecision d =
      Explain(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 2}}))}, PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kRetryLater);
  EXPECT_TRUE(d.reason.waiting);
  EXPECT_EQ(d.reason.amount.have, Quantity::Whole(1));
  EXPECT_EQ(PlacementReasonText(d.reason),
            "waiting for resources: bundle 0 needs GPU: 2; the most free node has GPU: 1 free");
}

TEST_F(PlacementExplainerTest, AResourceTheNodesDoNotIndexIsNamedToo) {
  NodeSpec spec = MakeNode("a", 32, 0);
  spec.resources.Set("ssd", Quantity::Whole(1));
  Add(spec);
  PlacementDecision d =
      Explain(MakeGroup({MakeBundle(ResourceSet::Of({{"ssd", 2}}))}, PlacementStrategy::kPack));
  EXPECT_EQ(d.outcome, PlacementOutcome::kInfeasible);
  EXPECT_THAT(PlacementReasonText(d.reason), HasSubstr("the largest node has ssd: 1"));
}

TEST_F(PlacementExplainerTest, ARequiredTopologyNamesTheFreestDomain) {
  const NodeIndex a = Add(MakeNode("a", 32, 8, "", {{"rack", "r0"}}));
  const NodeIndex b = Add(MakeNode("b", 32, 8, "", {{"rack", "r1"}}));
  table_.Allocate(a, ResourceSet::Of({{kGpu, 8}})).value();
  table_.Allocate(b, ResourceSet::Of({{kGpu, 4}})).value();
  const PlacementGroupSpec spec =
      PlacementGroupSpec::Create(std::vector<Bundle>(2, MakeBundle(ResourceSet::Of({{kGpu, 3}}))),
                                 PlacementStrategy::kSpread, Topology{"rack", {}})
          .value();
  NodeSearch search(table_, spec, nullptr, nullptr);
  PlacementDecision d = PlacementExplainer(table_, search).ExplainTopology({0, 1}, {});
  EXPECT_EQ(d.outcome, PlacementOutcome::kRetryLater);
  EXPECT_EQ(d.reason.why, PlacementWhy::kNoDomain);
  EXPECT_EQ(d.reason.domain.value, "r1");
  ASSERT_TRUE(d.reason.domain.lacks.has_value());
  EXPECT_EQ(d.reason.domain.lacks->need, Quantity::Whole(6));
  EXPECT_EQ(PlacementReasonText(d.reason),
            "waiting for resources: topology.required rack: no domain has room for the group's 2 "
            "bundles now (GPU: 6 needed; rack=r1 has GPU: 4 free)");
}

}  // namespace
}  // namespace berth
