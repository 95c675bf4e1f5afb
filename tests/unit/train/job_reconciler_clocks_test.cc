// JobReconciler and the job's clocks (job_timers.h): a time limit ends the
// job TIMED_OUT, a hung attempt is a failure, a crash loop backs off, and
// every stop gives the job's grace period.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/train/job_reconciler_fixture.h"
#include "train/job_reconciler.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using JobClocksTest = JobReconcilerTest;

TEST_F(JobClocksTest, AtItsTimeLimitTheJobIsStoppedWithItsGraceAndEndsTimedOut) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.set_time_limit_s(10);
  spec.set_stop_grace_period_s(15);
  spec.mutable_failure_config()->set_max_failures(-1);  // a time limit is not retried
  New(spec);
  const absl::Time placed = now_;
  JobProcesses processes = Run({"n0", "n1"});
  EXPECT_EQ(job_->info().time_limit_ends_unix_ms(), absl::ToUnixMillis(placed + absl::Seconds(10)));
  now_ += absl::Seconds(9);
  EXPECT_EQ(Waits(Look(processes)), placed + absl::Seconds(10));  // woken at the limit
  now_ = placed + absl::Seconds(10);
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.grace, absl::Seconds(15));
  EXPECT_EQ(job_->info().message(), "stopping: time limit 10s reached");
  Result(StopsSent{{Worker(0, "r0")}});
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(18));  // grace + 3 s at most
  job_->OnWorkerExit(Exit(Worker(0, "r0"), 0, 0, SIGTERM));
  Expect<RemoveGroup>(Step());
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_TIMED_OUT);
  EXPECT_EQ(job_->info().message(), "time limit 10s reached");
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_TRUE(job_->done());
}

TEST_F(JobClocksTest, TheTimeLimitRunsThroughRestartsAndEndsAJobWaitingToRestart) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.set_time_limit_s(14);  // each failure waits 2 s for a GPU fault
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  const absl::Time placed = now_;
  JobProcesses processes = Run({"n0", "n1"});
  now_ += absl::Seconds(5);
  Look(processes);
  const JobStep failed_0 = FailRankZero(processes, 0);
  EXPECT_EQ(Waits(failed_0), now_ + absl::Seconds(1));
  now_ += absl::Seconds(1);
  processes = Launch("n0");
  EXPECT_EQ(job_->info().time_limit_ends_unix_ms(), absl::ToUnixMillis(placed + absl::Seconds(14)));
  now_ += absl::Seconds(2);
  Look(processes);
  const JobStep failed_1 = FailRankZero(processes, 1);
  EXPECT_EQ(Waits(failed_1), now_ + absl::Seconds(2));
  now_ += absl::Seconds(1);
  // Woken early (a report, a change of its group): the backoff holds.
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(1));
  now_ = placed + absl::Seconds(14);
  Expect<RemoveGroup>(Step());  // at the limit while it waits: no attempt more
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_TIMED_OUT);
}

TEST_F(JobClocksTest, AnAttemptWithoutProgressIsHungAndRestartsAsAFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(1);
  spec.mutable_failure_config()->set_progress_timeout_s(60);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  // Not before its first report: start-up may take long. A command's relay
  // says it is up with an empty report, which is no progress.
  v1::ReportTrainProgressRequest relay_up;
  relay_up.set_job_id(kJob);
  job_->OnProgress(now_, relay_up);
  now_ += absl::Minutes(5);
  EXPECT_EQ(Waits(Look(processes)), now_ + absl::Seconds(2));
  ReportCheckpoint(10);
  now_ += absl::Seconds(59);
  Look(processes);
  ReportCheckpoint(20);
  now_ += absl::Seconds(59);
  EXPECT_EQ(Waits(Look(processes)), now_ + absl::Seconds(1));  // due at 60 s without a report
  now_ += absl::Seconds(1);
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes, processes);
  Result(StopsSent{});
  JobStep restart = Step();
  EXPECT_TRUE(restart.restarted);
  EXPECT_EQ(job_->info().failures(), 1u);
  EXPECT_THAT(job_->info().failure_causes(0),
              HasSubstr("no progress for 1m (failure_config.progress_timeout_s)"));
  EXPECT_EQ(Waits(restart), now_ + absl::Seconds(1));  // backs off as any failure of its own
  now_ += absl::Seconds(1);
  const JobProcesses second = Launch("n0");
  // The new attempt waits for its own first report.
  now_ += absl::Minutes(5);
  EXPECT_EQ(Waits(Look(second)), now_ + absl::Seconds(2));
}

TEST_F(JobClocksTest, ACrashLoopBacksOffButANodeFailureRestartsAtOnce) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  for (int attempt = 0; attempt < 3; ++attempt) {
    const absl::Duration delay = absl::Seconds(1 << attempt);
    const JobStep failed_attempt = FailRankZero(processes, attempt);
    EXPECT_EQ(Waits(failed_attempt), now_ + delay);
    EXPECT_THAT(job_->info().message(),
                StartsWith(absl::StrCat("restarting in ", absl::FormatDuration(delay))));
    now_ += delay;
    processes = Launch("n0");
  }
  // n1 dies: berth's fault, not the job's.
  alive_.erase("n1");
  EXPECT_EQ(Expect<StopProcesses>(Step()).processes, processes);
  Result(StopsSent{});
  EXPECT_EQ(Waits(Step()), now_);
  EXPECT_THAT(job_->info().message(), StartsWith("restarting after: node n1"));
}

TEST_F(JobClocksTest, APreemptionStartsTheTimeLimitAgain) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.set_time_limit_s(10);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  now_ += absl::Seconds(8);
  Look(processes);
  group_->set_preempting(true);
  group_->set_preempted_by("preempted by job-2");
  StopAndExit();
  EXPECT_EQ(job_->info().time_limit_ends_unix_ms(), 0);
  Expect<ReleaseGroup>(Step());
  Result(GroupReleased{absl::OkStatus()});
  // Placed again a minute later: 10 s from then.
  now_ += absl::Minutes(1);
  group_ = Created({"n0", "n1"}, 2);
  Launch("n0");
  EXPECT_EQ(job_->info().time_limit_ends_unix_ms(), absl::ToUnixMillis(now_ + absl::Seconds(10)));
}

}  // namespace
}  // namespace berth
