#include "placement/placement_reason.h"

#include <gtest/gtest.h>

#include <memory>

namespace berth {
namespace {

PlacementReason Shortfall(bool waiting) {
  PlacementReason r;
  r.why = PlacementWhy::kShortfall;
  r.waiting = waiting;
  r.demand.bundles = {1};
  r.demand.sum = ResourceSet::Of({{kGpu, 2}, {"accelerator_type:A10G", 1}});
  r.gap = PlacementReason::Gap::kTooLittle;
  r.amount = {ResourceName(kGpu), Quantity::Whole(2), Quantity::Whole(1)};
  return r;
}

TEST(PlacementReasonTest, WaitingIsTheOneSourceOfItsPrefix) {
  EXPECT_EQ(PlacementReasonText(Shortfall(false)),
            "bundle 1 needs GPU: 2 with accelerator_type A10G; the largest A10G node has GPU: 1");
  EXPECT_EQ(PlacementReasonText(Shortfall(true)),
            "waiting for resources: bundle 1 needs GPU: 2 with accelerator_type A10G; the most "
            "free A10G node has GPU: 1 free");
}

TEST(PlacementReasonTest, ComparesByValue) {
  EXPECT_EQ(Shortfall(true), Shortfall(true));
  EXPECT_NE(Shortfall(true), Shortfall(false));
  PlacementReason other = Shortfall(true);
  other.amount.have = Quantity::Whole(0);
  EXPECT_NE(other, Shortfall(true));
  auto a = std::make_shared<const PlacementReason>(Shortfall(true));
  auto b = std::make_shared<const PlacementReason>(Shortfall(true));
  EXPECT_TRUE(SamePlacementReason(a, b));
  EXPECT_TRUE(SamePlacementReason(nullptr, nullptr));
  EXPECT_FALSE(SamePlacementReason(a, nullptr));
}

TEST(PlacementReasonTest, ALargerGangNamesTheOneThatDidNotFitWithoutRepeatingThePrefix) {
  PlacementReason larger;
  larger.why = PlacementWhy::kAsksAtLeast;
  larger.waiting = true;
  larger.gang = "pg-1";
  larger.like = std::make_shared<const PlacementReason>(Shortfall(true));
  EXPECT_EQ(PlacementReasonText(larger),
            "waiting for resources: it asks at least what pg-1 asks, bundle by bundle, which "
            "does not fit (bundle 1 needs GPU: 2 with accelerator_type A10G; the most free A10G "
            "node has GPU: 1 free)");
}

TEST(PlacementReasonTest, ADomainThatCanNeverTakeLostBundlesBackSaysWhatItLacks) {
  PlacementReason r;
  r.why = PlacementWhy::kDomainLost;
  r.count = 2;
  r.domain = {"rack", "r1",
              PlacementReason::Amount{ResourceName(kGpu), Quantity::Whole(4), Quantity::Whole(2)}};
  EXPECT_EQ(PlacementReasonText(r),
            "topology.required rack: the group's domain can no longer hold its 2 lost bundles "
            "beside the ones it holds (GPU: 4 needed; rack=r1 has GPU: 2 in all)");
  r.waiting = true;
  r.domain.lacks.reset();
  EXPECT_EQ(PlacementReasonText(r),
            "waiting for resources: topology.required rack: 2 lost bundles wait for room in the "
            "group's domain (enough in all, but not on nodes that each take their bundles)");
}

TEST(PlacementReasonTest, TheClusterFreeSumsNameTheResource) {
  PlacementReason r;
  r.why = PlacementWhy::kClusterFree;
  r.waiting = true;
  r.amount = {ResourceName(kMemory), Quantity::Whole(8), Quantity::Whole(3)};
  EXPECT_EQ(PlacementReasonText(r),
            "waiting for resources: the gang asks memory 8; the cluster has 3 free");
}

}  // namespace
}  // namespace berth
