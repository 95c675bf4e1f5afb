// JobReconciler: a train job's life driven by hand, without threads, clocks
// or RPCs: each test is the time, the world and the results of the actions.
#include "train/job_reconciler.h"

#include <csignal>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/train/job_reconciler_fixture.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST_F(JobReconcilerTest, ANewJobCreatesItsGroupRunsAndSucceeds) {
  New(BuiltinSpec(4));
  CreateGroup create = Expect<CreateGroup>(Step());
  EXPECT_EQ(create.meta.job_id(), kJob);
  EXPECT_EQ(create.meta.request_id(), "job-1/pg");
  EXPECT_EQ(create.spec.bundles().size(), 4u);
  Result(GroupCreated{std::string(kGroup)});
  EXPECT_EQ(job_->info().placement_group_id(), kGroup);

  group_ = Created({"n0", "n0", "n1", "n1"});
  alive_ = {"n0", "n1"};
  JobStep port_step = Step();
  EXPECT_TRUE(port_step.persist);  // STARTING is written
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_STARTING);
  EXPECT_EQ(Expect<AllocatePort>(port_step).node_id, "n0");
  Result(PortAllocated{std::make_pair(std::string("10.0.0.1"), uint16_t{29500})});
  StartProcesses start = Expect<StartProcesses>(Step());
  // Rank 0's node first, the trainer first on it.
  ASSERT_EQ(start.by_node.size(), 2u);
  EXPECT_EQ(start.by_node[0].first, "n0");
  EXPECT_EQ(start.by_node[0].second[0].worker_id(), Worker(0, "trainer"));
  EXPECT_EQ(job_->info().master_address(), "10.0.0.1:29500");
  EXPECT_EQ(job_->info().workers_size(), 4);
  JobProcesses started;
  for (const auto& [node, workers] : start.by_node) {
    for (const v1::WorkerSpec& w : workers) started[w.worker_id()] = node;
  }
  Result(ProcessesStarted{absl::OkStatus(), started});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);

  // Running: nothing to do until an event, or the next look at the raylets.
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(2));
  for (int r = 0; r < 4; ++r) job_->OnWorkerExit(Exit(Worker(0, absl::StrCat("r", r)), 0));
  // The ranks are done; the built-in trainer gets a moment to finish.
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(3));
  job_->OnWorkerExit(Exit(Worker(0, "trainer"), 0));
  StopAndExit();
  JobStep remove = Step();
  EXPECT_EQ(Expect<RemoveGroup>(remove).placement_group_id, kGroup);
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);  // until the group is gone
  // The end is written before the group goes, for a head restarted meanwhile.
  EXPECT_TRUE(remove.persist);
  EXPECT_EQ(job_->Record().ending_state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(job_->done());
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_EQ(job_->Record().ending_state(), v1::TRAIN_JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(job_->Record().info().state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
}

TEST_F(JobReconcilerTest, APendingJobSaysWhyAndLooksAgainLessOften) {
  New(BuiltinSpec(2));
  Expect<CreateGroup>(Step());
  Result(GroupCreated{std::string(kGroup)});
  v1::PlacementGroupInfo pending;
  pending.set_placement_group_id(kGroup);
  pending.set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  pending.set_infeasible(true);
  pending.set_pending_reason("no node has 2 GPU");
  group_ = pending;
  absl::Duration previous;
  for (int i = 0; i < 12; ++i) {
    const absl::Duration wait = Waits(Step()) - now_;
    if (i > 0) {
      EXPECT_GE(wait, previous);
    }
    EXPECT_LE(wait, absl::Seconds(30));
    previous = wait;
  }
  EXPECT_EQ(previous, absl::Seconds(30));
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_EQ(job_->info().message(), "waiting for placement (infeasible): no node has 2 GPU");
  // A stop ends it without starting anything.
  EXPECT_TRUE(job_->RequestStop());
  EXPECT_FALSE(job_->RequestStop());
  Expect<RemoveGroup>(Step());
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_STOPPED);
}

TEST_F(JobReconcilerTest, TheCauseIsTheFirstFailureByTimeAndTheJobRestartsFromItsCheckpoint) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(1);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  EXPECT_FALSE(ReportCheckpoint(50));  // progress alone is not an event to act on
  // Rank 0 reports first, but rank 1 failed earlier (its raylet knows, its
  // report has not come): rank 1 is the cause, and the rest are stopped at
  // once.
  job_->OnWorkerExit(Exit(Worker(0, "r0"), 1, /*failed_us=*/2000));
  ListWorkers probe = Expect<ListWorkers>(Step());
  EXPECT_THAT(probe.nodes, ElementsAre("n0", "n1"));  // nodes of processes with no exit
  WorkersListed listed = Listing(probe.nodes, processes);
  v1::WorkerStatus* r1 = listed.by_node.at("n1")->mutable_workers(0);
  ASSERT_EQ(r1->worker_id(), Worker(0, "r1"));
  *r1 = Exit(Worker(0, "r1"), 3, /*failed_us=*/1000);
  Result(std::move(listed));
  AwaitNoGpuFault();
  StopAndExit();
  JobStep restart = Step();
  EXPECT_TRUE(restart.restarted);
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_EQ(job_->info().failures(), 1u);
  ASSERT_EQ(job_->info().failure_causes_size(), 1);
  EXPECT_THAT(job_->info().failure_causes(0),
              HasSubstr("rank 1 (job-1-a0-r1 on n1) exited with code 3"));

  // A failure of the job's own processes backs off (1 s the first time),
  // then the next attempt (number 1) starts from the latest checkpoint.
  EXPECT_THAT(job_->info().message(), ::testing::StartsWith("restarting in 1s after: rank 1"));
  EXPECT_EQ(Waits(restart), now_ + absl::Seconds(1));
  now_ += absl::Seconds(1);
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n0");
  ExpectResumeFrom("/ckpt/step-50.pt");
  JobProcesses second = {
      {Worker(1, "trainer"), "n0"}, {Worker(1, "r0"), "n0"}, {Worker(1, "r1"), "n1"}};
  Result(ProcessesStarted{absl::OkStatus(), second});
  EXPECT_EQ(job_->info().attempt(), 1u);
  // Logs: the failed attempt's ranks stay readable beside the new ones.
  std::vector<std::string> logged;
  for (const RankLog& l : job_->logs()) logged.push_back(l.worker_id);
  EXPECT_THAT(logged,
              ElementsAre(Worker(0, "r0"), Worker(0, "r1"), Worker(1, "r0"), Worker(1, "r1")));
  // A second failure is over max_failures (1).
  job_->OnWorkerExit(Exit(Worker(1, "trainer"), 0, 0, SIGKILL));
  Result(Listing(Expect<ListWorkers>(Step()).nodes, second));
  AwaitNoGpuFault();
  StopAndExit();  // every node answered: the ranks are stopped then
  Expect<RemoveGroup>(Step());
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_FAILED);
  EXPECT_THAT(job_->info().message(), HasSubstr("failed: the trainer"));
  EXPECT_THAT(job_->info().message(), HasSubstr("was killed by signal 9"));
}

