// Faults of the head itself under a running job (real head, raylets and
// worker processes): a head that stalls blames no node, a second head does
// not serve beside the first, and what a job reports while its head is away
// reaches the head once it is back. None of them costs the job anything.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "auth/head_epoch.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

using HeadFaultTest = TrainJobTest;

std::vector<v1::NodeInfo> Nodes(LocalCluster& cluster) {
  v1::ListNodesResponse listed;
  EXPECT_TRUE(cluster.nodes().ListNodes(Context().get(), {}, &listed).ok());
  return {listed.nodes().begin(), listed.nodes().end()};
}

// Paused for three liveness timeouts, or 15 s (the length the issue's
// acceptance asks for): every heartbeat of the time is missed, by the
// head's fault, not the nodes'.
class HeadPauseTest : public HeadFaultTest, public ::testing::WithParamInterface<int> {};

TEST_P(HeadPauseTest, AHeadPausedPastTheLivenessTimeoutDeclaresNoNodeDeadAndTheJobGoesOn) {
  v1::TrainJobSpec spec = GpuJob(4);  // both nodes
  spec.mutable_failure_config()->set_max_failures(0);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 8"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(15)));

  const milliseconds pause =
      GetParam() == 0 ? 3 * cluster_->liveness_timeout() : milliseconds(GetParam());
  ASSERT_EQ(kill(cluster_->head_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(pause);
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
  EXPECT_THAT(ReadFileOrEmpty(cluster_->dir() + "/head.log"),
              HasSubstr("the head did not run for"));
}

INSTANTIATE_TEST_SUITE_P(Lengths, HeadPauseTest, ::testing::Values(0, 15000),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("ThreeLivenessTimeouts")
                                                  : std::string("FifteenSeconds");
                         });

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

TEST_F(HeadFaultTest, ASecondHeadOnThePortExitsAndOneOnTheStateOnlyStandsBy) {
  const std::string head_port =
      cluster_->head_address().substr(cluster_->head_address().rfind(':') + 1);
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
    EXPECT_THAT(
        log, HasSubstr("in use by pid " + std::to_string(cluster_->head_pid()) + " (berth-head)"));
  }
  {
    // Same state directory, another port: the state is held, so it only
    // stands by, answering every call UNAVAILABLE with the holder's name.
    const std::string port_file = cluster_->dir() + "/second.port";
    ChildProcess second(cluster_->HeadCommand("127.0.0.1:0", port_file),
                        cluster_->dir() + "/second-state.log");
    const std::string port = ReadPortFile(port_file, seconds(10));
    ASSERT_FALSE(port.empty()) << ReadFileOrEmpty(cluster_->dir() + "/second-state.log");
    auto alone = v1::NodeService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials()));
    v1::ListNodesResponse listed;
    const grpc::Status s = alone->ListNodes(Context().get(), {}, &listed);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(), HasSubstr("is held by another head (berth-head pid " +
                                             std::to_string(cluster_->head_pid()) + " serving " +
                                             cluster_->head_address() + ")"));
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

// A head and its standby on one state directory; the raylets and the stubs
// know both addresses.
class FailoverTest : public TrainJobTest {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    cluster_->AddStandbyHead();
    cluster_->AddRaylet({"n0", 2, "A10G", 8, "32Gi"});
    hold_commits_ = cluster_->dir() + "/hold-commits";
    cluster_->AddRaylet({"n1", 2, "A10G", 8, "32Gi", "", {"--hold-commits-file", hold_commits_}});
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const char* log : {"/head.log", "/standby.log", "/n0.log", "/n1.log"}) {
        std::cerr << log << ":\n" << ReadFileOrEmpty(cluster_->dir() + log) << "\n";
      }
    }
  }

  std::string hold_commits_;  // n1 holds its commits while this file exists
};

TEST_F(FailoverTest, AStandbyAnswersEveryCallUnavailableNamingTheActiveHead) {
  const std::string addresses = cluster_->head_address();
  const std::string active = addresses.substr(0, addresses.find(','));
  const std::string standby = addresses.substr(addresses.find(',') + 1);
  EXPECT_EQ(ActiveHead().address(), active);
  EXPECT_EQ(ActiveHead().epoch(), 1u);
  auto alone =
      v1::ClusterService::NewStub(grpc::CreateChannel(standby, grpc::InsecureChannelCredentials()));
  v1::GetClusterStatusResponse status;
  grpc::Status s = alone->GetClusterStatus(Context().get(), {}, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("this head is a standby"));
  EXPECT_THAT(s.error_message(), HasSubstr("serving " + active));
}

