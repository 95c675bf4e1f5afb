#include "queueing/placer_capacity.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using testing::MakeBundle;
using testing::MakeGroup;
using testing::MakeNode;
using testing::Repeat;

PlacementGroupSpec Gang(int gpus) {
  return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), gpus),
                   PlacementStrategy::kStrictPack);
}

class PlacerCapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(table_.AddNode(MakeNode("a10g-0", 16, 8, "A10G")).ok());
    ASSERT_TRUE(table_.AddNode(MakeNode("h100-0", 16, 8, "H100")).ok());
  }
  NodeResourceTable table_;
  PlacerCapacity capacity_{&table_, nullptr};
};

TEST_F(PlacerCapacityTest, AChargeCountsTheGpusOfEachAcceleratorType) {
  capacity_.Add("g", Gang(8));
  std::string why;
  std::optional<ResourceSet> charge = capacity_.Place("g", &why);
  ASSERT_TRUE(charge.has_value()) << why;
  EXPECT_EQ(charge->Get(kGpu), Quantity::Whole(8));
  EXPECT_EQ(charge->Get("GPU:A10G").units() + charge->Get("GPU:H100").units(),
            Quantity::Whole(8).units());  // STRICT_PACK: all on one of them
  EXPECT_EQ(capacity_.Held("g").size(), 8u);
  const ResourceSet totals = capacity_.Capacity();
  EXPECT_EQ(totals.Get(kGpu), Quantity::Whole(16));
  EXPECT_EQ(totals.Get("GPU:H100"), Quantity::Whole(8));
}

TEST_F(PlacerCapacityTest, FitsWithoutLeavesTheTableExactlyAsItWas) {
  capacity_.Add("a", Gang(8));
  capacity_.Add("b", Gang(8));
  capacity_.Add("c", Gang(8));
  std::string why;
  ASSERT_TRUE(capacity_.Place("a", &why));
  ASSERT_TRUE(capacity_.Place("b", &why));
  EXPECT_FALSE(capacity_.Place("c", &why).has_value());
  EXPECT_THAT(why, ::testing::Not(::testing::IsEmpty()));
  const NodeResourceTable::Node before0 = table_.node(0), before1 = table_.node(1);
  EXPECT_TRUE(capacity_.FitsWithout("c", {"a"}));
  EXPECT_FALSE(capacity_.FitsWithout("c", {}));
  for (NodeIndex i : {0, 1}) {
    const NodeResourceTable::Node& before = i == 0 ? before0 : before1;
    EXPECT_EQ(table_.node(i).available, before.available);
    for (uint32_t gpu = 0; gpu < before.gpus.count(); ++gpu)  // the same instances
      EXPECT_EQ(table_.node(i).gpus.free(gpu), before.gpus.free(gpu));
  }
  capacity_.Release("a");
  EXPECT_TRUE(capacity_.Place("c", &why).has_value()) << why;
  capacity_.Remove("b");
  capacity_.Remove("c");
  EXPECT_EQ(table_.node(0).available, table_.node(0).total);
  EXPECT_EQ(table_.node(1).available, table_.node(1).total);
}

}  // namespace
}  // namespace berth