TEST_F(JobReconcilerTest, APreemptedJobStopsLetsGoOfItsGroupAndResumesWithoutAFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  ReportCheckpoint(50);
  const std::string why = "preempted by job job-2 of queue team-b (reclaim)";
  group_->set_preempting(true);
  group_->set_preempted_by(why);
  // Its processes are stopped (SIGTERM, then the grace period): the job is
  // PENDING with the reason while they checkpoint and exit.
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes, processes);
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_EQ(job_->info().message(), why);
  std::vector<std::string> awaited;
  for (const auto& [worker, node] : stop.processes) awaited.push_back(worker);
  Result(StopsSent{awaited});
  for (const std::string& w : awaited) job_->OnWorkerExit(Exit(w, 0, 0, SIGTERM));
  // Then its group lets go; a group in two-phase commit is asked again.
  EXPECT_EQ(Expect<ReleaseGroup>(Step()).placement_group_id, kGroup);
  Result(GroupReleased{absl::FailedPreconditionError("in two-phase commit")});
  now_ = Waits(Step());
  Expect<ReleaseGroup>(Step());
  Result(GroupReleased{absl::OkStatus()});
  group_->set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  group_->set_preempting(false);
  group_->set_pending_reason(absl::StrCat(why, "; waiting to be admitted again"));
  Waits(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_THAT(job_->info().message(), HasSubstr(why));
  // Placed again: the next attempt resumes from the checkpoint, and the
  // preemption is not a failure (max_failures 0 would have ended the job).
  group_ = Created({"n1", "n0"}, 7);
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n1");
  ExpectResumeFrom("/ckpt/step-50.pt");
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_EQ(job_->info().preemptions(), 1u);
  EXPECT_EQ(job_->info().failure_causes_size(), 0);
}

