// JobTimers: a job's time limit, progress watch, restart backoff and grace.
#include "train/job_timers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::Optional;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(JobTimersTest, TheTimeLimitRunsFromTheFirstPlacementUntilAPreemption) {
  v1::TrainJobSpec spec;
  spec.set_time_limit_s(10);
  JobTimers timers(spec);
  v1::TrainJobInfo info;
  EXPECT_EQ(JobTimers::LimitEnds(info), absl::InfiniteFuture());  // not placed yet
  timers.Placed(kT0, &info);
  EXPECT_EQ(JobTimers::LimitEnds(info), kT0 + absl::Seconds(10));
  // A restart after a failure is placed again: the limit keeps running.
  timers.Placed(kT0 + absl::Seconds(5), &info);
  EXPECT_EQ(JobTimers::LimitEnds(info), kT0 + absl::Seconds(10));
  EXPECT_EQ(timers.TimedOut(kT0 + absl::Seconds(9), info), std::nullopt);
  EXPECT_THAT(timers.TimedOut(kT0 + absl::Seconds(10), info),
              Optional(std::string("time limit 10s reached")));
  // A preemption starts it again at the next placement.
  JobTimers::Preempted(&info);
  EXPECT_EQ(timers.TimedOut(kT0 + absl::Seconds(60), info), std::nullopt);
  timers.Placed(kT0 + absl::Seconds(60), &info);
  EXPECT_EQ(JobTimers::LimitEnds(info), kT0 + absl::Seconds(70));
}

TEST(JobTimersTest, NoTimeLimitNeverEnds) {
  JobTimers timers{v1::TrainJobSpec()};
  v1::TrainJobInfo info;
  timers.Placed(kT0, &info);
  EXPECT_EQ(info.time_limit_ends_unix_ms(), 0);
  EXPECT_EQ(timers.TimedOut(kT0 + absl::Hours(1000), info), std::nullopt);
}

TEST(JobTimersTest, AnAttemptIsHungOnlyAfterItsFirstReport) {
  v1::TrainJobSpec spec;
  spec.mutable_failure_config()->set_progress_timeout_s(60);
  JobTimers timers(spec);
  timers.AttemptStarted(kT0);
  // Start-up (loading data, compiling) may take longer than the timeout.
  EXPECT_EQ(timers.Hung(kT0 + absl::Hours(2)), std::nullopt);
  EXPECT_EQ(timers.ProgressDue(), absl::InfiniteFuture());
  timers.Progressed(kT0 + absl::Hours(2));
  EXPECT_EQ(timers.Hung(kT0 + absl::Hours(2) + absl::Seconds(59)), std::nullopt);
  EXPECT_THAT(timers.Hung(kT0 + absl::Hours(2) + absl::Seconds(60)),
              Optional(std::string("no progress for 1m (failure_config.progress_timeout_s)")));
  // The next attempt waits for its own first report.
  timers.AttemptStarted(kT0 + absl::Hours(3));
  EXPECT_EQ(timers.Hung(kT0 + absl::Hours(4)), std::nullopt);
}

TEST(JobTimersTest, WithoutAProgressTimeoutNothingIsHung) {
  JobTimers timers{v1::TrainJobSpec()};
  timers.AttemptStarted(kT0);
  timers.Progressed(kT0);
  EXPECT_EQ(timers.Hung(kT0 + absl::Hours(1000)), std::nullopt);
  EXPECT_EQ(timers.ProgressDue(), absl::InfiniteFuture());
}

TEST(JobTimersTest, RestartsBackOffUpToFiveMinutesAndStartOverAfterAHealthyRun) {
  JobTimers timers{v1::TrainJobSpec()};
  absl::Time now = kT0;
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 12; ++i) {
    timers.AttemptStarted(now);
    now += absl::Seconds(1);  // a crash loop
    delays.push_back(timers.RestartDelay(now));
  }
  EXPECT_EQ(delays[0], absl::Seconds(1));
  EXPECT_EQ(delays[1], absl::Seconds(2));
  EXPECT_EQ(delays[2], absl::Seconds(4));
  EXPECT_EQ(delays[8], absl::Seconds(256));
  EXPECT_EQ(delays[9], absl::Minutes(5));
  EXPECT_EQ(delays[11], absl::Minutes(5));
  // A launch that fails (no attempt ran since) keeps backing off.
  EXPECT_EQ(timers.RestartDelay(now), absl::Minutes(5));
  // An attempt that ran 10 minutes was healthy: the next failure waits 1 s.
  timers.AttemptStarted(now);
  EXPECT_EQ(timers.RestartDelay(now + absl::Minutes(10)), absl::Seconds(1));
  EXPECT_EQ(timers.RestartDelay(now + absl::Minutes(10)), absl::Seconds(2));
}

TEST(JobTimersTest, TheGracePeriodIsTheJobsElseTheHeads) {
  v1::TrainJobSpec spec;
  EXPECT_EQ(StopGrace(spec, absl::Seconds(30)), absl::Seconds(30));
  spec.set_stop_grace_period_s(0);  // set: SIGKILL at once
  EXPECT_EQ(StopGrace(spec, absl::Seconds(30)), absl::ZeroDuration());
  spec.set_stop_grace_period_s(90);
  EXPECT_EQ(StopGrace(spec, absl::Seconds(30)), absl::Seconds(90));
}

}  // namespace
}  // namespace berth
