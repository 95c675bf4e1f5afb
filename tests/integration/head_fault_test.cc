// Faults of the head itself under a running job (real head, raylets and
// worker processes): a head that stalls blames no node, a second head does
// not serve beside the first, and what a job reports while its head is away
// reaches the head once it is back. None of them costs the job anything.
#include <signal.h>

#include <algorithm>
#include <thread>

#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

using HeadFaultTest = TrainJobTest;

std::vector<v1::NodeInfo> Nodes(LocalCluster& cluster) {
  v1::ListNodesResponse listed;
  EXPECT_TRUE(cluster.nodes().ListNodes(Context().get(), {}, &listed).ok());
  return {listed.nodes().begin(), listed.nodes().end()};
}

TEST_F(HeadFaultTest, AHeadPausedPastTheLivenessTimeoutDeclaresNoNodeDeadAndTheJobGoesOn) {
  v1::TrainJobSpec spec = GpuJob(4);  // both nodes
  spec.mutable_failure_config()->set_max_failures(0);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 8"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(15)));

  // Paused for three liveness timeouts: every heartbeat of the time is
  // missed, by the head's fault, not the nodes'.
  ASSERT_EQ(kill(cluster_->head_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(3 * cluster_->liveness_timeout());
  ASSERT_EQ(kill(cluster_->head_pid(), SIGCONT), 0);

  // Watched for as long again as a node would take to be declared.
  const auto watch_until = std::chrono::steady_clock::now() + 2 * cluster_->liveness_timeout();
  while (std::chrono::steady_clock::now() < watch_until) {
    for (const v1::NodeInfo& node : Nodes(*cluster_)) {
      ASSERT_EQ(node.state(), v1::NODE_STATE_ALIVE) << node.node_id() << " after the pause";
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  const v1::TrainJobInfo done = WaitDone(id, seconds(60));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(done.attempt(), 0u);
  EXPECT_EQ(done.failures(), 0u);
  EXPECT_THAT(ReadFileOrEmpty(cluster_->dir() + "/head.log"), HasSubstr("the head did not run for"));
}

TEST_F(HeadFaultTest, ANodeThatDiesWhileTheHeadIsPausedIsStillDeclared) {
  ASSERT_EQ(kill(cluster_->head_pid(), SIGSTOP), 0);
  cluster_->KillRaylet("n1", SIGKILL);
  std::this_thread::sleep_for(2 * cluster_->liveness_timeout());
  ASSERT_EQ(kill(cluster_->head_pid(), SIGCONT), 0);
  // n1 is half the cluster: most nodes silent at once is suspected first,
  // so it takes the timeout and the grace after the head runs again.
  std::map<std::string, v1::NodeState> states;
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (const v1::NodeInfo& node : Nodes(*cluster_)) states[node.node_id()] = node.state();
        return states["n1"] == v1::NODE_STATE_DEAD;
      },
      3 * cluster_->liveness_timeout() + seconds(5)));
  EXPECT_EQ(states["n0"], v1::NODE_STATE_ALIVE);
}

TEST_F(HeadFaultTest, ASecondHeadOnTheSamePortOrStateRefusesToServeAndSaysWhoHasIt) {
  const std::string head_port = cluster_->head_address().substr(
      cluster_->head_address().rfind(':') + 1);
  {
    // Same port, its own state: the port is taken.
    std::vector<std::string> argv =
        cluster_->HeadCommand(cluster_->head_address(), cluster_->dir() + "/second.port");
    const auto state_dir = std::find(argv.begin(), argv.end(), "--state-dir");
    ASSERT_NE(state_dir, argv.end());
    argv.erase(state_dir, state_dir + 2);
    ChildProcess second(argv, cluster_->dir() + "/second-port.log");
    const std::optional<int> status = second.WaitFor(seconds(10));
    ASSERT_TRUE(status.has_value()) << "a second head serves on the first one's port";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
    const std::string log = ReadFileOrEmpty(cluster_->dir() + "/second-port.log");
    EXPECT_THAT(log, HasSubstr(cluster_->head_address()));
    EXPECT_THAT(log, HasSubstr("in use by pid " + std::to_string(cluster_->head_pid()) +
                               " (berth-head)"));
  }
  {
    // Same state directory, another port: the state is held.
    ChildProcess second(cluster_->HeadCommand("127.0.0.1:0", cluster_->dir() + "/second.port"),
                        cluster_->dir() + "/second-state.log");
    const std::optional<int> status = second.WaitFor(seconds(10));
    ASSERT_TRUE(status.has_value()) << "a second head serves on the first one's state";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
    const std::string log = ReadFileOrEmpty(cluster_->dir() + "/second-state.log");
    EXPECT_THAT(log, HasSubstr("is held by another head (berth-head pid " +
                               std::to_string(cluster_->head_pid()) + " serving "));
  }
  // The first head serves on, every call answered by it.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Nodes(*cluster_).size(), 2u);
}

TEST_F(HeadFaultTest, AJobThatEndsWhileItsHeadIsDownShowsItsLastStepAndCheckpoint) {
  v1::TrainJobSpec spec = GpuJob(2);
  spec.mutable_failure_config()->set_max_failures(0);
  // Rank 0 reports a step and a checkpoint every 0.2 s up to step 20; both
  // ranks end about 4 s in.
  SetCommand(&spec,
             {"/bin/sh", "-c",
              "if [ \"$RANK\" = 0 ]; then for i in $(seq 1 20); do "
              "echo \"{\\\"step\\\": $i, \\\"metrics\\\": {\\\"loss\\\": 0.5}, "
              "\\\"checkpoint\\\": \\\"$BERTH_JOB_ID/step-$i\\\"}\" >> \"$BERTH_REPORT_FILE\"; "
              "sleep 0.2; done; else sleep 4; fi"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitUntil([&] { return Get(id).last_step() >= 2; }, seconds(20)));
  // Down before the job ends, back well after it did.
  cluster_->RestartHead(SIGKILL, seconds(8));
  const v1::TrainJobInfo done = WaitDone(id, seconds(60));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(done.failures(), 0u);
  EXPECT_EQ(done.last_step(), 20u);
  EXPECT_EQ(done.latest_checkpoint(), id + "/step-20");
}

}  // namespace
}  // namespace berth::testing