TEST_F(JobReconcilerTest, AGroupPreemptedBeforeItsProcessesStartLetsGoAtOnce) {
  New(BuiltinSpec(1));
  Expect<CreateGroup>(Step());
  Result(GroupCreated{std::string(kGroup)});
  group_ = Created({"n0"});
  group_->set_preempting(true);
  group_->set_preempted_by("preempted by job job-2 of queue team-b (priority)");
  Expect<ReleaseGroup>(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_EQ(job_->info().preemptions(), 1u);
}

TEST_F(JobReconcilerTest, ANodeThatStopsAnsweringIsWaitedForAndItsDeathIsTheCause) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  spec.mutable_failure_config()->set_count_node_failures(false);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  // n1's raylet is gone: its rank cannot report; rank 0 fails of the
  // broken connection.
  FailRankZeroWithN1Silent(processes, 1, absl::UnavailableError("connection refused"));
  // Rank 1 is on the unreachable node: no settling for it; n1 has up to
  // node_dead_after to be declared DEAD.
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(5));
  now_ += absl::Seconds(1);
  alive_.erase("n1");  // declared DEAD
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes, processes);
  Result(StopsSent{{Worker(0, "trainer")}});  // only n0's are waited for
  job_->OnWorkerExit(Exit(Worker(0, "trainer"), 0, 0, SIGTERM));
  group_->set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);  // lost n1's bundle
  Waits(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_THAT(job_->info().failure_causes(0), HasSubstr("node n1 died (missed heartbeats)"));
  EXPECT_EQ(job_->info().failures(), 0u);  // count_node_failures: false
}

TEST_F(JobReconcilerTest, AnUnreachableNodeThatComesBackLeavesTheProcessFailureAsTheCause) {
  New(BuiltinSpec(2));
  JobProcesses processes = Run({"n0", "n1"});
  FailRankZeroWithN1Silent(processes, 7, absl::DeadlineExceededError("slow"));
  const absl::Time deadline = Waits(Step());
  now_ = deadline;  // n1 was never declared DEAD
  Expect<StopProcesses>(Step());
  Result(StopsSent{});
  Step();
  EXPECT_THAT(job_->info().failure_causes(0),
              HasSubstr("rank 0 (job-1-a0-r0 on n0) exited with code 7"));
  EXPECT_EQ(job_->info().failures(), 1u);
}

// min 2 / max 3: starts with 2, grows at the checkpoint after its elastic
// group is placed, shrinks without a failure when that node dies.
TEST_F(JobReconcilerTest, AnElasticJobGrowsAtACheckpointAndShrinksWhenItsNodeDies) {
  v1::TrainJobSpec spec = BuiltinSpec(3);
  spec.mutable_scaling_config()->set_min_workers(2);
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  CreateGroup core = Expect<CreateGroup>(Step());
  EXPECT_EQ(core.spec.bundles().size(), 2u);
  Result(GroupCreated{std::string(kGroup)});
  v1::PlacementGroupInfo waiting;
  waiting.set_placement_group_id(kGroup);
  waiting.set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  group_ = waiting;
  Waits(Step());  // no elastic group while the job's own waits
  // The job's group placed: its elastic group is made, and it starts with the 2 it has.
  group_ = Created({"n0", "n1"});
  alive_ = {"n0", "n1"};
  CreateGroup extra = Expect<CreateGroup>(Step());
  EXPECT_EQ(extra.spec.bundles().size(), 1u);
  EXPECT_EQ(extra.meta.request_id(), "job-1/pg/e0/a0");
  Result(GroupCreated{std::string("pg-e0")});
  ASSERT_THAT(job_->info().elastic_group_ids(), ElementsAre("pg-e0"));
  elastic_["pg-e0"] = absl::StatusOr<v1::PlacementGroupInfo>(v1::PlacementGroupInfo());  // PENDING
  JobProcesses started = Launch("n0");
  ASSERT_EQ(job_->info().workers_size(), 2);

  // The third worker's group is placed on n2: it waits for a checkpoint.
  v1::PlacementGroupInfo placed = Created({"n2"});
  placed.set_placement_group_id("pg-e0");
  elastic_["pg-e0"] = placed;
  alive_.insert("n2");
  Waits(Step());
  ReportCheckpoint(10);
  StopAndExit();
  EXPECT_EQ(Waits(Step()), now_);  // the restart yields
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_THAT(job_->info().message(), HasSubstr("resizing: 1 more worker(s) placed"));
  StartProcesses start;
  started = Launch("n0", &start);
  ASSERT_EQ(job_->info().workers_size(), 3);
  const v1::WorkerRank& third = job_->info().workers(2);
  EXPECT_EQ(third.node_id(), "n2");
  EXPECT_EQ(third.placement_group_id(), "pg-e0");
  ASSERT_EQ(job_->info().resizes_size(), 1);
  EXPECT_EQ(job_->info().resizes(0).from(), 2u);
  EXPECT_EQ(job_->info().resizes(0).to(), 3u);
  for (const auto& [node, workers] : start.by_node) {
    for (const v1::WorkerSpec& w : workers) {
      if (w.worker_id() != Worker(1, "r2")) continue;
      EXPECT_EQ(w.placement_group_id(), "pg-e0");
      EXPECT_EQ(w.env().at("WORLD_SIZE"), "3");
    }
  }

  // n2 dies: the job shrinks back to 2 instead of counting a failure.
  alive_.erase("n2");
  v1::PlacementGroupInfo lost;
  lost.set_placement_group_id("pg-e0");
  lost.set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  elastic_["pg-e0"] = lost;
  now_ += absl::Seconds(3);
  ListWorkers look = Expect<ListWorkers>(Step());  // the periodic look first
  Result(Listing(look.nodes, started));
  StopAndExit();
  EXPECT_EQ(Waits(Step()), now_);
  Expect<AllocatePort>(Step());
  EXPECT_EQ(job_->info().failures(), 0u);
  ASSERT_EQ(job_->info().resizes_size(), 2);
  EXPECT_EQ(job_->info().resizes(1).to(), 2u);
  EXPECT_THAT(job_->info().resizes(1).reason(), HasSubstr("node n2 died"));

  // The job's own group loses a bundle: its elastic group goes while it waits.
  group_ = waiting;
  group_->set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  Result(PortAllocated{absl::UnavailableError("rank 0's node is gone")});
  for (int i = 0; i < 8 && !job_->info().elastic_group_ids().empty(); ++i) {
    JobStep step = Step();
    if (!step.action) {
      now_ = std::max(now_, step.wake_at);
      continue;
    }
    if (std::holds_alternative<RemoveGroup>(*step.action)) {
      EXPECT_EQ(std::get<RemoveGroup>(*step.action).placement_group_id, "pg-e0");
      Result(GroupRemoved{});
    } else if (std::holds_alternative<ListWorkers>(*step.action)) {
      Result(Listing(std::get<ListWorkers>(*step.action).nodes, {}));
    } else if (std::holds_alternative<StopProcesses>(*step.action)) {
      Result(StopsSent{});
    }
  }
  EXPECT_THAT(job_->info().elastic_group_ids(), IsEmpty());
}

