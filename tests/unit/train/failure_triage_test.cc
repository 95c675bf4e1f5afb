// Failure triage: the cause of a failed attempt, and whether the job
// restarts, shrinks or fails, and is charged.
#include "train/failure_triage.h"

#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/train/worker_status_test_util.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

v1::FailureConfig MaxFailures(int max) {
  v1::FailureConfig config;
  config.set_max_failures(max);
  return config;
}

AttemptFailure ProcessFailure() { return {"rank 1 exited with code 1", false, "", false}; }
AttemptFailure NodeFailure(const std::string& dead_node = "") {
  return {"node n2 died (missed heartbeats)", true, dead_node, false};
}

v1::WorkerStatus Exit(const std::string& worker, int code, int64_t failed_us, int signal = 0) {
  return testing::ExitStatus("", worker, code, failed_us, signal);
}

// A group CREATED with bundle i on nodes[i].
JobWorld PlacedOn(const std::vector<std::string>& nodes, int64_t placed_ms = 1) {
  JobWorld world;
  v1::PlacementGroupInfo group;
  group.set_state(v1::PLACEMENT_GROUP_STATE_CREATED);
  group.set_placed_unix_ms(placed_ms);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    group.add_bundles();
    v1::BundleLocation* location = group.add_locations();
    location->set_bundle_index(i);
    location->set_node_id(nodes[i]);
    world.alive.insert(nodes[i]);
  }
  world.group = group;
  return world;
}

TEST(TriageFailureTest, AProcessFailureIsChargedAndRestartsUntilMaxFailures) {
  FailureVerdict verdict = TriageFailure(ProcessFailure(), MaxFailures(2), 1, false);
  EXPECT_EQ(verdict.action, FailureAction::kRestart);
  EXPECT_TRUE(verdict.charged);
  EXPECT_TRUE(verdict.back_off);  // a crash loop is not retried in a tight loop

  verdict = TriageFailure(ProcessFailure(), MaxFailures(2), 2, false);
  EXPECT_EQ(verdict.action, FailureAction::kFail);
  EXPECT_TRUE(verdict.charged);
}

TEST(TriageFailureTest, NegativeMaxFailuresRestartsForever) {
  EXPECT_EQ(TriageFailure(ProcessFailure(), MaxFailures(-1), 1000, false).action,
            FailureAction::kRestart);
}

TEST(TriageFailureTest, BerthsFaultsAreChargedUnlessCountNodeFailuresIsFalse) {
  EXPECT_TRUE(TriageFailure(NodeFailure(), MaxFailures(3), 0, false).charged);

  v1::FailureConfig config = MaxFailures(0);
  config.set_count_node_failures(false);
  const FailureVerdict verdict = TriageFailure(NodeFailure("n2"), config, 0, false);
  EXPECT_EQ(verdict.action, FailureAction::kRestart);
  EXPECT_FALSE(verdict.charged);
  // The job's own failures still count.
  EXPECT_EQ(TriageFailure(ProcessFailure(), config, 0, false).action, FailureAction::kFail);
}

TEST(TriageFailureTest, AnElasticJobShrinksUnchargedWhenANodeOfItWasDeclaredDead) {
  const FailureVerdict shrink = TriageFailure(NodeFailure("n2"), MaxFailures(0), 0, true);
  EXPECT_EQ(shrink.action, FailureAction::kShrink);
  EXPECT_FALSE(shrink.charged);
  // A node that did not die (bundles moved), or a fixed job: a failure.
  EXPECT_EQ(TriageFailure(NodeFailure(), MaxFailures(0), 0, true).action, FailureAction::kFail);
  EXPECT_EQ(TriageFailure(NodeFailure("n2"), MaxFailures(0), 0, false).action,
            FailureAction::kFail);
}