TEST_F(FailoverTest, AStandbyTakesOverAndARunningJobGoesOnAtItsAttempt) {
  v1::TrainJobSpec spec = GpuJob(4);
  spec.mutable_failure_config()->set_max_failures(0);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 8"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(15)));

  cluster_->KillHead(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return ActiveHead().epoch() == 2; }, seconds(10)))
      << "no head answered as the new active one";
  const auto answered = std::chrono::steady_clock::now();
  EXPECT_LT(answered - killed, seconds(10));
  const std::string addresses = cluster_->head_address();
  EXPECT_EQ(ActiveHead().address(), addresses.substr(addresses.find(',') + 1));

  const v1::TrainJobInfo done = WaitDone(id, seconds(60));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(done.attempt(), 0u);
  EXPECT_EQ(done.failures(), 0u);
  for (const v1::NodeInfo& node : Nodes(*cluster_)) EXPECT_EQ(node.state(), v1::NODE_STATE_ALIVE);

  // The raylets follow the new head: a call of the old epoch is refused.
  ASSERT_TRUE(WaitUntil(
      [&] {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + seconds(2));
        AttachHeadEpoch(&context, 1);
        v1::ListWorkersResponse workers;
        grpc::Status s = cluster_->raylet("n0").ListWorkers(&context, {}, &workers);
        return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
               s.error_message().find("a newer head (epoch 2)") != std::string::npos;
      },
      seconds(5)));
}

// Killed between the two phases: n0 has committed the gang's bundles, n1
// has prepared them and commits only once the head is dead (a commit the
// dead head never learns of). The new head finds the gang not placed,
// releases what the raylets hold for it, and places it again: the job runs
// at its first attempt and nothing stays reserved.
TEST_F(FailoverTest, AHeadKilledInTheMiddleOfATwoPhaseCommitLeavesNothingReservedTwice) {
  { std::ofstream(hold_commits_) << "x"; }
  v1::TrainJobSpec spec = GpuJob(4);  // both nodes
  spec.mutable_failure_config()->set_max_failures(0);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 2"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFileOrEmpty(cluster_->dir() + "/n1.log").find("holding commits") !=
               std::string::npos;
      },
      seconds(20)));
  cluster_->KillHead(SIGKILL);
  std::remove(hold_commits_.c_str());
  ASSERT_TRUE(WaitUntil([&] { return ActiveHead().epoch() == 2; }, seconds(10)));

  ExpectSucceededAtFirstAttempt(id, seconds(60));
}

// Killed while a preemption is under way: the victim has been told to stop
// (it takes a second to) when the head dies. The new head finishes it as
// the old one would have: the high-priority job runs once the victim's
// processes are gone, the victim runs again after it, and neither counts a
// failure.
TEST_F(FailoverTest, AHeadKilledDuringAPreemptionLetsBothJobsEndAsTheyWouldHave) {
  const std::string mark = cluster_->dir() + "/ran-";
  v1::TrainJobSpec low = GpuJob(4);
  low.mutable_failure_config()->set_max_failures(0);
  // Its first attempt runs until stopped; the next ends at once.
  SetCommand(&low, {"/bin/sh", "-c",
                    "m=" + mark +
                        "$RANK; if [ -e $m ]; then exit 0; fi; touch $m; "
                        "trap 'sleep 1; exit 0' TERM; sleep 60 & wait"});
  const std::string victim = Submit(low);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(victim).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(15)));

  v1::TrainJobSpec high = GpuJob(4);
  high.set_priority(10);
  high.mutable_failure_config()->set_max_failures(0);
  SetCommand(&high, {"/bin/sh", "-c", "sleep 2"});
  const std::string winner = Submit(high);
  ASSERT_TRUE(WaitUntil([&] { return Get(victim).preemptions() == 1; }, seconds(15)))
      << Get(victim).DebugString();
  cluster_->KillHead(SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return ActiveHead().epoch() == 2; }, seconds(10)));

  const v1::TrainJobInfo won = WaitDone(winner, seconds(60));
  EXPECT_EQ(won.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << won.message();
  EXPECT_EQ(won.attempt(), 0u);
  const v1::TrainJobInfo resumed = WaitDone(victim, seconds(60));
  EXPECT_EQ(resumed.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << resumed.message();
  EXPECT_EQ(resumed.failures(), 0u);
  EXPECT_EQ(resumed.preemptions(), 1u);
}

}  // namespace
}  // namespace berth::testing