// min 2 / max 3 on n0, n1 (the job's group) and n2 (its elastic group): n1
// dies, and the job goes on with rank 0's bundle and the elastic worker
// instead of waiting or counting a failure; bundle 1 placed again on n3
// grows it back at the next checkpoint.
TEST_F(JobReconcilerTest, AnElasticJobThatLosesABundleOfItsOwnGroupShrinksToWhatIsLeft) {
  JobProcesses started = RunElasticOnThreeNodes();
  ASSERT_EQ(job_->info().workers_size(), 3);

  // n1 dies: the head keeps bundle 0 on n0 and reschedules bundle 1.
  alive_.erase("n1");
  v1::PlacementGroupInfo rescheduling = Created({"n0", "n1"});
  rescheduling.set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  rescheduling.mutable_locations()->RemoveLast();
  group_ = rescheduling;
  now_ += absl::Seconds(3);
  ListWorkers look = Expect<ListWorkers>(Step());
  Result(Listing(look.nodes, started));
  StopAndExit();
  EXPECT_EQ(Waits(Step()), now_);  // the restart yields
  StartProcesses start;
  started = Launch("n0", &start);
  EXPECT_EQ(job_->info().failures(), 0u);  // max_failures 0 would have ended it
  ASSERT_EQ(job_->info().workers_size(), 2);
  EXPECT_EQ(job_->info().workers(0).node_id(), "n0");
  EXPECT_EQ(job_->info().workers(0).bundle_index(), 0u);
  EXPECT_EQ(job_->info().workers(1).node_id(), "n2");
  EXPECT_EQ(job_->info().workers(1).placement_group_id(), "pg-e0");
  ASSERT_EQ(job_->info().resizes_size(), 1);
  EXPECT_EQ(job_->info().resizes(0).from(), 3u);
  EXPECT_EQ(job_->info().resizes(0).to(), 2u);
  EXPECT_THAT(job_->info().resizes(0).reason(), HasSubstr("node n1 died"));
  for (const auto& [node, workers] : start.by_node) {
    for (const v1::WorkerSpec& w : workers) {
      if (w.worker_id() == Worker(1, "r1")) {
        EXPECT_EQ(w.env().at("WORLD_SIZE"), "2");
      }
    }
  }
  // Still RESCHEDULING: the attempt runs on.
  now_ += absl::Seconds(3);
  look = Expect<ListWorkers>(Step());
  Result(Listing(look.nodes, started));
  Waits(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);

  // Bundle 1 is placed again on n3: the job grows back at its next checkpoint.
  group_ = Created({"n0", "n3"}, /*placed_ms=*/5);
  alive_.insert("n3");
  Waits(Step());
  ReportCheckpoint(20);
  StopAndExit();
  EXPECT_EQ(Waits(Step()), now_);
  Launch("n0");
  ASSERT_EQ(job_->info().workers_size(), 3);
  EXPECT_EQ(job_->info().failures(), 0u);
  ASSERT_EQ(job_->info().resizes_size(), 2);
  EXPECT_EQ(job_->info().resizes(1).to(), 3u);
  EXPECT_THAT(job_->info().resizes(1).reason(), HasSubstr("1 more worker(s) placed"));
}

