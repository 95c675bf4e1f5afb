// JobReconciler and drains: a job whose group is moving off a draining node
// moves at its next checkpoint, or at the drain's deadline, with its grace
// period; the moving bundles are let go of and placed elsewhere; the next
// attempt resumes from the checkpoint, and the move is no failure. A group
// moving off an unhealthy GPU ends the attempt at once, as failed by the
// GPU: a cause, never charged.
#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/train/job_reconciler_fixture.h"
#include "train/job_reconciler.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

using JobDrainTest = JobReconcilerTest;

constexpr char kReason[] = "node n0 is draining: kernel upgrade";

// The job's group says it moves, by `deadline` (InfiniteFuture = none).
void Moving(absl::StatusOr<v1::PlacementGroupInfo>& group, absl::Time deadline) {
  group->set_moving(true);
  group->set_moving_reason(kReason);
  group->set_move_deadline_unix_ms(
      deadline == absl::InfiniteFuture() ? 0 : absl::ToUnixMillis(deadline));
}

TEST_F(JobDrainTest, AMovingJobMovesAtItsNextCheckpointAndResumesElsewhereWithoutAFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  spec.set_stop_grace_period_s(20);
  New(spec);
  JobProcesses processes = Run({"n0", "n0"});
  ReportCheckpoint(50);
  Moving(group_, absl::InfiniteFuture());
  // It runs on until its next checkpoint, and says so.
  Waits(Look(processes));
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);
  EXPECT_THAT(job_->info().message(), HasSubstr("moves at its next checkpoint"));
  now_ += absl::Seconds(30);
  EXPECT_TRUE(ReportCheckpoint(60));  // due at once
  StopProcesses stop = Expect<StopProcesses>(Look(processes));
  EXPECT_EQ(stop.processes, processes);
  EXPECT_EQ(stop.grace, absl::Seconds(20));
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_EQ(job_->info().message(), absl::StrCat("moving: ", kReason, " (at its checkpoint)"));
  std::vector<std::string> awaited;
  for (const auto& [worker, node] : stop.processes) awaited.push_back(worker);
  Result(StopsSent{awaited});
  for (const std::string& w : awaited) job_->OnWorkerExit(Exit(w, 0, 0, SIGTERM));
  // The group lets go of what is on the draining node.
  EXPECT_EQ(Expect<ReleaseGroup>(Step()).placement_group_id, kGroup);
  Result(GroupReleased{absl::OkStatus()});
  group_->set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  group_->set_moving(false);
  group_->clear_locations();
  Waits(Step());
  // Placed on n1: attempt 1 resumes from the checkpoint at once (no backoff).
  group_ = Created({"n1", "n1"}, 7);
  alive_.insert("n1");
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n1");
  ExpectResumeFrom("/ckpt/step-60.pt");
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_EQ(job_->info().moves(), 1u);
  EXPECT_EQ(job_->info().failure_causes_size(), 0);
}

TEST_F(JobDrainTest, AtTheDrainsDeadlineAJobWithoutACheckpointIsStoppedAndMoved) {
  v1::TrainJobSpec spec = BuiltinSpec(1);
  spec.mutable_failure_config()->set_max_failures(0);
  New(spec);
  JobProcesses processes = Run({"n0"});
  const absl::Time deadline = now_ + absl::Seconds(10);
  Moving(group_, deadline);
  now_ = deadline - absl::Seconds(1);
  EXPECT_EQ(Waits(Look(processes)), deadline);  // woken at the deadline
  now_ = deadline;
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.grace, absl::Seconds(30));  // the default grace period
  EXPECT_EQ(job_->info().message(),
            absl::StrCat("moving: ", kReason, " (the drain's deadline came)"));
  Result(StopsSent{{Worker(0, "r0"), Worker(0, "trainer")}});
  job_->OnWorkerExit(Exit(Worker(0, "r0"), 0, 0, SIGTERM));
  job_->OnWorkerExit(Exit(Worker(0, "trainer"), 0, 0, SIGTERM));
  Expect<ReleaseGroup>(Step());
  EXPECT_EQ(job_->info().moves(), 1u);
  EXPECT_EQ(job_->info().failures(), 0u);
}

