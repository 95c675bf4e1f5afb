// Faults under a train job across real processes (train_job_fixture.h):
// raylets killed with and without a restart, a killed rank or trainer, the
// head killed while a job waits, stops, restarts or starts.
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

// Faults under a running job (issue 15): three nodes, so that the bundles of
// a lost node have somewhere to go.
class TrainFaultTest : public TrainJobTest {
 protected:
  void SetUp() override {
    TrainJobTest::SetUp();
    cluster_->AddRaylet({"n2", 2, "A10G", 8, "32Gi"});
  }

  // A built-in 4-rank job that checkpoints often and runs for a while.
  v1::TrainJobSpec LongBuiltinJob() {
    v1::TrainJobSpec spec = GpuJob(4);
    spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(kSteps);
    spec.mutable_entrypoint()->mutable_builtin_trainer()->set_checkpoint_every_steps(kSteps / 20);
    return spec;
  }

  // Waits until the job runs and has saved a checkpoint.
  v1::TrainJobInfo WaitCheckpointed(const std::string& id) {
    v1::TrainJobInfo info;
    EXPECT_TRUE(WaitUntil(
        [&] {
          info = Get(id);
          return info.state() == v1::TRAIN_JOB_STATE_RUNNING && !info.latest_checkpoint().empty();
        },
        seconds(60)))
        << info.DebugString();
    return info;
  }

  // SIGKILLs the processes of one worker (the program and its children).
  void KillWorker(const std::string& node, const std::string& worker_id) {
    std::vector<pid_t> pids;
    ASSERT_TRUE(WaitUntil(
        [&] {
          pids = ProcessesWithEnv("TORCHELASTIC_ERROR_FILE",
                                  cluster_->log_dir(node) + "/" + worker_id + ".");
          return !pids.empty();
        },
        seconds(5)));
    for (pid_t pid : pids) kill(pid, SIGKILL);
  }

  // Every GPU of the ALIVE nodes is free, as `berth status` shows it.
  void ExpectEveryGpuFree() {
    v1::GetClusterStatusResponse status;
    ASSERT_TRUE(cluster_->cluster().GetClusterStatus(Context().get(), {}, &status).ok());
    EXPECT_GT(status.total().amounts().at("GPU"), 0);
    EXPECT_EQ(status.available().amounts().at("GPU"), status.total().amounts().at("GPU"))
        << status.DebugString();
  }

  static constexpr uint32_t kSteps = 4000;
};

TEST_F(TrainFaultTest, ARayletKilledUnderRanksRestartsTheJobOnNewBundlesFromItsCheckpoint) {
  v1::TrainJobSpec spec = LongBuiltinJob();
  // A lost node is not the job's fault: it restarts without counting it.
  spec.mutable_failure_config()->set_max_failures(0);
  spec.mutable_failure_config()->set_count_node_failures(false);
  const std::string id = Submit(spec);
  const v1::TrainJobInfo running = WaitCheckpointed(id);
  ASSERT_EQ(running.workers_size(), 4);
  const std::string victim = running.workers(3).node_id();
  ASSERT_NE(victim, running.workers(0).node_id()) << "ranks 2-3 share rank 0's node";
  ASSERT_FALSE(JobProcessesOn(victim, id).empty());

  cluster_->KillRaylet(victim, SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();

  // Its workers die with it: nothing of the job is left on the node.
  EXPECT_TRUE(WaitUntil([&] { return JobProcessesOn(victim, id).empty(); }, seconds(2)))
      << JobProcessesOn(victim, id).size() << " processes of the job outlived their raylet";
  // The attempt ends within the liveness timeout + 2 s, for the node's death.
  v1::TrainJobInfo after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = Get(id);
        return after.failure_causes_size() > 0;
      },
      cluster_->liveness_timeout() + milliseconds(2000)))
      << "still " << after.DebugString();
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at,
            cluster_->liveness_timeout() + milliseconds(2000));
  EXPECT_THAT(after.failure_causes(0), HasSubstr("node " + victim + " died (missed heartbeats)"));

  v1::TrainJobInfo done = WaitDone(id, seconds(120));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.attempt(), 1u);
  EXPECT_EQ(done.failures(), 0u);  // count_node_failures: false
  for (const v1::WorkerRank& w : done.workers()) EXPECT_NE(w.node_id(), victim);
  // The second attempt resumed from a checkpoint of the first and finished.
  EXPECT_THAT(RankLog(done, 0), HasSubstr("resuming after step"));
  EXPECT_GE(done.last_step(), kSteps - kSteps / 20);
  ExpectEveryGpuFree();
  for (const std::string node : {"n0", "n1", "n2"})
    EXPECT_TRUE(JobProcessesOn(node, id).empty()) << node;
}