// Rank 0's node lost: the job waits for bundle 0 (its elastic groups go,
// so they hold nothing meanwhile), without counting a failure.
TEST_F(JobReconcilerTest, AnElasticJobThatLosesRankZerosNodeWaitsForItWithoutAFailure) {
  JobProcesses started = RunElasticOnThreeNodes();

  alive_.erase("n0");
  v1::PlacementGroupInfo rescheduling = Created({"n0", "n1"});
  rescheduling.set_state(v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  rescheduling.mutable_locations()->erase(rescheduling.mutable_locations()->begin());
  group_ = rescheduling;
  now_ += absl::Seconds(3);
  ListWorkers look = Expect<ListWorkers>(Step());
  Result(Listing(look.nodes, started));
  StopAndExit();
  EXPECT_EQ(Waits(Step()), now_);
  EXPECT_EQ(Expect<RemoveGroup>(Step()).placement_group_id, "pg-e0");
  Result(GroupRemoved{});
  elastic_.clear();
  Waits(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RESTARTING);
  EXPECT_EQ(job_->info().failures(), 0u);
  EXPECT_THAT(job_->info().message(), HasSubstr("waiting for placement"));
}

TEST_F(JobReconcilerTest, ALostNodeOrAPlacementMadeAgainEndsTheAttempt) {
  New(BuiltinSpec(2));
  JobProcesses processes = Run({"n0", "n1"});
  group_ = Created({"n0", "n2"}, /*placed_ms=*/99);  // placed again after n1 was lost
  alive_.insert("n2");
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes, processes);
  Result(StopsSent{});
  Step();
  EXPECT_THAT(job_->info().failure_causes(0), HasSubstr("bundles were placed again"));
}

TEST_F(JobReconcilerTest, AJobWhoseGroupIsGoneMakesANewOne) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  // A head restarted after removing the group, before the job's end was
  // written: the group is unknown.
  group_ = absl::NotFoundError("placement_group_id: no placement group 'pg-1'");
  EXPECT_EQ(Expect<StopProcesses>(Step()).processes, processes);
  Result(StopsSent{});
  EXPECT_EQ(Waits(Step()), now_);  // a failure of berth's restarts at once: it yields
  CreateGroup again = Expect<CreateGroup>(Step());
  EXPECT_EQ(again.meta.request_id(), "job-1/pg/a1");  // not the first group's
  EXPECT_THAT(job_->info().failure_causes(0), HasSubstr("the placement group is gone"));
  Result(GroupCreated{std::string("pg-2")});
  EXPECT_EQ(job_->info().placement_group_id(), "pg-2");
  group_ = Created({"n0", "n1"});
  group_->set_placement_group_id("pg-2");
  EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, "n0");
}

TEST_F(JobReconcilerTest, AStopEndsTheProcessesThenTheGroup) {
  New(BuiltinSpec(2));
  JobProcesses processes = Run({"n0", "n1"});
  EXPECT_TRUE(job_->RequestStop());
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes, processes);
  EXPECT_EQ(stop.grace, absl::Seconds(30));  // the head's default
  Result(StopsSent{{Worker(0, "r0")}});
  // It waits (bounded: grace + 3 s) for the processes on live nodes.
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(33));
  now_ += absl::Seconds(33);
  Expect<RemoveGroup>(Step());
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_STOPPED);
  EXPECT_EQ(job_->info().message(), "stopped");
}

TEST_F(JobReconcilerTest, AGroupThatCannotBeCreatedFailsTheJobAndNamesWhy) {
  New(BuiltinSpec(2));
  Expect<CreateGroup>(Step());
  Result(GroupCreated{absl::ResourceExhaustedError("10000 groups are pending")});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_FAILED);
  EXPECT_EQ(job_->info().message(), "creating the placement group: 10000 groups are pending");
  EXPECT_TRUE(job_->done());
  EXPECT_FALSE(Step().action.has_value());
}

TEST_F(JobReconcilerTest, AFailedLaunchStopsWhatStartedAndCountsAFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  UpToTheLaunch(spec);
  Result(ProcessesStarted{absl::UnavailableError("starting job-1-a0-r1 on n1: refused"),
                          {{Worker(0, "trainer"), "n0"}}});
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_THAT(stop.processes, ElementsAre(Pair(Worker(0, "trainer"), "n0")));
  Result(StopsSent{});
  // Then which of the group's nodes still answer.
  ListWorkers probe = Expect<ListWorkers>(Step());
  EXPECT_THAT(probe.nodes, ElementsAre("n0", "n1"));
  Result(Listing(probe.nodes, {}));
  Expect<RemoveGroup>(Step());
  Result(GroupRemoved{});
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_FAILED);
  EXPECT_EQ(job_->info().message(), "failed: starting job-1-a0-r1 on n1: refused");
}

