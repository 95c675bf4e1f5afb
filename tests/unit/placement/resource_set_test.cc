#include "placement/resource_set.h"

#include <cmath>

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(ResourceSetTest, CanonicalAndOrdered) {
  ResourceSet a = ResourceSet::Of({{"GPU", 1}, {"CPU", 2}, {"zero", 0}});
  ResourceSet b = ResourceSet::Of({{"CPU", 2}, {"GPU", 1}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.entries()[0].first, "CPU");
  EXPECT_EQ(a.ToString(), "{CPU: 2, GPU: 1}");
}

TEST(ResourceSetTest, AddSubtractAreExactInverses) {
  ResourceSet node = ResourceSet::Of({{"CPU", 8}, {"GPU", 4}, {"memory", 1e9}});
  const ResourceSet before = node;
  ResourceSet request = ResourceSet::Of({{"CPU", 0.3333}, {"GPU", 0.25}, {"memory", 12345}});
  ASSERT_TRUE(node.Subtract(request).ok());
  ASSERT_TRUE(node.Add(request).ok());
  EXPECT_EQ(node, before);
}

TEST(ResourceSetTest, SubtractBelowZeroFailsAndChangesNothing) {
  ResourceSet node = ResourceSet::Of({{"CPU", 1}, {"GPU", 1}});
  const ResourceSet before = node;
  absl::Status s = node.Subtract(ResourceSet::Of({{"CPU", 0.5}, {"GPU", 2}}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("GPU"), std::string::npos);
  EXPECT_EQ(node, before);
}

TEST(ResourceSetTest, AddOverflowFailsAndChangesNothing) {
  ResourceSet a;
  a.Set("x", Quantity::FromUnits(INT64_MAX - 1));
  const ResourceSet before = a;
  EXPECT_FALSE(a.Add(ResourceSet::Of({{"x", 1}})).ok());
  EXPECT_EQ(a, before);
}

TEST(ResourceSetTest, Contains) {
  ResourceSet have = ResourceSet::Of({{"CPU", 4}, {"GPU", 1}, {"custom", 2}});
  EXPECT_TRUE(have.Contains(ResourceSet::Of({{"CPU", 4}, {"custom", 1}})));
  EXPECT_FALSE(have.Contains(ResourceSet::Of({{"CPU", 4.0001}})));
  EXPECT_FALSE(have.Contains(ResourceSet::Of({{"other", 1}})));
  EXPECT_TRUE(have.Contains(ResourceSet()));
  EXPECT_EQ(have.FirstShortfall(ResourceSet::Of({{"CPU", 1}, {"GPU", 2}})), "GPU");
}

TEST(ResourceSetTest, FromDoublesValidatesNamesAndAmounts) {
  auto nan = ResourceSet::FromDoubles({{"GPU", std::nan("")}}, "bundles[3].resources");
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("bundles[3].resources[\"GPU\"]"), std::string::npos);
  auto neg = ResourceSet::FromDoubles({{"CPU", -1}}, "r");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("negative"), std::string::npos);
  EXPECT_FALSE(ResourceSet::FromDoubles({{"", 1}}, "r").ok());
  EXPECT_FALSE(ResourceSet::FromDoubles({{"bad name", 1}}, "r").ok());
  EXPECT_TRUE(ResourceSet::FromDoubles({{"accelerator_type:A10G", 0.001}}, "r").ok());
}

TEST(ResourceSetTest, MemoryShownInBinaryUnits) {
  ResourceSet m = ResourceSet::Of({{"memory", 200.0 * (1 << 30)}});
  EXPECT_EQ(m.ToString(), "{memory: 200Gi}");
}

}  // namespace
}  // namespace berth
