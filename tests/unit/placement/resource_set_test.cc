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

// Names that come (between, before and after the others) and names that
// reach zero and go, against the amounts name by name.
TEST(ResourceSetTest, AddAndSubtractKeepNamesSortedWithoutZeros) {
  ResourceSet a = ResourceSet::Of({{"b", 2}, {"d", 4}});
  ASSERT_TRUE(a.Add(ResourceSet::Of({{"a", 1}, {"c", 3}, {"d", 1}, {"e", 5}})).ok());
  EXPECT_EQ(a, ResourceSet::Of({{"a", 1}, {"b", 2}, {"c", 3}, {"d", 5}, {"e", 5}}));
  ASSERT_TRUE(a.Subtract(ResourceSet::Of({{"a", 1}, {"d", 5}, {"e", 4}})).ok());
  EXPECT_EQ(a, ResourceSet::Of({{"b", 2}, {"c", 3}, {"e", 1}}));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a.entries()[0].first, "b");
  EXPECT_EQ(a.entries()[2].first, "e");
  // Only amounts change: updated in place.
  ASSERT_TRUE(a.Add(ResourceSet::Of({{"b", 1}, {"e", 1}})).ok());
  EXPECT_EQ(a, ResourceSet::Of({{"b", 3}, {"c", 3}, {"e", 2}}));
  // A name it lacks cannot be subtracted, and nothing changes.
  const ResourceSet before = a;
  EXPECT_FALSE(a.Subtract(ResourceSet::Of({{"b", 1}, {"z", 1}})).ok());
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

TEST(ResourceListTest, ParsesAmountsInOrderWithZerosKept) {
  absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> list =
      ParseResourceList(" GPU=1, memory=16Gi ,ssd=0,CPU=0.5", "--bundle");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0].first, "GPU");
  EXPECT_EQ((*list)[0].second, Quantity::Whole(1));
  EXPECT_EQ((*list)[1].first, "memory");
  EXPECT_EQ((*list)[1].second, Quantity::Whole(int64_t{16} << 30));
  EXPECT_EQ((*list)[2].first, "ssd");
  EXPECT_TRUE((*list)[2].second.IsZero());
  EXPECT_EQ((*list)[3].second, *Quantity::Parse("0.5", "CPU"));
  EXPECT_TRUE(ParseResourceList("  ", "--resources")->empty());
}

TEST(ResourceListTest, ErrorsNameTheFieldAndTheItem) {
  auto error = [](absl::string_view text) {
    return std::string(
        ParseResourceList(text, "--bundle[2]", "want e.g. \"GPU=1\"").status().message());
  };
  EXPECT_EQ(error("GPU"), "--bundle[2]: 'GPU' is not NAME=QUANTITY; want e.g. \"GPU=1\"");
  EXPECT_EQ(error("GPU=1,"), "--bundle[2]: '' is not NAME=QUANTITY; want e.g. \"GPU=1\"");
  EXPECT_EQ(error("GPU=1,GPU=2"), "--bundle[2]: GPU given twice");
  EXPECT_EQ(error("=1").substr(0, 12), "--bundle[2]:");
  EXPECT_NE(error("GPU=lots").find("--bundle[2][\"GPU\"]"), std::string::npos) << error("GPU=lots");
  EXPECT_NE(error("G@U=1").find("resource names may use only"), std::string::npos);
}

}  // namespace
}  // namespace berth