// A command job of 2 ranks whose first attempt runs until killed and whose
// second finishes at once; one restart allowed.
v1::TrainJobSpec RestartableJob() {
  v1::TrainJobSpec spec = GpuJob(2);
  spec.mutable_failure_config()->set_max_failures(1);
  SetCommand(&spec, {"/bin/sh", "-c", "if [ \"$BERTH_ATTEMPT\" = 0 ]; then sleep 60; fi"});
  return spec;
}

TEST_F(TrainFaultTest, AKilledRankRestartsTheJobAndNamesTheSignal) {
  const std::string id = Submit(RestartableJob());
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(10)));
  const v1::WorkerRank rank1 = Get(id).workers(1);
  KillWorker(rank1.node_id(), rank1.worker_id());
  v1::TrainJobInfo done = WaitDone(id, seconds(30));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 1u);
  ASSERT_EQ(done.failure_causes_size(), 1);
  EXPECT_THAT(done.failure_causes(0), HasSubstr("rank 1 (" + rank1.worker_id() + " on " +
                                                rank1.node_id() + ") was killed by signal 9"));
  ExpectEveryGpuFree();
  for (const std::string node : {"n0", "n1", "n2"})
    EXPECT_TRUE(JobProcessesOn(node, id).empty()) << node;
}

TEST_F(TrainFaultTest, AKilledTrainerRestartsTheJob) {
  const std::string id = Submit(RestartableJob());
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(10)));
  const std::string node = Get(id).workers(0).node_id();
  const std::string trainer = id + "-a0-trainer";
  KillWorker(node, trainer);
  v1::TrainJobInfo done = WaitDone(id, seconds(30));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  ASSERT_EQ(done.failure_causes_size(), 1);
  EXPECT_THAT(done.failure_causes(0),
              HasSubstr("the trainer (" + trainer + " on " + node + ") was killed by signal 9"));
  for (const std::string n : {"n0", "n1", "n2"}) EXPECT_TRUE(JobProcessesOn(n, id).empty()) << n;
}

// A node that lost a bundle its head's books still put there (a restart
// the head did not see): StartWorker is NOT_FOUND, the group places the
// bundle again, and the job runs instead of starting there forever.
TEST_F(TrainFaultTest, ABundleTheNodeNoLongerHoldsIsPlacedAgain) {
  v1::TrainJobSpec spec = RestartableJob();
  spec.mutable_failure_config()->set_max_failures(3);
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(10)));
  const std::string node = Get(id).workers(1).node_id();
  // The raylet lets go of every bundle (and its workers), unknown to the head.
  v1::ReleaseUnusedBundlesRequest release;
  release.set_request_id("test-release-all");
  v1::ReleaseUnusedBundlesResponse released;
  ASSERT_TRUE(
      cluster_->raylet(node).ReleaseUnusedBundles(Context().get(), release, &released).ok());
  ASSERT_GT(released.released_size(), 0);

  v1::TrainJobInfo done = WaitDone(id, seconds(60));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  ExpectEveryGpuFree();
  for (const std::string n : {"n0", "n1", "n2"}) EXPECT_TRUE(JobProcessesOn(n, id).empty()) << n;
}

TEST_F(TrainFaultTest, ARayletKilledAndRestartedAtOnceLeavesNoWorkerOfItsOldLife) {
  v1::TrainJobSpec spec = LongBuiltinJob();
  spec.mutable_failure_config()->set_max_failures(1);
  const std::string id = Submit(spec);
  const v1::TrainJobInfo running = WaitCheckpointed(id);
  const std::string victim = running.workers(3).node_id();
  ASSERT_FALSE(JobProcessesOn(victim, id).empty());

  cluster_->KillRaylet(victim, SIGKILL);
  cluster_->RestartRaylet(victim);  // the same node id, before the head declared it DEAD

  EXPECT_TRUE(WaitUntil([&] { return JobProcessesOn(victim, id).empty() || Get(id).attempt() > 0; },
                        seconds(2)));
  v1::TrainJobInfo done = WaitDone(id, seconds(120));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 1u);  // counted: count_node_failures is unset
  ASSERT_GE(done.failure_causes_size(), 1);
  EXPECT_THAT(done.failure_causes(0), HasSubstr("node " + victim + " died (missed heartbeats)"));
  EXPECT_THAT(RankLog(done, 0), HasSubstr("resuming after step"));
  ExpectEveryGpuFree();
  for (const std::string node : {"n0", "n1", "n2"}) {
    for (pid_t pid : JobProcessesOn(node, id))
      ADD_FAILURE() << "pid " << pid << " of the job left on " << node;
  }
}