// A raylet that does not hold a bundle of the group answers NOT_FOUND (the
// head places the bundle again): a node's failure, not the job's.
TEST_F(JobReconcilerTest, ALaunchOnABundleItsNodeLostCountsAsANodeFailure) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(0);
  spec.mutable_failure_config()->set_count_node_failures(false);
  UpToTheLaunch(spec);
  Result(ProcessesStarted{absl::NotFoundError("starting job-1-a0-r1 on n1: spec.bundle_index: "
                                              "bundle 1 is not held on this node"),
                          {{Worker(0, "trainer"), "n0"}}});
  Expect<StopProcesses>(Step());
  Result(StopsSent{});
  ListWorkers probe = Expect<ListWorkers>(Step());
  Result(Listing(probe.nodes, {}));
  Step();
  EXPECT_NE(job_->info().state(), v1::TRAIN_JOB_STATE_FAILED) << job_->info().DebugString();
  EXPECT_EQ(job_->info().failures(), 0u);
  ASSERT_EQ(job_->info().failure_causes_size(), 1);
  EXPECT_THAT(job_->info().failure_causes(0), HasSubstr("is not held on this node"));
}

TEST_F(JobReconcilerTest, AttemptsWhoseLaunchFailsAreRetriedWithBackoffNotInALoop) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  Expect<CreateGroup>(Step());
  Result(GroupCreated{std::string(kGroup)});
  // CREATED, but its bundles have no nodes to give ranks to.
  v1::PlacementGroupInfo unplaced = Created({"n0", "n1"});
  unplaced.clear_locations();
  group_ = unplaced;
  std::vector<absl::Duration> waits;
  for (int i = 0; i < 4; ++i) {
    JobStep step = Step();  // one attempt, then a wait
    ASSERT_FALSE(step.action.has_value());
    EXPECT_EQ(job_->info().failure_causes_size(), i + 1);
    waits.push_back(step.wake_at - now_);
    now_ = step.wake_at;
  }
  EXPECT_THAT(waits,
              ElementsAre(absl::Seconds(1), absl::Seconds(2), absl::Seconds(4), absl::Seconds(8)));
  group_ = Created({"n0", "n1"});
  Expect<AllocatePort>(Step());
}

TEST_F(JobReconcilerTest, ACommandJobsDriverIsTheRelayAndABuiltinJobsTheTrainer) {
  for (const bool command : {true, false}) {
    v1::TrainJobSpec spec = BuiltinSpec(2);
    if (command) spec.mutable_entrypoint()->mutable_command()->add_argv("/bin/true");
    StartProcesses start = UpToTheLaunch(spec);
    const v1::WorkerSpec& driver = start.by_node[0].second[0];
    EXPECT_EQ(driver.worker_id(), Worker(0, "trainer"));
    const std::vector<std::string> argv(driver.argv().begin(), driver.argv().end());
    // The relay loads no libtorch; only the built-in job's store needs it.
    if (command) {
      EXPECT_THAT(argv, ElementsAre("berth-relay", "--report-file", HasSubstr(kJob), "--world-size",
                                    "2", "--head", "127.0.0.1:1", "--job-id", kJob));
    } else {
      EXPECT_THAT(argv, ElementsAre("berth-worker", "trainer", "--world-size", "2",
                                    "--checkpoint-dir", HasSubstr(kJob), "--port", "1", "--head",
                                    "127.0.0.1:1", "--job-id", kJob));
    }
  }
}

TEST_F(JobReconcilerTest, ACommandJobWaitsForItsRelayBeforeItSucceeds) {
  v1::TrainJobSpec spec = BuiltinSpec(1);
  spec.mutable_entrypoint()->mutable_command()->add_argv("/bin/true");
  New(spec);
  Run({"n0"});
  job_->OnWorkerExit(Exit(Worker(0, "r0"), 0));
  EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(10));
  v1::ReportTrainProgressRequest report;
  report.set_job_id(kJob);
  EXPECT_TRUE(job_->OnProgress(now_, report));  // the job is due: its relay is up
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_EQ(stop.processes.count(Worker(0, "trainer")), 1u);
}

