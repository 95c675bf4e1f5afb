#include "placement/quantity.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(QuantityTest, FromDoubleRoundsToTenThousandths) {
  EXPECT_EQ(Quantity::FromDouble(0.5, "x")->units(), 5000);
  EXPECT_EQ(Quantity::FromDouble(0.001, "x")->units(), 10);
  EXPECT_EQ(Quantity::FromDouble(0.00004, "x")->units(), 0);
  EXPECT_EQ(Quantity::FromDouble(0.00005, "x")->units(), 1);
  EXPECT_EQ(Quantity::FromDouble(3, "x")->units(), 30000);
}

TEST(QuantityTest, FromDoubleRejectsNanInfNegativeAndHuge) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -0.5, 1e30}) {
    absl::StatusOr<Quantity> q = Quantity::FromDouble(bad, "bundles[0].resources[\"GPU\"]");
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(q.status().message().find("bundles[0].resources[\"GPU\"]"), std::string::npos);
  }
}

TEST(QuantityTest, ParseDecimalAndSuffixes) {
  EXPECT_EQ(Quantity::Parse("0.5", "x")->units(), 5000);
  EXPECT_EQ(Quantity::Parse("8", "x")->units(), 80000);
  EXPECT_EQ(*Quantity::Parse("200Gi", "x"), Quantity::Whole(200LL << 30));
  EXPECT_EQ(*Quantity::Parse("1.5G", "x"), Quantity::Whole(1500000000));
  EXPECT_EQ(*Quantity::Parse("512Mi", "x"), Quantity::Whole(512LL << 20));
  EXPECT_EQ(*Quantity::Parse(".25", "x"), Quantity::FromUnits(2500));
  EXPECT_EQ(*Quantity::Parse("0.00015", "x"), Quantity::FromUnits(2));  // rounds half up
}

TEST(QuantityTest, ParseRejectsGarbageNamingTheField) {
  for (const char* bad : {"", "-1", "abc", "1.2.3", "1e5", "12Qi", "99999999999999999999"}) {
    absl::StatusOr<Quantity> q = Quantity::Parse(bad, "memory");
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("memory"), std::string::npos) << q.status();
  }
}

TEST(QuantityTest, ToStringIsShortestExact) {
  EXPECT_EQ(Quantity::FromUnits(5000).ToString(), "0.5");
  EXPECT_EQ(Quantity::Whole(8).ToString(), "8");
  EXPECT_EQ(Quantity::FromUnits(10).ToString(), "0.001");
  EXPECT_EQ(Quantity::FromUnits(12345).ToString(), "1.2345");
}

TEST(QuantityTest, CheckedArithmetic) {
  EXPECT_EQ(*CheckedAdd(Quantity::Whole(1), Quantity::FromUnits(5000), "x"),
            Quantity::FromUnits(15000));
  EXPECT_FALSE(CheckedAdd(Quantity::FromUnits(INT64_MAX), Quantity::FromUnits(1), "x").ok());
  absl::StatusOr<Quantity> neg = CheckedSub(Quantity::Whole(1), Quantity::Whole(2), "GPU");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("GPU"), std::string::npos);
}

}  // namespace
}  // namespace berth
