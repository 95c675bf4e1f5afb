#include "common/backoff.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(BackoffTest, GrowsByTheMultiplierUpToTheMax) {
  Backoff backoff({absl::Milliseconds(100), 1.5, absl::Milliseconds(300)});
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(150));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(225));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(300));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(300));
}

TEST(BackoffTest, ResetStartsAgainFromTheInitialWait) {
  Backoff backoff({absl::Milliseconds(100), 2});
  backoff.Next();
  backoff.Next();
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
}

TEST(BackoffTest, WithoutAMaxItKeepsGrowing) {
  Backoff backoff({absl::Seconds(1), 2});
  for (int i = 0; i < 10; ++i) backoff.Next();
  EXPECT_EQ(backoff.Next(), absl::Seconds(1024));
}

TEST(BackoffTest, NoInitialWaitNeverWaits) {
  Backoff backoff({absl::ZeroDuration(), 2});
  EXPECT_EQ(backoff.Next(), absl::ZeroDuration());
  EXPECT_EQ(backoff.Next(), absl::ZeroDuration());
}

}  // namespace
}  // namespace berth