TEST(TriageFailureTest, AnUnhealthyGpuIsNeverChargedAndRestartsAtOnce) {
  v1::PlacementGroupInfo moving;
  moving.set_moving(true);
  moving.set_move_cause(v1::MOVE_CAUSE_UNHEALTHY_GPU);
  moving.set_moving_reason("GPU 2 of n1: XID 79, GPU has fallen off the bus");
  const AttemptFailure failure = GpuFailure(moving);
  EXPECT_EQ(failure.cause, "GPU 2 of n1: XID 79, GPU has fallen off the bus");
  // Not even with count_node_failures (Ray's default) and max_failures 0.
  const FailureVerdict verdict = TriageFailure(failure, MaxFailures(0), 0, false);
  EXPECT_EQ(verdict.action, FailureAction::kRestart);
  EXPECT_FALSE(verdict.charged);
  EXPECT_FALSE(verdict.back_off);
  EXPECT_EQ(TriageFailure(failure, MaxFailures(0), 0, true).action, FailureAction::kRestart);
}

TEST(TriageFailureTest, AFailedLaunchRestartsAfterABackoff) {
  AttemptFailure failure = ProcessFailure();
  failure.launch_failed = true;
  EXPECT_TRUE(TriageFailure(failure, MaxFailures(5), 0, false).back_off);
}

TEST(StartFailureTest, ABundleItsNodeLostIsBerthsFault) {
  const AttemptFailure lost = StartFailure(absl::NotFoundError("no bundle 1 of pg-1"));
  EXPECT_TRUE(lost.node_failure);
  EXPECT_TRUE(lost.launch_failed);
  EXPECT_EQ(lost.cause, "no bundle 1 of pg-1");
  EXPECT_FALSE(StartFailure(absl::InvalidArgumentError("bad argv")).node_failure);
}

TEST(FirstObservedFailureTest, TheEarliestErrorNotTheFirstReport) {
  const JobProcesses processes = {
      {"job-a0-r0", "n1"}, {"job-a0-r1", "n2"}, {"job-a0-r2", "n2"}, {"job-a0-trainer", "n1"}};
  const ProcessExits exits = {{"job-a0-r0", Exit("job-a0-r0", 1, 300)},
                              {"job-a0-r1", Exit("job-a0-r1", 0, 0)},
                              {"job-a0-r2", Exit("job-a0-r2", 0, 200, SIGSEGV)}};
  const std::string cause = FirstObservedFailure(processes, exits);
  EXPECT_THAT(cause, HasSubstr("rank 2 (job-a0-r2 on n2)"));
  EXPECT_THAT(cause, HasSubstr("killed by signal"));
  EXPECT_EQ(FirstObservedFailure(processes, {}), "a process of the attempt failed");
}

TEST(PlacementChangeTest, NamesWhyTheAttemptCannotRunWhereItStarted) {
  const std::set<std::string> nodes = {"n1", "n2"};
  JobWorld world = PlacedOn({"n1", "n2"}, 7);
  EXPECT_EQ(PlacementChange(world, nodes, 7, false), "");
  EXPECT_EQ(PlacementChange(world, nodes, 0, false), "");  // as found

  world.alive.erase("n2");
  EXPECT_EQ(PlacementChange(world, nodes, 7, false), "node n2 died (missed heartbeats)");
  world.alive.insert("n2");

  EXPECT_THAT(PlacementChange(world, nodes, 5, false), HasSubstr("placed again"));
  JobWorld moved = PlacedOn({"n1", "n3"}, 7);
  moved.alive.insert("n2");
  EXPECT_THAT(PlacementChange(moved, nodes, 7, false), HasSubstr("moved off node n2"));

  world.group->set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  world.group->set_pending_reason("no room");
  EXPECT_EQ(PlacementChange(world, nodes, 7, false), "the placement group lost bundles: no room");
  // An elastic job shrinks instead.
  EXPECT_EQ(PlacementChange(world, nodes, 7, true), "");

  world.group = absl::NotFoundError("gone");
  EXPECT_EQ(PlacementChange(world, nodes, 7, true), "the placement group is gone");
  world.group = absl::UnavailableError("the head did not answer");
  EXPECT_EQ(PlacementChange(world, nodes, 7, false), "");
}

}  // namespace
}  // namespace berth
