// Sharing the cluster between two teams, on real processes: a real
// berth-head, two berth-raylets with two simulated GPUs each, and a user's
// PyTorch script (examples/resumable-ddp/train.py, Gloo) as every job. Team A
// borrows every GPU; team B, within its quota, takes its half back: one of
// A's jobs is preempted (SIGTERM, then the grace period), waits PENDING
// with the reason, and when B's job has ended resumes from its checkpoint
// and succeeds, with no failure counted. The victim is the job that loses
// the least: the one that checkpoints often, though it started first.
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

class PreemptionTest : public TrainJobTest {
 protected:
  void SetUp() override {
    TrainJobTest::SetUp();
    CreateCohort("org");
    CreateQueue("team-a");
    CreateQueue("team-b");
  }
  void CreateCohort(const std::string& name) {
    v1::CreateCohortRequest request;
    request.set_name(name);
    v1::CreateCohortResponse response;
    grpc::Status s = cluster_->queues().CreateCohort(Context().get(), request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // Half the cluster's GPUs, in cohort `org`.
  void CreateQueue(const std::string& name) {
    v1::CreateQueueRequest request;
    request.mutable_queue()->set_name(name);
    request.mutable_queue()->set_cohort("org");
    (*request.mutable_queue()->mutable_nominal_quota())["GPU"] = 2;
    v1::CreateQueueResponse response;
    grpc::Status s = cluster_->queues().CreateQueue(Context().get(), request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // Two ranks of one GPU each, `steps` steps of about `step_seconds`, a
  // checkpoint every `checkpoint_every` steps and at the last.
  v1::TrainJobSpec Job(const std::string& queue, int steps, double step_seconds,
                       int checkpoint_every = 2) {
    v1::TrainJobSpec spec = GpuJob(2);
    spec.set_queue(queue);
    SetCommand(&spec,
               {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/resumable-ddp/train.py", "--steps",
                std::to_string(steps), "--checkpoint-every", std::to_string(checkpoint_every),
                "--step-seconds", std::to_string(step_seconds)},
               {{"PYTHONPATH", BERTH_SOURCE_DIR "/python"}});
    return spec;
  }
};

TEST_F(PreemptionTest, ATeamBelowItsQuotaPreemptsABorrowerWhichResumesFromItsCheckpoint) {
  // Team A takes all four GPUs with two jobs, the second borrowing B's
  // half. The first saves a checkpoint every second; the second none until
  // its end, so preempting it would lose all it did.
  const std::string a1 = Submit(Job("team-a", 120, 0.5));
  ASSERT_TRUE(WaitUntil([&] { return !Get(a1).latest_checkpoint().empty(); }, seconds(90)))
      << Get(a1).DebugString();
  const std::string a2 = Submit(Job("team-a", 120, 0.5, /*checkpoint_every=*/1000));
  ASSERT_TRUE(
      WaitUntil([&] { return Get(a2).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(60)))
      << Get(a2).DebugString();
  // A preemption loses the work since a job's start or its last checkpoint.
  // a2 has run since before it was RUNNING; once a1 reports a checkpoint
  // after that, a1 has less to lose than a2 from then on, however long the
  // steps take.
  const uint64_t a1_step = Get(a1).latest_checkpoint_step();
  ASSERT_TRUE(WaitUntil([&] { return Get(a1).latest_checkpoint_step() > a1_step; }, seconds(30)))
      << "a1 reported no checkpoint after a2 started: " << Get(a1).DebugString();

  // Team B arrives: the job that checkpointed last is preempted within seconds.
  const std::string b = Submit(Job("team-b", 4, 0));
  v1::TrainJobInfo preempted;
  ASSERT_TRUE(WaitUntil(
      [&] {
        preempted = Get(a1);
        return preempted.preemptions() == 1;
      },
      seconds(15)))
      << preempted.DebugString() << Get(a2).DebugString();
  EXPECT_EQ(preempted.state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_THAT(preempted.message(),
              HasSubstr("preempted by job " + b + " of queue team-b (reclaim)"));
  EXPECT_EQ(Get(a2).preemptions(), 0u);  // the job with no checkpoint keeps running
  EXPECT_EQ(Get(a2).state(), v1::TRAIN_JOB_STATE_RUNNING);
  // Its processes are gone before B's start on the GPUs they had.
  ASSERT_TRUE(WaitUntil(
      [&] { return JobProcessesOn("n0", a1).empty() && JobProcessesOn("n1", a1).empty(); },
      seconds(15)));
  const uint64_t checkpoint_step = Get(a1).latest_checkpoint_step();
  EXPECT_GT(checkpoint_step, 0u);

  // B runs and ends; A's job is placed again and resumes.
  v1::TrainJobInfo b_info = WaitDone(b, seconds(120));
  ASSERT_EQ(b_info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << b_info.DebugString();
  EXPECT_EQ(b_info.preemptions(), 0u);
  v1::TrainJobInfo a1_info = WaitDone(a1, seconds(240));
  ASSERT_EQ(a1_info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << a1_info.DebugString();
  EXPECT_EQ(a1_info.failures(), 0u);
  EXPECT_EQ(a1_info.failure_causes_size(), 0);
  EXPECT_EQ(a1_info.preemptions(), 1u);
  EXPECT_EQ(a1_info.attempt(), 1u);
  EXPECT_EQ(a1_info.last_step(), 120u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(RankLog(a1_info, r), HasSubstr("resuming from step "))
        << "rank " << r << RankLog(a1_info, r, ".err");
  }
  v1::TrainJobInfo a2_info = WaitDone(a2, seconds(180));
  EXPECT_EQ(a2_info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << a2_info.DebugString();
  EXPECT_EQ(a2_info.preemptions(), 0u);
}

}  // namespace
}  // namespace berth::testing
