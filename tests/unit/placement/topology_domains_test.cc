#include "placement/topology_domains.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeNode;

constexpr char kRack[] = "rack";

class DomainCandidatesTest : public ::testing::Test {
 protected:
  NodeIndex Add(const std::string& id, double gpus, Labels labels) {
    return table_.AddNode(MakeNode(id, 32, gpus, "", std::move(labels))).value();
  }
  // The domains' values in the order PopBest hands them out.
  std::vector<std::string> Order(const ResourceSet& need,
                                 const std::vector<BundlePlacement>& placed = {}) {
    DomainCandidates candidates(table_, table_.Domains(kRack), kRack, need, placed);
    std::vector<std::string> values;
    while (!candidates.empty()) values.push_back(candidates.PopBest().value);
    return values;
  }
  BundlePlacement Hold(NodeIndex node, const ResourceSet& resources) {
    return {0, table_.Allocate(node, resources).value()};
  }

  NodeResourceTable table_;
};

TEST_F(DomainCandidatesTest, TightestDomainFirstThenTheOrderFirstSeen) {
  Add("big", 8, {{kRack, "r0"}});
  Add("a", 4, {{kRack, "r1"}});
  Add("b", 4, {{kRack, "r2"}});
  Add("small", 2, {{kRack, "r3"}});
  Add("unlabelled", 8, {});
  // r3 cannot cover 3 GPUs; r1 and r2 leave 1 over each, r0 leaves 5.
  EXPECT_EQ(Order(ResourceSet::Of({{kGpu, 3}})), (std::vector<std::string>{"r1", "r2", "r0"}));
}

TEST_F(DomainCandidatesTest, FreeCapacityDecidesWhatIsACandidate) {
  const NodeIndex a = Add("a", 4, {{kRack, "r0"}});
  Add("b", 2, {{kRack, "r0"}});
  Add("c", 4, {{kRack, "r1"}});
  Hold(a, ResourceSet::Of({{kGpu, 4}}));
  EXPECT_EQ(Order(ResourceSet::Of({{kGpu, 4}})), std::vector<std::string>{"r1"});
  EXPECT_EQ(Order(ResourceSet::Of({{kGpu, 2}})), (std::vector<std::string>{"r0", "r1"}));
}

TEST_F(DomainCandidatesTest, PlacedBundlesKeepTheirDomainWhateverItHasFree) {
  const NodeIndex a = Add("a", 2, {{kRack, "r0"}});
  const NodeIndex b = Add("b", 8, {{kRack, "r1"}});
  const NodeIndex c = Add("c", 8, {});
  const ResourceSet two = ResourceSet::Of({{kGpu, 2}});
  const BundlePlacement on_a = Hold(a, two);
  EXPECT_EQ(Order(two, {on_a}), std::vector<std::string>{"r0"});
  // Placed bundles in two domains, or on a node without the key: none.
  EXPECT_TRUE(Order(two, {on_a, Hold(b, two)}).empty());
  EXPECT_TRUE(Order(two, {Hold(c, two)}).empty());
}

TEST(DomainCoversTest, EveryIndexedResourceMustBeCovered) {
  std::array<int64_t, kNumIndexedResources> amounts{};
  const ResourceSet need = ResourceSet::Of({{kGpu, 1}, {kCpu, 2}});
  amounts[static_cast<int>(IndexedResource::kGpu)] =
      NodeResourceTable::IndexKey(ResourceSet::Of({{kGpu, 1}}), IndexedResource::kGpu);
  EXPECT_FALSE(DomainCovers(amounts, need));
  amounts[static_cast<int>(IndexedResource::kCpu)] =
      NodeResourceTable::IndexKey(ResourceSet::Of({{kCpu, 2}}), IndexedResource::kCpu);
  EXPECT_TRUE(DomainCovers(amounts, need));
  // Resources the domains do not index do not count.
  EXPECT_TRUE(DomainCovers(amounts, ResourceSet::Of({{kGpu, 1}, {"ssd", 4}})));
}

}  // namespace
}  // namespace berth