TEST_F(JobReconcilerTest, ARestoredRunningJobAsksItsRayletsForExitsItMissed) {
  v1::TrainJobInfo info;
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(2);
  info.set_state(v1::TRAIN_JOB_STATE_RUNNING);
  info.set_placement_group_id(kGroup);
  info.set_attempt(2);
  for (int r = 0; r < 2; ++r) {
    v1::WorkerRank* w = info.add_workers();
    w->set_world_rank(r);
    w->set_node_id(r == 0 ? "n0" : "n1");
    w->set_worker_id(Worker(2, absl::StrCat("r", r)));
  }
  job_.emplace(Restored(info));
  group_ = Created({"n0", "n1"});
  alive_ = {"n0", "n1"};
  EXPECT_EQ(job_->logs().size(), 2u);
  ListWorkers list = Expect<ListWorkers>(Step());
  EXPECT_THAT(list.nodes, ElementsAre("n0", "n1"));
  // n1's raylet restarted and no longer knows rank 1: it failed.
  Result(Listing(list.nodes, {{Worker(2, "r0"), "n0"}, {Worker(2, "trainer"), "n0"}}));
  ListWorkers probe = Expect<ListWorkers>(Step());
  Result(Listing(probe.nodes, {{Worker(2, "r0"), "n0"}, {Worker(2, "trainer"), "n0"}}));
  AwaitNoGpuFault();
  StopAndExit();
  Step();
  EXPECT_THAT(job_->info().failure_causes(0),
              HasSubstr("rank 1 (job-1-a2-r1 on n1) was killed by signal 9"));
  EXPECT_THAT(job_->info().failure_causes(0),
              HasSubstr("no longer knows it (the raylet restarted)"));
}

TEST_F(JobReconcilerTest, ARestoredHalfStartedJobStopsWhatRunsAndTakesANewAttemptNumber) {
  v1::TrainJobInfo info;
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(2);
  info.set_state(v1::TRAIN_JOB_STATE_STARTING);
  info.set_placement_group_id(kGroup);
  info.set_attempt(0);
  job_.emplace(Restored(info));
  group_ = Created({"n0", "n1"});
  alive_ = {"n0", "n1"};
  ListWorkers scan = Expect<ListWorkers>(Step());
  EXPECT_THAT(scan.nodes, ElementsAre("n0", "n1"));  // the group's nodes
  // The previous head had started attempt 3's trainer, unrecorded.
  Result(Listing(scan.nodes, {{Worker(3, "trainer"), "n0"}}));
  StopProcesses stop = Expect<StopProcesses>(Step());
  EXPECT_THAT(stop.processes, ElementsAre(Pair(Worker(3, "trainer"), "n0")));
  Result(StopsSent{{Worker(3, "trainer")}});
  job_->OnWorkerExit(Exit(Worker(3, "trainer"), 0, 0, SIGTERM));
  Expect<AllocatePort>(Step());
  Result(PortAllocated{std::make_pair(std::string("h"), uint16_t{1})});
  StartProcesses start = Expect<StartProcesses>(Step());
  EXPECT_EQ(start.by_node[0].second[0].worker_id(), Worker(4, "trainer"));
}

// A head killed while a job waited to restart (its restart backoff): the
// processes of the failed attempt, recorded, had exited, and are not
// waited for again (their exits were told to the previous head).
TEST_F(JobReconcilerTest, ARestoredRestartingJobDoesNotWaitForProcessesThatEnded) {
  v1::TrainJobInfo info;
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(2);
  info.set_state(v1::TRAIN_JOB_STATE_RESTARTING);
  info.set_placement_group_id(kGroup);
  info.set_attempt(0);
  for (const char* id : {"trainer", "r0", "r1"}) {
    v1::WorkerRank* w = info.add_workers();
    w->set_worker_id(Worker(0, id));
    w->set_node_id(id == std::string("r1") ? "n1" : "n0");
  }
  job_.emplace(Restored(info));
  group_ = Created({"n0", "n1"});
  alive_ = {"n0", "n1"};
  ListWorkers scan = Expect<ListWorkers>(Step());
  WorkersListed listed = Listing(scan.nodes, {{Worker(0, "r1"), "n1"}});
  *listed.by_node.at("n1")->mutable_workers(0) = Exit(Worker(0, "r1"), 0, 0, SIGTERM);
  Result(listed);  // n0 no longer has its two; n1's exited
  Expect<StopProcesses>(Step());
  Result(StopsSent{{Worker(0, "trainer"), Worker(0, "r0"), Worker(0, "r1")}});
  Expect<AllocatePort>(Step());  // at once: nothing of attempt 0 runs
}

