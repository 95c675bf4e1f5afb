// The node filters one by one, and the placer counting what each rules out.
#include "placement/node_filters.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/bundle_placer.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeBundle;
using ::berth::testing::MakeGroup;
using ::berth::testing::MakeNode;
using ::berth::testing::Repeat;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(NodeFiltersTest, EachFilterJudgesItsOwnConcern) {
  NodeResourceTable table;
  const NodeIndex a100 = table.AddNode(MakeNode("a", 8, 2, "A100", {{"zone", "us-1"}})).value();
  const PlacementGroupSpec spec = MakeGroup(
      {MakeBundle(ResourceSet::Of({{kGpu, 0.6}}), "zone=us-2"),
       MakeBundle(ResourceSet::Of({{kGpu, 0.6}})), MakeBundle(ResourceSet::Of({{kGpu, 0.6}}))},
      PlacementStrategy::kPack);
  const std::vector<uint32_t> first = {0};
  const std::vector<uint32_t> rest = {1, 2};
  const ResourceSet share = ResourceSet::Of({{kGpu, 0.6}});
  const ResourceSet two_shares = ResourceSet::Of({{kGpu, 1.2}});
  EXPECT_FALSE(LabelSelectorFilter().Passes({table, spec, first, share}, a100));
  EXPECT_TRUE(LabelSelectorFilter().Passes({table, spec, rest, two_shares}, a100));
  EXPECT_TRUE(ResourcesFilter().Passes({table, spec, rest, two_shares}, a100));
  // 0.6 + 0.6 of two GPUs: one share on each instance fits.
  EXPECT_TRUE(GpuInstancesFilter().Passes({table, spec, rest, two_shares}, a100));
  const std::vector<uint32_t> three = {0, 1, 2};
  const ResourceSet three_shares = ResourceSet::Of({{kGpu, 1.8}});
  // 1.8 GPUs are free in sum, but three 0.6 shares need three instances.
  EXPECT_TRUE(ResourcesFilter().Passes({table, spec, three, three_shares}, a100));
  EXPECT_FALSE(GpuInstancesFilter().Passes({table, spec, three, three_shares}, a100));
  EXPECT_FALSE(ResourcesFilter().Passes({table, spec, three, ResourceSet::Of({{kGpu, 3}})}, a100));
  ASSERT_EQ(NodeFilters().size(), 3u);
  EXPECT_EQ(NodeFilters()[0]->name(), "label_selector");
}

TEST(NodeFiltersTest, ThePlacerCountsTheNodesEachFilterRuledOut) {
  NodeResourceTable table;
  for (int i = 0; i < 3; ++i) {
    table.AddNode(MakeNode(absl::StrCat("us1-", i), 8, 4, "", {{"zone", "us-1"}})).IgnoreError();
  }
  table.AddNode(MakeNode("us2", 8, 4, "", {{"zone", "us-2"}})).IgnoreError();
  BundlePlacer placer(&table);
  // Two GPUs and 16 CPUs in zone us-2: the us-1 nodes fail the selector,
  // us2 the resources (the GPU index already skips nodes with too few GPUs).
  const PlacementDecision d =
      placer
          .Place(MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 2}, {kCpu, 16}}), "zone=us-2")},
                           PlacementStrategy::kPack))
          .value();
  EXPECT_NE(d.outcome, PlacementOutcome::kPlaced);
  std::map<std::string, uint64_t> rejected;
  for (const auto& [name, count] : d.rejected_by) rejected[std::string(name)] = count;
  EXPECT_GE(rejected["label_selector"], 3u) << d.reason;
  EXPECT_GE(rejected["resources"], 1u) << d.reason;
  EXPECT_EQ(rejected.count("gpu_instances"), 0u);
  // A group that fits the first node it looks at rules nothing out.
  const PlacementDecision placed =
      placer
          .Place(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}})), 2),
                           PlacementStrategy::kPack))
          .value();
  EXPECT_EQ(placed.outcome, PlacementOutcome::kPlaced);
  EXPECT_THAT(placed.rejected_by, IsEmpty());
}

}  // namespace
}  // namespace berth
