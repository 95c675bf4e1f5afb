#include "placement/node_search.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "placement/node_filters.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeBundle;
using ::berth::testing::MakeGroup;
using ::berth::testing::MakeNode;
using Capacity = NodeSearch::Capacity;
using Preference = NodeSearch::Preference;

const ResourceSet kOneGpu = ResourceSet::Of({{kGpu, 1}});

// How many nodes the filter named `name` ruled out.
uint64_t RejectedBy(const NodeSearch& search, absl::string_view name) {
  for (size_t f = 0; f < NodeFilters().size(); ++f) {
    if (NodeFilters()[f]->name() == name) return search.rejected()[f];
  }
  return 0;
}

TEST(PrimaryResourceTest, GpuThenCpuThenMemory) {
  EXPECT_EQ(PrimaryResource(ResourceSet::Of({{kGpu, 1}, {kCpu, 4}})), IndexedResource::kGpu);
  EXPECT_EQ(PrimaryResource(ResourceSet::Of({{kCpu, 4}, {kMemory, 1e9}})), IndexedResource::kCpu);
  EXPECT_EQ(PrimaryResource(ResourceSet::Of({{kMemory, 1e9}})), IndexedResource::kMemory);
  EXPECT_EQ(PrimaryResource(ResourceSet::Of({{"ssd", 1}})), IndexedResource::kCpu);
}

class NodeSearchTest : public ::testing::Test {
 protected:
  NodeIndex Add(const std::string& id, double cpus, double gpus, Labels labels = {}) {
    return table_.AddNode(MakeNode(id, cpus, gpus, "", std::move(labels))).value();
  }

  NodeResourceTable table_;
};

TEST_F(NodeSearchTest, BestFitTakesTheTightestNodeAndMostFreeTheRoomiest) {
  Add("eight", 32, 8);
  const NodeIndex two = Add("two", 32, 2);
  const NodeIndex four = Add("four", 32, 4);
  const PlacementGroupSpec spec = MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack);
  NodeSearch search(table_, spec, nullptr, nullptr);
  const NodeSearch::Demand one = search.MakeDemand({0});
  EXPECT_EQ(search.FindNode(one, Preference::kBestFit, Capacity::kFree, {}), two);
  EXPECT_EQ(search.FindNode(one, Preference::kMostFree, Capacity::kFree, {}), 0u);
  const absl::flat_hash_set<NodeIndex> not_two = {two};
  EXPECT_EQ(search.FindNode(one, Preference::kBestFit, Capacity::kFree, {&not_two, {}}), four);
}

TEST_F(NodeSearchTest, CountsWhatEachFilterRulesOut) {
  Add("zone-a", 32, 8, {{"zone", "a"}});
  Add("zone-b", 32, 8, {{"zone", "b"}});
  const PlacementGroupSpec spec =
      MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 16}}), "zone=a")}, PlacementStrategy::kPack);
  NodeSearch search(table_, spec, nullptr, nullptr);
  const NodeSearch::Demand d = search.MakeDemand({0});
  EXPECT_FALSE(search.Fits(0, d, Capacity::kTotal));
  EXPECT_FALSE(search.Fits(1, d, Capacity::kTotal));
  EXPECT_EQ(RejectedBy(search, "resources"), 1u);
  EXPECT_EQ(RejectedBy(search, "label_selector"), 1u);
}

TEST_F(NodeSearchTest, AvoidedNodesGiveNothingFreeButStillCountInTotals) {
  const NodeIndex only = Add("only", 32, 8);
  const PlacementGroupSpec spec = MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack);
  const absl::flat_hash_set<NodeIndex> avoid = {only};
  NodeSearch search(table_, spec, nullptr, &avoid);
  const NodeSearch::Demand one = search.MakeDemand({0});
  EXPECT_FALSE(search.Fits(only, one, Capacity::kFree));
  EXPECT_TRUE(search.Fits(only, one, Capacity::kTotal));
}

TEST_F(NodeSearchTest, WithinSearchesOnlyTheDomainsNodes) {
  Add("r0", 32, 2, {{"rack", "r0"}});
  const NodeIndex r1 = Add("r1", 32, 8, {{"rack", "r1"}});
  const PlacementGroupSpec spec = MakeGroup({MakeBundle(kOneGpu)}, PlacementStrategy::kPack);
  NodeSearch search(table_, spec, nullptr, nullptr);
  const NodeSearch::Demand one = search.MakeDemand({0});
  const NodeResourceTable::DomainIndex& racks = table_.Domains("rack");
  search.Within(&racks.domains[racks.by_value.at("r1")].nodes);
  EXPECT_EQ(search.FindNode(one, Preference::kBestFit, Capacity::kFree, {}), r1);
  search.Within(nullptr);
  EXPECT_EQ(search.FindNode(one, Preference::kBestFit, Capacity::kFree, {}), 0u);
}

TEST_F(NodeSearchTest, ADemandWithoutGpusTriesNodesWithoutGpusFirst) {
  Add("gpu", 32, 8);
  Add("cpu", 32, 0);
  const PlacementGroupSpec spec = MakeGroup(
      {MakeBundle(ResourceSet::Of({{kCpu, 1}})), MakeBundle(kOneGpu)}, PlacementStrategy::kPack);
  NodeSearch search(table_, spec, nullptr, nullptr);
  const auto cpu_tiers = search.CandidatePools(search.MakeDemand({0}));
  ASSERT_EQ(cpu_tiers.size(), 2u);
  ASSERT_EQ(cpu_tiers[0].size(), 1u);
  EXPECT_FALSE(cpu_tiers[0][0]->has_gpus);
  ASSERT_EQ(cpu_tiers[1].size(), 1u);
  EXPECT_TRUE(cpu_tiers[1][0]->has_gpus);
  // A demand with GPUs tries only pools with GPUs.
  const auto gpu_tiers = search.CandidatePools(search.MakeDemand({1}));
  ASSERT_EQ(gpu_tiers[0].size(), 1u);
  EXPECT_TRUE(gpu_tiers[0][0]->has_gpus);
  EXPECT_TRUE(gpu_tiers[1].empty());
  EXPECT_EQ(search.MakeDemand({0, 1}).sum, ResourceSet::Of({{kCpu, 1}, {kGpu, 1}}));
}

}  // namespace
}  // namespace berth