TEST_F(TrainJobTest, AHeadKilledWhileAJobWaitsKeepsItWaitingThenRunsIt) {
  v1::TrainJobSpec spec = GpuJob(6);  // 4 GPUs here
  SetCommand(&spec, {"/bin/sh", "-c", "exit 0"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).message().find("GPU") != std::string::npos; }, seconds(5)));

  cluster_->RestartHead(SIGKILL);

  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_PENDING);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).message().find("GPU") != std::string::npos; }, seconds(5)))
      << Get(id).DebugString();
  cluster_->AddRaylet({"n2", 2, "A10G", 8, "32Gi"});
  v1::TrainJobInfo done = WaitDone(id);
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 0u);
}

// A finished job's end is written: before, a restarted head found its
// group removed and turned SUCCEEDED into "failed: the placement group is
// gone".
TEST_F(TrainJobTest, AHeadKilledAfterJobsEndedKeepsHowTheyEnded) {
  v1::TrainJobSpec ok = GpuJob(2), failing = GpuJob(2);
  SetCommand(&ok, {"/bin/sh", "-c", "exit 0"});
  SetCommand(&failing, {"/bin/sh", "-c", "exit 3"});
  failing.mutable_failure_config()->set_max_failures(0);
  const std::string ok_id = Submit(ok), failing_id = Submit(failing);
  ASSERT_EQ(WaitDone(ok_id).state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  ASSERT_EQ(WaitDone(failing_id).state(), v1::TRAIN_JOB_STATE_FAILED);

  cluster_->RestartHead(SIGKILL);

  const v1::TrainJobInfo succeeded = Get(ok_id), failed = Get(failing_id);
  EXPECT_EQ(succeeded.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << succeeded.DebugString();
  EXPECT_EQ(succeeded.failures(), 0u);
  EXPECT_EQ(failed.state(), v1::TRAIN_JOB_STATE_FAILED) << failed.DebugString();
  ASSERT_EQ(failed.failure_causes_size(), 1);
  EXPECT_THAT(failed.failure_causes(0), HasSubstr("exited with code 3"));
}

TEST_F(TrainJobTest, AHeadKilledWhileStoppingAJobStillStopsIt) {
  const std::string id = StartSleepingJob();
  StopJob(id);

  cluster_->RestartHead(SIGKILL);  // the stop was accepted: it must hold

  v1::TrainJobInfo info = WaitDone(id, seconds(20));
  EXPECT_EQ(info.state(), v1::TRAIN_JOB_STATE_STOPPED) << info.DebugString();
  for (const std::string node : {"n0", "n1"}) {
    EXPECT_TRUE(WaitUntil([&] { return JobProcessesOn(node, id).empty(); }, seconds(10))) << node;
  }
}

TEST_F(TrainJobTest, AHeadKilledAsAJobRestartsFinishesTheRestart) {
  v1::TrainJobSpec spec = GpuJob(2);
  spec.mutable_failure_config()->set_max_failures(1);
  // The first attempt fails at once; the second runs a moment.
  SetCommand(&spec, {"/bin/sh", "-c", "if [ \"$BERTH_ATTEMPT\" = 0 ]; then exit 3; fi; sleep 2"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitUntil([&] { return Get(id).failures() > 0; }, seconds(20)));

  cluster_->RestartHead(SIGKILL);

  v1::TrainJobInfo done = WaitDone(id, seconds(30));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 1u);
  EXPECT_GE(done.attempt(), 1u);
  EXPECT_THAT(done.failure_causes(0), HasSubstr("exited with code 3"));
}

// Faults while a job is STARTING: every raylet holds StartWorker while its
// hold file exists, so a fault can hit the launch itself.
class TrainStartFaultTest : public TrainFaultTest {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    for (const std::string node : {"n0", "n1", "n2"}) {
      std::ofstream(Hold(node)).put('x');
      cluster_->AddRaylet({node, 2, "A10G", 8, "32Gi", "", {"--hold-starts-file", Hold(node)}});
    }
  }
  std::string Hold(const std::string& node) const { return cluster_->dir() + "/hold-" + node; }

  // Submits a restartable 4-rank job and releases the starts of every node
  // but the one of bundle 3 (not bundle 0's: the trainer's); returns that
  // node once the job is STARTING with its launch held there.
  std::string SubmitHeldOnOneNode(const v1::TrainJobSpec& spec, std::string* id) {
    *id = Submit(spec);
    std::string victim;
    EXPECT_TRUE(WaitUntil(
        [&] {
          const v1::TrainJobInfo info = Get(*id);
          if (info.state() != v1::TRAIN_JOB_STATE_STARTING) return false;
          v1::GetPlacementGroupRequest get;
          get.set_placement_group_id(info.placement_group_id());
          v1::GetPlacementGroupResponse pg;
          if (!cluster_->groups().GetPlacementGroup(Context().get(), get, &pg).ok()) return false;
          std::string first;
          for (const v1::BundleLocation& l : pg.placement_group().locations()) {
            if (l.bundle_index() == 0) first = l.node_id();
            if (l.bundle_index() == 3) victim = l.node_id();
          }
          return !victim.empty() && victim != first;
        },
        seconds(10)))
        << Get(*id).DebugString();
    for (const std::string node : {"n0", "n1", "n2"}) {
      if (node != victim) std::filesystem::remove(Hold(node));
    }
    return victim;
  }

  v1::TrainJobSpec QuickJob() {
    v1::TrainJobSpec spec = GpuJob(4);
    spec.mutable_failure_config()->set_max_failures(1);
    SetCommand(&spec, {"/bin/sh", "-c", "sleep 1"});
    return spec;
  }

  void ExpectNoProcessLeft(const std::string& id) {
    for (const std::string node : {"n0", "n1", "n2"}) {
      EXPECT_TRUE(WaitUntil([&] { return JobProcessesOn(node, id).empty(); }, seconds(5))) << node;
    }
  }
};

TEST_F(TrainStartFaultTest, ARayletKilledWhileStartingRanksRestartsTheJobElsewhere) {
  std::string id;
  const std::string victim = SubmitHeldOnOneNode(QuickJob(), &id);
  ASSERT_FALSE(victim.empty());
  cluster_->KillRaylet(victim, SIGKILL);
  v1::TrainJobInfo done = WaitDone(id, seconds(60));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  ASSERT_EQ(done.failure_causes_size(), 1) << done.DebugString();
  EXPECT_THAT(done.failure_causes(0), HasSubstr("node " + victim + " died (missed heartbeats)"));
  for (const v1::WorkerRank& w : done.workers()) EXPECT_NE(w.node_id(), victim);
  ExpectEveryGpuFree();
  ExpectNoProcessLeft(id);
}

TEST_F(TrainStartFaultTest, ARayletKilledAndRestartedWhileStartingRanksRestartsTheJob) {
  std::string id;
  const std::string victim = SubmitHeldOnOneNode(QuickJob(), &id);
  ASSERT_FALSE(victim.empty());
  cluster_->KillRaylet(victim, SIGKILL);
  std::filesystem::remove(Hold(victim));
  cluster_->RestartRaylet(victim);
  v1::TrainJobInfo done = WaitDone(id, seconds(60));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  ASSERT_EQ(done.failure_causes_size(), 1) << done.DebugString();
  EXPECT_THAT(done.failure_causes(0), HasSubstr("node " + victim + " died (missed heartbeats)"));
  ExpectEveryGpuFree();
  ExpectNoProcessLeft(id);
}

TEST_F(TrainStartFaultTest, AHeadKilledWhileStartingRanksStartsAFreshAttempt) {
  std::string id;
  const std::string victim = SubmitHeldOnOneNode(QuickJob(), &id);
  ASSERT_FALSE(victim.empty());
  cluster_->RestartHead(SIGKILL);
  std::filesystem::remove(Hold(victim));
  v1::TrainJobInfo done = WaitDone(id, seconds(60));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_GE(done.attempt(), 1u);  // the half-started attempt 0 is not reused
  EXPECT_EQ(done.failures(), 0u);
  ExpectEveryGpuFree();
  ExpectNoProcessLeft(id);
}

}  // namespace
}  // namespace berth::testing
