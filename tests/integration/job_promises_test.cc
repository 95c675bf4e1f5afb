// What a job is promised, on a real head and raylets (issue 48): a time
// limit stops a job that sleeps forever and ends it TIMED_OUT, a crash loop
// backs off, the grace period lets a SIGTERM handler finish (and no more),
// a job that reports and then hangs fails for want of progress, and a
// failed attempt's output stays readable after the restart.
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(TrainJobTest, AJobAtItsTimeLimitIsStoppedAndEndsTimedOut) {
  v1::TrainJobSpec spec = GpuJob(2);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 600"});
  spec.set_time_limit_s(3);
  spec.set_stop_grace_period_s(2);
  spec.mutable_failure_config()->set_max_failures(-1);  // not retried all the same
  const auto submitted = std::chrono::steady_clock::now();
  const std::string id = Submit(spec);
  const v1::TrainJobInfo done = WaitDone(id, seconds(30));
  // The limit, the grace and 5 s.
  EXPECT_LT(std::chrono::steady_clock::now() - submitted, seconds(3 + 2 + 5));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_TIMED_OUT) << done.DebugString();
  EXPECT_EQ(done.message(), "time limit 3s reached");
  EXPECT_EQ(done.failures(), 0u);
  EXPECT_EQ(done.attempt(), 0u);
  for (const std::string node : {"n0", "n1"}) EXPECT_THAT(JobProcessesOn(node, id), IsEmpty());
}

TEST_F(TrainJobTest, ACrashLoopBacksOffBetweenAttempts) {
  v1::TrainJobSpec spec = GpuJob(1);
  SetCommand(&spec, {"/bin/sh", "-c", "exit 3"});
  spec.mutable_failure_config()->set_max_failures(-1);
  const std::string id = Submit(spec);
  std::this_thread::sleep_for(seconds(10));
  const v1::TrainJobInfo info = Get(id);
  // 1 s, 2 s, 4 s between attempts: 4 in 10 s (and each takes a moment).
  EXPECT_GE(info.attempt(), 2u) << info.DebugString();
  EXPECT_LE(info.attempt(), 4u) << info.DebugString();
  EXPECT_GE(info.failures(), 2u);
  StopJob(id);
  EXPECT_EQ(WaitDone(id, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
}

TEST_F(TrainJobTest, TheGracePeriodLetsASigtermHandlerFinishAndNoLonger) {
  // The handler needs 3 s to write its file: a 10 s grace lets it, 1 s
  // does not (SIGKILL comes first).
  const std::string dir = cluster_->dir() + "/grace";
  fs::create_directories(dir);
  auto job = [&](int grace_s) {
    v1::TrainJobSpec spec = GpuJob(1);
    const std::string file = absl::StrCat(dir, "/grace-", grace_s);
    SetCommand(&spec, {"/bin/sh", "-c",
                       absl::StrCat("trap 'sleep 3; touch ", file,
                                    "; exit 0' TERM; while true; do sleep 0.1; done")});
    spec.set_stop_grace_period_s(grace_s);
    const std::string id = Submit(spec);
    EXPECT_TRUE(
        WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
    return std::make_pair(id, file);
  };
  const auto [patient, patient_file] = job(10);
  const auto [hasty, hasty_file] = job(1);
  std::this_thread::sleep_for(seconds(1));  // the traps are set
  StopJob(patient);
  StopJob(hasty);
  EXPECT_EQ(WaitDone(patient, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
  EXPECT_EQ(WaitDone(hasty, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
  EXPECT_TRUE(fs::exists(patient_file));
  EXPECT_FALSE(fs::exists(hasty_file));
}

TEST_F(TrainJobTest, AJobThatReportsThenHangsFailsForWantOfProgress) {
  v1::TrainJobSpec spec = GpuJob(1);
  SetCommand(&spec,
             {"/bin/sh", "-c",
              "mkdir -p \"$(dirname \"$BERTH_REPORT_FILE\")\"; "
              "echo '{\"step\": 1, \"metrics\": {\"loss\": 1.5}}' >> \"$BERTH_REPORT_FILE\"; "
              "sleep 600"});
  spec.mutable_failure_config()->set_progress_timeout_s(2);
  spec.set_stop_grace_period_s(1);
  const std::string id = Submit(spec);
  const v1::TrainJobInfo done = WaitDone(id, seconds(40));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_FAILED) << done.DebugString();
  EXPECT_EQ(done.last_step(), 1u);
  ASSERT_EQ(done.failure_causes_size(), 1);
  EXPECT_EQ(done.failure_causes(0), "no progress for 2s (failure_config.progress_timeout_s)");
}

TEST_F(TrainJobTest, AFailedAttemptsOutputStaysReadableAfterTheRestart) {
  v1::TrainJobSpec spec = GpuJob(2);
  spec.mutable_failure_config()->set_max_failures(1);
  SetCommand(&spec, {"/bin/sh", "-c",
                     "echo \"attempt $BERTH_ATTEMPT rank $RANK\"; "
                     "if [ \"$BERTH_ATTEMPT\" = 0 ]; then exit 3; fi"});
  const std::string id = Submit(spec);
  const v1::TrainJobInfo done = WaitDone(id, seconds(60));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  auto logs = [&](std::optional<uint32_t> attempt) {
    v1::StreamTrainJobLogsRequest request;
    request.set_job_id(id);
    if (attempt) request.set_attempt(*attempt);
    auto context = Context();
    auto reader = cluster_->jobs().StreamTrainJobLogs(context.get(), request);
    std::map<uint32_t, std::string> by_attempt;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) by_attempt[chunk.attempt()] += chunk.data();
    EXPECT_TRUE(reader->Finish().ok());
    return by_attempt;
  };
  std::map<uint32_t, std::string> first = logs(0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_THAT(first[0], HasSubstr("attempt 0 rank 0"));
  EXPECT_THAT(first[0], HasSubstr("attempt 0 rank 1"));
  std::map<uint32_t, std::string> all = logs(std::nullopt);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_THAT(all[1], HasSubstr("attempt 1 rank 1"));
  EXPECT_THAT(all[1], Not(HasSubstr("attempt 0")));
}

}  // namespace
}  // namespace berth::testing
