#include "common/periodic_thread.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(PeriodicThreadTest, RunsUntilDestroyedAndNotAfter) {
  std::atomic<int> runs{0};
  {
    PeriodicThread thread(absl::Milliseconds(5), [&runs] { ++runs; });
    while (runs.load() < 3) absl::SleepFor(absl::Milliseconds(1));
  }
  const int at_end = runs.load();
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(runs.load(), at_end);
}

TEST(PeriodicThreadTest, RunsAtStartWhenAsked) {
  std::atomic<int> runs{0};
  {
    PeriodicThread thread(
        absl::Hours(1), [&runs] { ++runs; }, /*run_at_start=*/true);
    while (runs.load() < 1) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace berth
