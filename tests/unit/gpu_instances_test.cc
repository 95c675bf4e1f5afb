#include "scheduler/gpu_instances.h"

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
  auto a = gpus.Allocate(Q(0.5));  // -> 0 (all equal: lowest index)
  auto b = gpus.Allocate(Q(0.75)); // -> 1 (0 has only 0.5)
  auto c = gpus.Allocate(Q(0.25)); // best fit: instance 1 (0.25 left) over 0 (0.5 left)
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

TEST(GpuInstancesTest, ValidateRejectsNonWholeAboveOne) {
  EXPECT_TRUE(ValidateGpuRequest(Q(0.5), "f").ok());
  EXPECT_TRUE(ValidateGpuRequest(Q(1), "f").ok());
  EXPECT_TRUE(ValidateGpuRequest(Q(4), "f").ok());
  absl::Status s = ValidateGpuRequest(Q(1.5), "bundles[0].resources[\"GPU\"]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bundles[0].resources[\"GPU\"]"), std::string::npos);
}

TEST(GpuInstancesTest, FitsCapacity) {
  EXPECT_TRUE(GpuInstances::FitsCapacity(Q(0.5), 1));
  EXPECT_FALSE(GpuInstances::FitsCapacity(Q(0.5), 0));
  EXPECT_TRUE(GpuInstances::FitsCapacity(Q(8), 8));
  EXPECT_FALSE(GpuInstances::FitsCapacity(Q(8), 4));
}

}  // namespace
}  // namespace berth
