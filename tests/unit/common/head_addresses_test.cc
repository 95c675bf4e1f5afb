#include "common/head_addresses.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HeadAddressesTest, AListIsSplitInOrderWithoutBlanks) {
  EXPECT_THAT(SplitHeadAddresses("a:1, b:2,,"), ElementsAre("a:1", "b:2"));
  EXPECT_THAT(SplitHeadAddresses("a:1"), ElementsAre("a:1"));
  EXPECT_THAT(SplitHeadAddresses(""), ElementsAre());
}

TEST(HeadAddressesTest, OneHeadIsItsOwnTargetAndSeveralBecomeOneResolvedTarget) {
  EXPECT_EQ(HeadsTarget("head-1:6380", "--address").value(), "head-1:6380");
  EXPECT_EQ(HeadsTarget("127.0.0.1:6380,localhost:6381", "--address").value(),
            "ipv4:127.0.0.1:6380,127.0.0.1:6381");
  EXPECT_EQ(HeadsTarget("[::1]:6380,[::1]:6381", "--address").value(),
            "ipv6:[::1]:6380,[::1]:6381");
}

TEST(HeadAddressesTest, BadAddressesNameTheField) {
  absl::StatusOr<std::string> no_port = HeadsTarget("127.0.0.1:6380,127.0.0.1", "--address");
  EXPECT_EQ(no_port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_port.status().message(), HasSubstr("--address: '127.0.0.1' is not HOST:PORT"));
  absl::StatusOr<std::string> unknown = HeadsTarget("127.0.0.1:1,no-such-host.invalid:2", "--head");
  EXPECT_THAT(unknown.status().message(), HasSubstr("--head: cannot resolve 'no-such-host.invalid'"));
  EXPECT_FALSE(HeadsTarget(" , ", "--head").ok());
}

}  // namespace
}  // namespace berth
