#include "placement/gpu_instances.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

Quantity Q(double v) { return Quantity::FromDouble(v, "q").value(); }

TEST(GpuInstancesTest, WholeRequestsTakeLowestFreeInstances) {
  GpuInstances gpus(4);
  auto a = gpus.Allocate(Q(2));
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].index, 0u);
  EXPECT_EQ((*a)[1].index, 1u);
  auto b = gpus.Allocate(Q(1));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].index, 2u);
  EXPECT_FALSE(gpus.CanAllocate(Q(2)));
  EXPECT_TRUE(gpus.CanAllocate(Q(1)));
}

TEST(GpuInstancesTest, FractionsBestFitOntoOneInstance) {
  GpuInstances gpus(3);
  auto a = gpus.Allocate(Q(0.5));   // -> 0 (all equal: lowest index)
  auto b = gpus.Allocate(Q(0.75));  // -> 1 (0 has only 0.5)
  auto c = gpus.Allocate(Q(0.25));  // best fit: instance 1 (0.25 left) over 0 (0.5 left)
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)[0].index, 0u);
  EXPECT_EQ((*b)[0].index, 1u);
  EXPECT_EQ((*c)[0].index, 1u);
  EXPECT_EQ(gpus.free(1), Q(0));
  // A whole GPU needs a fully free instance: only 2 is.
  auto d = gpus.Allocate(Q(1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].index, 2u);
  EXPECT_FALSE(gpus.CanAllocate(Q(1)));
  EXPECT_TRUE(gpus.CanAllocate(Q(0.5)));
  EXPECT_FALSE(gpus.CanAllocate(Q(0.6)));  // 0.5 free on instance 0 only: fragments do not add
  EXPECT_EQ(gpus.LargestRequest(), Q(0.5));
}

TEST(GpuInstancesTest, ReleaseIsExactInverse) {
  GpuInstances gpus(2);
  auto a = gpus.Allocate(Q(0.3333));
  auto b = gpus.Allocate(Q(1));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(gpus.Release(*b).ok());
  ASSERT_TRUE(gpus.Release(*a).ok());
  EXPECT_EQ(gpus.TotalFree(), Q(2));
  EXPECT_EQ(gpus.free(0), Q(1));
}

TEST(GpuInstancesTest, DoubleReleaseFailsWithoutChange) {
  GpuInstances gpus(2);
  auto a = gpus.Allocate(Q(0.5)).value();
  ASSERT_TRUE(gpus.Release(a).ok());
  EXPECT_FALSE(gpus.Release(a).ok());
  EXPECT_EQ(gpus.TotalFree(), Q(2));
  EXPECT_FALSE(gpus.Release({{7, Q(1)}}).ok());
}

TEST(GpuInstancesTest, TakeTakesExactlyTheGivenShares) {
  GpuInstances gpus(4);
  ASSERT_TRUE(gpus.Take({{3, Q(1)}, {1, Q(0.25)}}).ok());
  EXPECT_EQ(gpus.free(0), Q(1));
  EXPECT_EQ(gpus.free(1), Q(0.75));
  EXPECT_EQ(gpus.free(3), Q(0));
  // Allocate now best-fits a fraction onto the instance Take left partly used.
  auto a = gpus.Allocate(Q(0.5)).value();
  EXPECT_EQ(a[0].index, 1u);
}

TEST(GpuInstancesTest, TakeIsAllOrNothing) {
  GpuInstances gpus(2);
  ASSERT_TRUE(gpus.Take({{0, Q(0.5)}}).ok());
  // The second share does not fit: the first must not be taken either.
  absl::Status s = gpus.Take({{1, Q(1)}, {0, Q(0.75)}});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("GPU 0 has 0.5 free, needs 0.75"), std::string::npos) << s;
  EXPECT_EQ(gpus.free(1), Q(1));
  EXPECT_EQ(gpus.free(0), Q(0.5));
  // Shares within one call add up on the same instance.
  EXPECT_EQ(gpus.Take({{1, Q(0.5)}, {1, Q(0.75)}}).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(gpus.free(1), Q(1));
}

TEST(GpuInstancesTest, TakeRejectsMissingInstancesAndBadAmounts) {
  GpuInstances gpus(2);
  EXPECT_EQ(gpus.Take({{0, Q(1)}, {2, Q(1)}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpus.Take({{0, Q(0)}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpus.Take({{0, Q(2)}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpus.TotalFree(), Q(2));
}

TEST(GpuInstancesTest, ReleaseUndoesTake) {
  GpuInstances gpus(3);
  const std::vector<GpuShare> shares = {{2, Q(1)}, {0, Q(0.3333)}};
  ASSERT_TRUE(gpus.Take(shares).ok());
  ASSERT_TRUE(gpus.Release(shares).ok());
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(gpus.free(i), Q(1));
}

TEST(GpuInstancesTest, ValidateRejectsNonWholeAboveOne) {
  EXPECT_TRUE(ValidateGpuRequest(Q(0.5), "f").ok());
  EXPECT_TRUE(ValidateGpuRequest(Q(1), "f").ok());
  EXPECT_TRUE(ValidateGpuRequest(Q(4), "f").ok());
  absl::Status s = ValidateGpuRequest(Q(1.5), "bundles[0].resources[\"GPU\"]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bundles[0].resources[\"GPU\"]"), std::string::npos);
}

TEST(GpuInstancesTest, AWithheldInstanceOffersNoRoomAndKeepsWhatIsReleasedOfIt) {
  GpuInstances gpus(3);
  const std::vector<GpuShare> held = gpus.Allocate(Q(0.5)).value();  // on GPU 0
  ASSERT_EQ(held[0].index, 0u);
  ASSERT_TRUE(gpus.SetWithheld(0, true));
  EXPECT_FALSE(gpus.SetWithheld(3, true));
  EXPECT_TRUE(gpus.withheld(0));
  EXPECT_EQ(gpus.free(0), Q(0));
  EXPECT_EQ(gpus.TotalFree(), Q(2));
  EXPECT_EQ(gpus.LargestRequest(), Q(2));
  EXPECT_FALSE(gpus.CanAllocate(Q(3)));
  // A fraction goes to a healthy GPU, though GPU 0 has the least room.
  EXPECT_EQ(gpus.Allocate(Q(0.25)).value()[0].index, 1u);
  EXPECT_EQ(gpus.OfferedOf(held), Q(0));
  ASSERT_TRUE(gpus.Release(held).ok());
  EXPECT_EQ(gpus.free(0), Q(0));  // kept back
  ASSERT_TRUE(gpus.SetWithheld(0, false));
  EXPECT_EQ(gpus.free(0), Q(1));  // whole again
  EXPECT_EQ(gpus.TotalFree(), Q(2.75));
}

TEST(GpuInstancesTest, FitsCapacity) {
  EXPECT_TRUE(GpuInstances::FitsCapacity(Q(0.5), 1));
  EXPECT_FALSE(GpuInstances::FitsCapacity(Q(0.5), 0));
  EXPECT_TRUE(GpuInstances::FitsCapacity(Q(8), 8));
  EXPECT_FALSE(GpuInstances::FitsCapacity(Q(8), 4));
}

}  // namespace
}  // namespace berth