// A head killed while a job was being preempted: the restored job, PENDING
// for that preemption, stops what runs and lets its group go, counting the
// preemption once.
TEST_F(JobReconcilerTest, ARestoredJobUnderAPreemptionCountsItOnce) {
  const std::string why = "preempted by job job-2 of queue default (priority)";
  v1::TrainJobInfo info;
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(1);
  info.set_state(v1::TRAIN_JOB_STATE_PENDING);
  info.set_message(why);
  info.set_preemptions(1);
  info.set_placement_group_id(kGroup);
  v1::WorkerRank* rank = info.add_workers();
  rank->set_node_id("n0");
  rank->set_worker_id(Worker(0, "r0"));
  job_.emplace(Restored(info));
  group_ = Created({"n0"});
  group_->set_preempting(true);
  group_->set_preempted_by(why);
  alive_ = {"n0"};
  // Attempt 0's processes, told to stop by the previous head, still end.
  ListWorkers scan = Expect<ListWorkers>(Step());
  Result(Listing(scan.nodes, {{Worker(0, "r0"), "n0"}, {Worker(0, "trainer"), "n0"}}));
  StopProcesses stop = Expect<StopProcesses>(Step());
  Result(StopsSent{{Worker(0, "r0"), Worker(0, "trainer")}});
  job_->OnWorkerExit(Exit(Worker(0, "r0"), 0, 0, SIGTERM));
  job_->OnWorkerExit(Exit(Worker(0, "trainer"), 0, 0, SIGTERM));
  Expect<ReleaseGroup>(Step());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_EQ(job_->info().preemptions(), 1u);
}

// A head killed after a job's end was decided, before its group was
// removed (or before the end was written): the restored job removes what
// is left and ends as decided, not "failed: the placement group is gone".
TEST_F(JobReconcilerTest, ARestoredJobWhoseEndWasDecidedRemovesItsGroupAndEndsSo) {
  v1::TrainJobRecord record;
  v1::TrainJobInfo& info = *record.mutable_info();
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(2);
  info.set_state(v1::TRAIN_JOB_STATE_RUNNING);
  info.set_placement_group_id(kGroup);
  info.add_workers()->set_worker_id(Worker(0, "r0"));
  record.set_ending_state(v1::TRAIN_JOB_STATE_SUCCEEDED);
  job_.emplace(JobReconciler::Restored(record, *PlacementGroupForJob(info.spec()), Options()));
  group_ = absl::NotFoundError("no group");  // removed before the head died
  EXPECT_EQ(Expect<RemoveGroup>(Step()).placement_group_id, kGroup);
  Result(GroupRemoved{});
  EXPECT_TRUE(job_->done());
  EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job_->info().failures(), 0u);
}

TEST_F(JobReconcilerTest, AFinishedRestoredJobIsOnlyListed) {
  v1::TrainJobInfo info;
  info.set_job_id(kJob);
  *info.mutable_spec() = BuiltinSpec(2);
  info.set_state(v1::TRAIN_JOB_STATE_SUCCEEDED);
  job_.emplace(Restored(info));
  EXPECT_TRUE(job_->done());
  EXPECT_FALSE(job_->RequestStop());
  EXPECT_FALSE(Step().action.has_value());
  EXPECT_THAT(job_->WatchedNodes(), IsEmpty());
}

// Every attempt's ranks stay readable (the latest kAttemptsWithLogs), and a
// restarted head still knows where they ran.
TEST_F(JobReconcilerTest, EveryAttemptsLogsAreKeptAcrossAHeadRestart) {
  v1::TrainJobSpec spec = BuiltinSpec(2);
  spec.mutable_failure_config()->set_max_failures(-1);
  New(spec);
  JobProcesses processes = Run({"n0", "n1"});
  for (int attempt = 0; attempt < 3; ++attempt) {
    now_ = Waits(FailRankZero(processes, attempt));
    processes = Launch("n0");
  }
  std::vector<std::pair<uint32_t, std::string>> logged;
  for (const RankLog& l : job_->logs()) logged.emplace_back(l.attempt, l.worker_id);
  ASSERT_EQ(logged.size(), 8u);  // 4 attempts x 2 ranks, oldest first
  EXPECT_EQ(logged.front(), std::make_pair(0u, Worker(0, "r0")));
  EXPECT_EQ(logged.back(), std::make_pair(3u, Worker(3, "r1")));

  const v1::TrainJobRecord record = job_->Record();
  ASSERT_EQ(record.past_attempts_size(), 3);  // the current one is the info's
  EXPECT_EQ(record.past_attempts(1).attempt(), 1u);
  EXPECT_EQ(record.past_attempts(1).workers(1).worker_id(), Worker(1, "r1"));
  EXPECT_EQ(record.past_attempts(1).workers(1).node_id(), "n1");
  JobReconciler restored = JobReconciler::Restored(record, *PlacementGroupForJob(spec), Options());
  std::vector<std::pair<uint32_t, std::string>> restored_logs;
  for (const RankLog& l : restored.logs()) restored_logs.emplace_back(l.attempt, l.worker_id);
  EXPECT_EQ(restored_logs, logged);
}

}  // namespace
}  // namespace berth