TEST_F(JobDrainTest, AnUndrainBeforeTheCheckpointLeavesTheJobWhereItRuns) {
  New(BuiltinSpec(1));
  JobProcesses processes = Run({"n0"});
  Moving(group_, now_ + absl::Seconds(60));
  Waits(Look(processes));
  group_->set_moving(false);  // undrained
  Waits(Look(processes));
  EXPECT_EQ(job_->info().message(), "");
  EXPECT_FALSE(ReportCheckpoint(10));  // a checkpoint moves nothing now
  now_ += absl::Seconds(61);
  Waits(Look(processes));
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);
  EXPECT_EQ(job_->info().moves(), 0u);
}

TEST_F(JobDrainTest, AGroupPlacedOnADrainingNodeBeforeItsStartMovesFirst) {
  New(BuiltinSpec(1));
  Expect<CreateGroup>(Step());
  Result(GroupCreated{std::string(kGroup)});
  group_ = Created({"n0"});
  Moving(group_, absl::InfiniteFuture());
  EXPECT_EQ(Expect<ReleaseGroup>(Step()).placement_group_id, kGroup);
  Result(GroupReleased{absl::OkStatus()});
  group_ = Created({"n1"}, 2);
  alive_.insert("n1");
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n1");
  EXPECT_EQ(job_->info().attempt(), 0u);
}

constexpr char kGpuFault[] = "GPU 1 of n0: XID 79, GPU has fallen off the bus";

void OnUnhealthyGpu(absl::StatusOr<v1::PlacementGroupInfo>& group, absl::Time since) {
  group->set_moving(true);
  group->set_move_cause(v1::MOVE_CAUSE_UNHEALTHY_GPU);
  group->set_moving_reason(kGpuFault);
  group->set_move_deadline_unix_ms(absl::ToUnixMillis(since));
}

TEST_F(JobDrainTest, AnUnhealthyGpuEndsTheAttemptAtOnceAsAnUnchargedFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  New(spec);
  JobProcesses processes = Run({"n0", "n0"});
  ReportCheckpoint(40);
  OnUnhealthyGpu(group_, now_);
  StopAndExit();
  // Not a move at a checkpoint: a failure of the GPU's, with no backoff.
  JobStep restart = Step();
  EXPECT_TRUE(restart.restarted);
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_EQ(job_->info().moves(), 0u);
  ASSERT_EQ(job_->info().failure_causes_size(), 1);
  EXPECT_EQ(job_->info().failure_causes(0), kGpuFault);
  EXPECT_EQ(job_->info().message(), absl::StrCat("restarting after: ", kGpuFault));
  EXPECT_EQ(Waits(restart), now_);  // no backoff
  // The group lets go of the bundle on the GPU, and is placed again.
  EXPECT_EQ(Expect<ReleaseGroup>(Step()).placement_group_id, kGroup);
  Result(GroupReleased{absl::OkStatus()});
  group_ = Created({"n0", "n0"}, 9);
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n0");
  ExpectResumeFrom("/ckpt/step-40.pt");
}

TEST_F(JobDrainTest, ARankThatExitedBeforeItsGpuWasFoundUnhealthyIsChargedToTheGpu) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  New(spec);
  JobProcesses processes = Run({"n0", "n0"});
  job_->OnWorkerExit(Exit(Worker(0, "r1"), 1, 1000));  // CUDA error: the GPU is gone
  ListWorkers probe = Expect<ListWorkers>(Step());
  JobProcesses running = processes;
  running.erase(Worker(0, "r1"));
  Result(Listing(probe.nodes, running));
  // A moment for the node's report of a fault of its GPU,
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(2));
  now_ += absl::Seconds(1);
  OnUnhealthyGpu(group_, now_);  // which comes.
  StopAndExit();
  Step();
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_EQ(job_->info().failures(), 0u);
  ASSERT_EQ(job_->info().failure_causes_size(), 1);
  EXPECT_EQ(job_->info().failure_causes(0), kGpuFault);
}

}  // namespace
}  // namespace berth
