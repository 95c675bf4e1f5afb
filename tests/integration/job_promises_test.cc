// What a job is promised, on a real head and raylets (issue 48): a time
// limit stops a job that sleeps forever and ends it TIMED_OUT, a crash loop
// backs off, the grace period lets a SIGTERM handler finish (and no more),
// a job that reports and then hangs fails for want of progress, a failed
// attempt's output stays readable after the restart, and a drain moves a
// job to another node at its checkpoint or at the deadline, no failure.
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

// Drains and their end, on the same cluster.
class DrainTest : public TrainJobTest {
 protected:
  // Drains `node` (deadline `deadline_s` from now, 0 = none).
  void Drain(const std::string& node, int deadline_s) {
    v1::DrainNodeRequest drain;
    drain.set_node_id(node);
    drain.set_reason("kernel upgrade");
    if (deadline_s > 0) {
      drain.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Seconds(deadline_s)));
    }
    v1::DrainNodeResponse drained;
    ASSERT_TRUE(cluster_->nodes().DrainNode(Context().get(), drain, &drained).ok());
    EXPECT_GE(drained.bundles_to_move(), 1u);
  }
  void Undrain(const std::string& node) {
    v1::UndrainNodeRequest undrain;
    undrain.set_node_id(node);
    v1::UndrainNodeResponse response;
    ASSERT_TRUE(cluster_->nodes().UndrainNode(Context().get(), undrain, &response).ok());
  }
  // The job once it runs a later attempt (or as it is at `timeout`).
  v1::TrainJobInfo WaitRunningAgain(const std::string& id, seconds timeout) {
    v1::TrainJobInfo info;
    WaitUntil(
        [&] {
          info = Get(id);
          return info.state() == v1::TRAIN_JOB_STATE_RUNNING && info.attempt() >= 1;
        },
        timeout);
    return info;
  }
};

TEST_F(DrainTest, ANodesJobMovesAtItsCheckpointWithoutAFailure) {
  v1::TrainJobSpec spec = GpuJob(2);
  spec.mutable_scaling_config()->set_placement_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(1000000);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_checkpoint_every_steps(100);
  spec.mutable_failure_config()->set_max_failures(0);
  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitUntil([&] { return Get(id).last_step() > 0; }, seconds(30)));
  const std::string from = Get(id).workers(0).node_id();
  const std::string to = from == "n0" ? "n1" : "n0";
  Drain(from, 0);
  const v1::TrainJobInfo moved = WaitRunningAgain(id, seconds(40));
  ASSERT_EQ(moved.attempt(), 1u) << moved.DebugString();
  EXPECT_EQ(moved.failures(), 0u);
  EXPECT_EQ(moved.moves(), 1u);
  for (const v1::WorkerRank& w : moved.workers()) EXPECT_EQ(w.node_id(), to);
  EXPECT_THAT(JobProcessesOn(from, id), IsEmpty());
  Undrain(from);
  StopJob(id);
  EXPECT_EQ(WaitDone(id, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
}

TEST_F(DrainTest, AtTheDeadlineAJobIsStoppedWithItsGraceAndMoved) {
  v1::TrainJobSpec spec = GpuJob(1);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 600"});
  spec.set_stop_grace_period_s(1);
  spec.mutable_failure_config()->set_max_failures(0);
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
  const std::string from = Get(id).workers(0).node_id();
  const auto drained = std::chrono::steady_clock::now();
  Drain(from, 2);
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(Get(id).attempt(), 0u);  // no checkpoint: it waits for the deadline
  const v1::TrainJobInfo moved = WaitRunningAgain(id, seconds(20));
  ASSERT_EQ(moved.attempt(), 1u) << moved.DebugString();
  EXPECT_LT(std::chrono::steady_clock::now() - drained, seconds(2 + 1 + 5));
  EXPECT_NE(moved.workers(0).node_id(), from);
  EXPECT_EQ(moved.failures(), 0u);
  StopJob(id);
  EXPECT_EQ(WaitDone(id, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
}

TEST_F(TrainJobTest, AJobsWorkFolderIsUnderTheRayletsStateDirAndGoesWhenTheJobEnds) {
  v1::TrainJobSpec spec = GpuJob(1);
  SetCommand(&spec, {"/bin/sh", "-c", "pwd | tee where; sleep 2"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
  const std::string node = Get(id).workers(0).node_id();
  const std::string folder = cluster_->state_dir(node) + "/work/" + id;
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(folder + "/where"); }, seconds(10)));
  EXPECT_EQ(WaitDone(id, seconds(30)).state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  // Gone at the raylet's next sweep; its logs stay (the retention).
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(folder); }, seconds(25)));
  EXPECT_FALSE(fs::exists("/tmp/berth/" + node + "/work/" + id));
  v1::StreamTrainJobLogsRequest request;
  request.set_job_id(id);
  auto context = Context();
  auto reader = cluster_->jobs().StreamTrainJobLogs(context.get(), request);
  v1::LogChunk chunk;
  size_t read = 0;
  while (reader->Read(&chunk)) ++read;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_GE(read, 1u);
}

}  // namespace
}  // namespace berth::testing
