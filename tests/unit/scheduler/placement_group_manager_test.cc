#include "scheduler/placement_group_manager.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PlacementGroupManagerTest : public ::testing::Test {
 protected:
  void AddNode(const std::string& id, int gpus, const std::string& type = "T4",
               const std::map<std::string, std::string>& labels = {}) {
    v1::RegisterNodeRequest r;
    r.mutable_labels()->insert(labels.begin(), labels.end());
    r.set_node_id(id);
    r.set_address(id + ":1");
    r.set_request_id("reg-" + id + std::to_string(now_));
    (*r.mutable_total()->mutable_amounts())["CPU"] = 16;
    (*r.mutable_total()->mutable_amounts())["GPU"] = gpus;
    for (int i = 0; i < gpus; ++i) {
      v1::GpuInstance* g = r.add_gpus();
      g->set_index(i);
      g->set_accelerator_type(type);
    }
    ASSERT_TRUE(nodes_.Register(r, now_).ok());
    pgs_.OnNodesChanged(now_);
  }

  v1::CreatePlacementGroupRequest Request(int bundles, v1::PlacementStrategy strategy,
                                          double gpus = 1, int priority = 0) {
    v1::CreatePlacementGroupRequest r;
    r.set_request_id("req-" + std::to_string(next_id_));
    r.set_strategy(strategy);
    r.set_priority(priority);
    for (int i = 0; i < bundles; ++i)
      (*r.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
    return r;
  }

  // One bundle of `gpus` GPUs in `queue`, of job `job_id` if any.
  v1::CreatePlacementGroupRequest InQueue(const std::string& queue, double gpus,
                                          const std::string& job_id = "") {
    v1::CreatePlacementGroupRequest r = Request(1, v1::PLACEMENT_STRATEGY_PACK, gpus);
    r.set_queue(queue);
    r.set_job_id(job_id);
    return r;
  }

  std::string Create(const v1::CreatePlacementGroupRequest& r) {
    auto id = pgs_.Create(r, "pg-" + std::to_string(next_id_++), now_);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  // Runs every commit to success, as the raylets would.
  std::vector<CommitTask> ScheduleAndCommit(bool succeed = true) {
    std::vector<CommitTask> tasks = pgs_.Schedule(now_);
    for (const CommitTask& t : tasks) {
      if (succeed) pgs_.OnPrepared(t.placement_group_id, t.attempt);
      pgs_.OnCommitDone(t.placement_group_id, t.attempt,
                        succeed ? absl::OkStatus() : absl::UnavailableError("raylet refused"),
                        now_);
    }
    return tasks;
  }

  v1::PlacementGroupInfo Info(const std::string& id) {
    v1::GetPlacementGroupRequest r;
    r.set_placement_group_id(id);
    v1::PlacementGroupInfo info;
    EXPECT_TRUE(pgs_.Get(r, &info).ok());
    return info;
  }

  int64_t now_ = 1000;
  int next_id_ = 0;
  NodeResourceTable table_;
  HeartbeatBook heartbeats_{LivenessConfig{1000, 5}};
  NodeManager nodes_{&table_, &heartbeats_};
  PlacementGroupManager pgs_{&table_, &nodes_, SchedulerConfig{}};
};

TEST_F(PlacementGroupManagerTest, PendingPreparedCreated) {
  AddNode("a", 4);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  std::vector<CommitTask> tasks = pgs_.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].nodes.size(), 1u);
  EXPECT_EQ(tasks[0].nodes[0].address, "a:1");
  EXPECT_EQ(tasks[0].nodes[0].bundles.size(), 2u);
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  pgs_.OnPrepared(id, tasks[0].attempt);
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_PREPARED);
  pgs_.OnCommitDone(id, tasks[0].attempt, absl::OkStatus(), now_);
  v1::PlacementGroupInfo info = Info(id);
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(info.locations_size(), 2);
  EXPECT_EQ(info.locations(0).node_id(), "a");
  EXPECT_EQ(info.locations(1).gpus(0).index(), 1u);
  EXPECT_EQ(info.pending_reason(), "");
}

TEST_F(PlacementGroupManagerTest, HeadViewReservesAtDecisionTime) {
  AddNode("a", 2);
  const std::string first = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  const std::string second = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  // Both are due; only the first fits while its commit is still in flight.
  std::vector<CommitTask> tasks = pgs_.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, first);
  EXPECT_THAT(Info(second).pending_reason(), HasSubstr("waiting for resources"));
  EXPECT_FALSE(Info(second).infeasible());
}

TEST_F(PlacementGroupManagerTest, FailedCommitReleasesAndRetriesWithBackoff) {
  AddNode("a", 2);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  ScheduleAndCommit(/*succeed=*/false);
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(2));
  EXPECT_THAT(Info(id).pending_reason(), HasSubstr("two-phase commit failed"));
  EXPECT_TRUE(pgs_.Schedule(now_).empty());  // backing off
  EXPECT_EQ(pgs_.NextDue(), std::optional<int64_t>(now_ + 100));
  now_ += 100;
  ScheduleAndCommit();
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(PlacementGroupManagerTest, InfeasibleWaitsForANodeChange) {
  AddNode("a", 2);
  const std::string id = Create(Request(4, v1::PLACEMENT_STRATEGY_STRICT_PACK));
  EXPECT_TRUE(ScheduleAndCommit().empty());
  EXPECT_TRUE(Info(id).infeasible());
  EXPECT_THAT(Info(id).pending_reason(), HasSubstr("the largest node has GPU: 2"));
  EXPECT_FALSE(pgs_.NextDue().has_value());
  AddNode("b", 4);
  ScheduleAndCommit();
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

// Counts the core's placement decisions.
class DecisionCounter : public PlacementObserver {
 public:
  void AfterDecision(const PlacementDecision&) override { ++decisions; }
  int decisions = 0;
};

TEST_F(PlacementGroupManagerTest, IdenticalUnfitGroupsCostOneDecisionPerPass) {
  DecisionCounter counter;
  pgs_.set_observer(&counter);
  AddNode("a", 2);
  const std::string big = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK, 2));
  ScheduleAndCommit();
  ASSERT_EQ(Info(big).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  counter.decisions = 0;
  // 50 groups that cannot fit now, one of another shape, 50 that never can.
  std::vector<std::string> waiting;
  for (int i = 0; i < 50; ++i)
    waiting.push_back(Create(Request(1, v1::PLACEMENT_STRATEGY_PACK, 1)));
  v1::CreatePlacementGroupRequest cpu_only = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  (*cpu_only.mutable_bundles(0)->mutable_resources()->mutable_amounts())["GPU"] = 0;
  (*cpu_only.mutable_bundles(0)->mutable_resources()->mutable_amounts())["CPU"] = 1;
  const std::string cpu = Create(cpu_only);
  std::vector<std::string> never;
  for (int i = 0; i < 50; ++i)
    never.push_back(Create(Request(3, v1::PLACEMENT_STRATEGY_STRICT_PACK)));
  ScheduleAndCommit();
  EXPECT_EQ(counter.decisions, 3);
  EXPECT_EQ(Info(cpu).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  for (const std::string& id : waiting) {
    EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
    EXPECT_FALSE(Info(id).infeasible());
    EXPECT_EQ(Info(id).pending_reason(), Info(waiting[0]).pending_reason());
  }
  for (const std::string& id : never) {
    EXPECT_TRUE(Info(id).infeasible());
    EXPECT_THAT(Info(id).pending_reason(), HasSubstr("the largest node has GPU: 2"));
  }
  // Room for one: the first waiting group takes it, the next one is the
  // pass's one decision that finds no room, the rest wait without one.
  ASSERT_TRUE(pgs_.Remove(big).ok());
  counter.decisions = 0;
  ScheduleAndCommit();
  EXPECT_EQ(Info(waiting[0]).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(waiting[1]).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(waiting[2]).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(counter.decisions, 3);
}

// Two teams of one cohort with 2 GPUs each of a 4-GPU node.
QueueConfig TwoTeams() {
  QueueConfig config = *QueueConfig().WithCohort("org");
  for (const char* name : {"team-a", "team-b"}) {
    QueueSpec q;
    q.name = name;
    q.cohort = "org";
    q.nominal[std::string(kGpu)] = Quantity::Whole(2);
    config = *config.WithQueue(q);
  }
  return config;
}

// A group that lost its node comes before any waiting group when room comes
// free: it was admitted, and keeps its quota while it places what it lacks.
TEST_F(PlacementGroupManagerTest, ALostGroupTakesFreedRoomBeforeAWaitingOne) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 2);
  AddNode("b", 2);
  // Team A borrows B's quota; B takes it back.
  const std::string a1 = Create(InQueue("team-a", 2));
  const std::string a2 = Create(InQueue("team-a", 2));
  ScheduleAndCommit();
  ASSERT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string b1 = Create(InQueue("team-b", 2));
  for (int i = 0; i < 3; ++i) {
    now_ += 10;
    ScheduleAndCommit();
    for (const CancelTask& c : pgs_.TakePreemptions().cancels) (void)c;
  }
  ASSERT_EQ(Info(b1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // One of A's groups was preempted and waits; the other runs.
  const bool first_waits = Info(a1).state() == v1::PLACEMENT_GROUP_STATE_PENDING;
  const std::string waits = first_waits ? a1 : a2;
  const std::string runs = first_waits ? a2 : a1;
  ASSERT_EQ(Info(waits).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  ASSERT_EQ(Info(runs).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string lost_node = Info(b1).locations(0).node_id();
  ASSERT_TRUE(table_.SetNodeState(lost_node, NodeState::kDead).ok());
  pgs_.OnNodeDead(lost_node, now_);
  for (int i = 0; i < 10; ++i) {  // its backoff grows to the most, 1 s
    now_ += 1000;
    ScheduleAndCommit();
  }
  EXPECT_EQ(Info(b1).state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  ASSERT_TRUE(pgs_.Remove(runs).ok());
  // Its commit fails at first: the raylet has yet to let go of the removed
  // group's bundle. Past its backoff, the next pass is due before it is;
  // it still goes first.
  std::vector<CommitTask> tasks = pgs_.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, b1);
  pgs_.OnCommitDone(b1, tasks[0].attempt, absl::UnavailableError("refused"), now_ + 1);
  now_ += 1000;
  tasks = ScheduleAndCommit();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, b1);
  EXPECT_EQ(Info(b1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(waits).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
}

TEST_F(PlacementGroupManagerTest, AQueueBelowItsQuotaReclaimsWhatAnotherBorrowed) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  // Team A borrows every GPU: a group created directly and a job's group.
  const std::string a1 = Create(InQueue("team-a", 2));
  ScheduleAndCommit();
  now_ += 10;
  const std::string a2 = Create(InQueue("team-a", 2, "job-a"));
  ScheduleAndCommit();
  ASSERT_EQ(Info(a1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(pgs_.Queue("team-a").borrowed.Get(kGpu), Quantity::Whole(2));

  // Team B, within its quota, takes back the borrowed GPUs: the youngest
  // of A's groups, the job's, is preempted; it keeps its bundles until its
  // job has stopped.
  now_ += 10;
  const std::string b1 = Create(InQueue("team-b", 2, "job-b"));
  EXPECT_TRUE(ScheduleAndCommit().empty());
  PreemptionWork work = pgs_.TakePreemptions();
  EXPECT_TRUE(work.cancels.empty());
  EXPECT_THAT(work.job_groups, testing::ElementsAre(a2));
  v1::PlacementGroupInfo victim = Info(a2);
  EXPECT_TRUE(victim.preempting());
  EXPECT_EQ(victim.preempted_by(), "preempted by job job-b of queue team-b (reclaim)");
  EXPECT_EQ(victim.locations_size(), 1);
  EXPECT_THAT(Info(b1).pending_reason(), HasSubstr("waiting for 1 preempted gang(s) to stop"));
  EXPECT_EQ(Info(a1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_FALSE(pgs_.LetGo(a1, now_).ok());  // not a victim

  // The job stopped: its group lets go and waits; B's group takes the room.
  absl::StatusOr<std::vector<CancelTask>> released = pgs_.LetGo(a2, now_);
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_EQ(released->size(), 1u);
  EXPECT_EQ((*released)[0].address, "a:1");
  EXPECT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_THAT(Info(a2).pending_reason(), HasSubstr("preempted by job job-b of queue team-b"));
  std::vector<CommitTask> tasks = ScheduleAndCommit();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, b1);
  EXPECT_EQ(Info(b1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // Each pass's reason names the job too, not its group.
  EXPECT_THAT(Info(a2).pending_reason(),
              HasSubstr("preempted by job job-b of queue team-b (reclaim); waiting for quota"));
  EXPECT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_PENDING);

  // When B's group ends, A's group is placed again.
  ASSERT_TRUE(pgs_.Remove(b1).ok());
  ScheduleAndCommit();
  EXPECT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(a2).preemptions(), 1u);
  EXPECT_EQ(Info(a2).preempted_by(), "");
}

// The victim is the group whose job would lose the least work: one that
// just saved a checkpoint, though it started first.
TEST_F(PlacementGroupManagerTest, AGroupWhoseJobJustCheckpointedIsTheVictim) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  const std::string a1 = Create(InQueue("team-a", 2, "job-a1"));
  ScheduleAndCommit();
  now_ += 10;
  const std::string a2 = Create(InQueue("team-a", 2, "job-a2"));
  ScheduleAndCommit();
  ASSERT_EQ(Info(a2).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  now_ += 10;
  pgs_.OnCheckpoint(a1, now_);
  pgs_.OnCheckpoint("no-such-group", now_);  // ignored
  now_ += 1;
  Create(InQueue("team-b", 2, "job-b"));
  EXPECT_TRUE(ScheduleAndCommit().empty());
  EXPECT_THAT(pgs_.TakePreemptions().job_groups, testing::ElementsAre(a1));
}

TEST_F(PlacementGroupManagerTest, AGroupCreatedDirectlyIsReleasedAtOnceWhenPreempted) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  const std::string a1 = Create(InQueue("team-a", 4));
  ScheduleAndCommit();
  ASSERT_EQ(Info(a1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  now_ += 10;
  const std::string b1 = Create(InQueue("team-b", 2));
  ScheduleAndCommit();
  PreemptionWork work = pgs_.TakePreemptions();
  ASSERT_EQ(work.cancels.size(), 1u);
  EXPECT_EQ(work.cancels[0].placement_group_id, a1);
  EXPECT_TRUE(work.job_groups.empty());
  EXPECT_EQ(Info(a1).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(Info(a1).locations_size(), 0);
  // The next pass admits B's group on the freed GPUs.
  ScheduleAndCommit();
  EXPECT_EQ(Info(b1).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(PlacementGroupManagerTest, NonPreemptibleGroupsStayWithinTheirQuotaAndAreNeverVictims) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  v1::CreatePlacementGroupRequest a = InQueue("team-a", 2);
  a.set_preemptible(false);
  const std::string within = Create(a);
  a.set_request_id("req-over");
  const std::string over = Create(a);
  ScheduleAndCommit();
  EXPECT_EQ(Info(within).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_FALSE(Info(within).preemptible());
  EXPECT_EQ(Info(over).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_THAT(Info(over).pending_reason(), HasSubstr("only within the queue's nominal quota"));
}

TEST_F(PlacementGroupManagerTest, AnUnknownQueueIsRefusedAndAQueueInUseIsNotDeleted) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  v1::CreatePlacementGroupRequest r = InQueue("team-c", 1);
  absl::StatusOr<std::string> refused = pgs_.Create(r, "pg-x", now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(refused.status().message(), HasSubstr("queue"));
  r.set_queue("team-a");
  const std::string id = Create(r);
  absl::Status deleted = pgs_.Reconfigure(*pgs_.queue_config().WithoutQueue("team-a"));
  EXPECT_EQ(deleted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(deleted.message(), HasSubstr("team-a"));
  EXPECT_NE(pgs_.queue_config().FindQueue("team-a"), nullptr);
  ASSERT_TRUE(pgs_.Remove(id).ok());
  EXPECT_TRUE(pgs_.Reconfigure(*pgs_.queue_config().WithoutQueue("team-a")).ok());
}

TEST_F(PlacementGroupManagerTest, ARestoredHeadKeepsUsageOrderAndPreemption) {
  ASSERT_TRUE(pgs_.Reconfigure(TwoTeams()).ok());
  AddNode("a", 4);
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(Create(InQueue("team-a", 2, absl::StrCat("job-", i))));
    ScheduleAndCommit();
    now_ += 10;
  }
  ids.push_back(Create(InQueue("team-b", 2)));
  ScheduleAndCommit();
  ids.push_back(Create(InQueue("team-a", 2)));
  ScheduleAndCommit();
  ASSERT_TRUE(Info(ids[1]).preempting());

  // A new head from the records (in arrival order, as the head restores).
  NodeResourceTable table;
  HeartbeatBook heartbeats{LivenessConfig{1000, 5}};
  NodeManager nodes{&table, &heartbeats};
  PlacementGroupManager restored{&table, &nodes, SchedulerConfig{}};
  ASSERT_TRUE(restored.Reconfigure(TwoTeams()).ok());
  v1::RegisterNodeRequest reg;
  reg.set_node_id("a");
  reg.set_address("a:1");
  reg.set_request_id("reg-again");
  (*reg.mutable_total()->mutable_amounts())["CPU"] = 16;
  (*reg.mutable_total()->mutable_amounts())["GPU"] = 4;
  for (int i = 0; i < 4; ++i) reg.add_gpus()->set_index(i);
  ASSERT_TRUE(nodes.Register(reg, now_).ok());
  for (const std::string& id : ids) {
    std::optional<v1::PlacementGroupRecord> record = pgs_.Export(id);
    ASSERT_TRUE(record.has_value());
    ASSERT_TRUE(restored.Restore(*record, now_).ok());
  }
  EXPECT_EQ(restored.Queue("team-a").usage.Get(kGpu), Quantity::Whole(2));
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(ids[1]);
  v1::PlacementGroupInfo victim;
  ASSERT_TRUE(restored.Get(get, &victim).ok());
  EXPECT_TRUE(victim.preempting());
  // Why, as it was said before the restart: the preemption is kept typed
  // (preemptor, its queue, the rule), not as its text.
  EXPECT_EQ(victim.preempted_by(), Info(ids[1]).preempted_by());
  EXPECT_EQ(victim.preempted_by(),
            absl::StrCat("preempted by placement group ", ids[2], " of queue team-b (reclaim)"));
  EXPECT_EQ(pgs_.Export(ids[1])->preemption().rule(), "reclaim");
  EXPECT_EQ(pgs_.Export(ids[1])->preemption().by(), ids[2]);
  // Released, the victim's room goes to B (claimed before), not to the
  // group of A that came later.
  ASSERT_TRUE(restored.LetGo(ids[1], now_).ok());
  std::vector<CommitTask> tasks = restored.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, ids[2]);
}

TEST_F(PlacementGroupManagerTest, PriorityThenArrival) {
  AddNode("a", 1);
  const std::string low = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK, 1, 0));
  const std::string high = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK, 1, 5));
  std::vector<CommitTask> tasks = ScheduleAndCommit();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].placement_group_id, high);
  EXPECT_EQ(Info(low).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
}

TEST_F(PlacementGroupManagerTest, NodeDeathReschedulesOnlyLostBundles) {
  AddNode("a", 1);
  AddNode("b", 1);
  AddNode("c", 1);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_STRICT_SPREAD));
  ScheduleAndCommit();
  v1::PlacementGroupInfo before = Info(id);
  ASSERT_EQ(before.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string lost_node = before.locations(1).node_id();
  const std::string kept_node = before.locations(0).node_id();
  ASSERT_TRUE(table_.SetNodeState(lost_node, NodeState::kDead).ok());
  pgs_.OnNodeDead(lost_node, now_);
  v1::PlacementGroupInfo rescheduling = Info(id);
  EXPECT_EQ(rescheduling.state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(rescheduling.pending_reason(), HasSubstr("lost with node " + lost_node));
  ASSERT_EQ(rescheduling.locations_size(), 1);
  std::vector<CommitTask> tasks = ScheduleAndCommit();
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].nodes.size(), 1u);
  ASSERT_EQ(tasks[0].nodes[0].bundles.size(), 1u);  // only the lost bundle
  EXPECT_EQ(tasks[0].nodes[0].bundles[0].bundle_index, 1u);
  EXPECT_NE(tasks[0].nodes[0].node_id, kept_node);  // STRICT_SPREAD avoids the group's node
  v1::PlacementGroupInfo after = Info(id);
  EXPECT_EQ(after.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(after.locations(0).node_id(), kept_node);
}

// A raylet released more than the head's snapshot allowed for (a bundle
// placed on it after the snapshot): the books lose what it let go of, and
// the group is placed again; a group in two-phase commit loses it at the
// commit's end. Keys the books do not put on that node change nothing.
TEST_F(PlacementGroupManagerTest, BundlesANodeReleasedWhenItSyncedAreRescheduled) {
  AddNode("a", 1);
  AddNode("b", 1);
  AddNode("c", 1);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_STRICT_SPREAD));
  ScheduleAndCommit();
  const v1::PlacementGroupInfo before = Info(id);
  ASSERT_EQ(before.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string node = before.locations(1).node_id();
  google::protobuf::RepeatedPtrField<v1::BundleKey> released;
  auto key = [&](const std::string& group, uint32_t bundle) {
    v1::BundleKey* k = released.Add();
    k->set_placement_group_id(group);
    k->set_bundle_index(bundle);
  };
  key("pg-unknown", 0);
  key(id, 0);  // on another node
  EXPECT_THAT(pgs_.OnBundlesReleased(node, released, now_), IsEmpty());
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  key(id, 1);
  EXPECT_THAT(pgs_.OnBundlesReleased(node, released, now_), ElementsAre(id));
  const v1::PlacementGroupInfo lost = Info(id);
  EXPECT_EQ(lost.state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(lost.pending_reason(), HasSubstr("released by node " + node));
  ASSERT_EQ(lost.locations_size(), 1);
  EXPECT_EQ(lost.locations(0).bundle_index(), 0u);
  std::vector<CommitTask> tasks = ScheduleAndCommit();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].nodes[0].bundles[0].bundle_index, 1u);
  ASSERT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);

  // In two-phase commit: the released bundle is lost when the commit ends.
  const std::string next = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK));
  tasks = pgs_.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  const std::string next_node = tasks[0].nodes[0].node_id;
  released.Clear();
  key(next, 0);
  EXPECT_THAT(pgs_.OnBundlesReleased(next_node, released, now_), IsEmpty());
  pgs_.OnPrepared(next, tasks[0].attempt);
  pgs_.OnCommitDone(next, tasks[0].attempt, absl::OkStatus(), now_);
  EXPECT_NE(Info(next).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(next).locations_size(), 0);
}

TEST_F(PlacementGroupManagerTest,
       ATopologyGroupSaysItsDomainKeepsItThroughARestartAndRefusesTypos) {
  const std::string rack = "berth.io/topology-rack";
  AddNode("a", 2, "T4", {{rack, "r1"}});
  AddNode("b", 2, "T4", {{rack, "r2"}});
  AddNode("c", 2, "T4", {{rack, "r2"}});
  v1::CreatePlacementGroupRequest r = Request(3, v1::PLACEMENT_STRATEGY_SPREAD);
  r.mutable_topology()->set_required(rack);
  const std::string id = Create(r);
  ScheduleAndCommit();
  v1::PlacementGroupInfo info = Info(id);
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(info.topology().required(), rack);
  EXPECT_EQ(info.topology_domain(), rack + "=r2");
  for (const v1::BundleLocation& l : info.locations()) EXPECT_NE(l.node_id(), "a");

  std::optional<v1::PlacementGroupRecord> record = pgs_.Export(id);
  ASSERT_TRUE(record.has_value());
  PlacementGroupManager restored(&table_, &nodes_, SchedulerConfig{});
  // The first manager lets go of the table, which the restored one reserves again.
  ASSERT_TRUE(pgs_.Remove(id).ok());
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  ASSERT_TRUE(restored.Restore(*record, now_).ok());
  v1::PlacementGroupInfo back;
  ASSERT_TRUE(restored.Get(get, &back).ok());
  EXPECT_EQ(back.topology().required(), rack);
  EXPECT_EQ(back.topology_domain(), rack + "=r2");

  // A key no node carries is a typo; a well-known one may wait for its nodes.
  v1::CreatePlacementGroupRequest typo = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  typo.mutable_topology()->add_preferred(rack);
  typo.mutable_topology()->add_preferred("rackk");
  absl::StatusOr<std::string> refused = pgs_.Create(typo, "pg-typo", now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("topology.preferred[1]: no node carries label 'rackk'"));
  v1::CreatePlacementGroupRequest block = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  block.mutable_topology()->set_required("berth.io/topology-block");
  const std::string waits = Create(block);
  ScheduleAndCommit();
  EXPECT_THAT(Info(waits).pending_reason(), HasSubstr("no ALIVE node carries the label"));
}

TEST_F(PlacementGroupManagerTest, ARackGangWhoseRackCanNoLongerHoldItMovesWhole) {
  const std::string rack = "berth.io/topology-rack";
  AddNode("a", 2, "T4", {{rack, "r1"}});
  AddNode("b", 2, "T4", {{rack, "r1"}});
  AddNode("c", 2, "T4", {{rack, "r2"}});
  AddNode("d", 2, "T4", {{rack, "r2"}});
  v1::CreatePlacementGroupRequest r = Request(4, v1::PLACEMENT_STRATEGY_PACK);
  r.mutable_topology()->set_required(rack);
  const std::string id = Create(r);
  ScheduleAndCommit();
  ASSERT_EQ(Info(id).topology_domain(), rack + "=r1");
  // b dies: r1 has 2 GPUs left, held by the gang itself; its 2 lost bundles
  // can never come back there, so the gang lets go of a and moves to r2.
  ASSERT_TRUE(table_.SetNodeState("b", NodeState::kDead).ok());
  pgs_.OnNodeDead("b", now_);
  std::vector<CommitTask> tasks = ScheduleAndCommit();
  PreemptionWork work = pgs_.TakePreemptions();
  ASSERT_EQ(work.cancels.size(), 1u);
  EXPECT_EQ(work.cancels[0].address, "a:1");
  EXPECT_EQ(work.cancels[0].bundle_indices.size(), 2u);
  ASSERT_EQ(tasks.size(), 1u);
  v1::PlacementGroupInfo moved = Info(id);
  EXPECT_EQ(moved.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(moved.topology_domain(), rack + "=r2");
  ASSERT_EQ(moved.locations_size(), 4);
  for (const v1::BundleLocation& l : moved.locations()) {
    EXPECT_TRUE(l.node_id() == "c" || l.node_id() == "d") << l.node_id();
  }
  // Node a holds nothing of it any more.
  EXPECT_EQ(table_.node(*table_.FindNode("a")).available.Get(kGpu), Quantity::Whole(2));
}

// A node holding one of the group's kept bundles dies while the group's
// other bundles are in two-phase commit elsewhere: the kept bundle is lost
// too, whether the commit succeeds or fails (found by the chaos test).
TEST_F(PlacementGroupManagerTest, KeptBundleOnANodeThatDiesDuringACommitIsLost) {
  for (bool succeed : {true, false}) {
    SCOPED_TRACE(succeed ? "commit succeeds" : "commit fails");
    const std::string suffix = succeed ? "1" : "2";
    AddNode("a" + suffix, 1);
    AddNode("b" + suffix, 1);
    const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_STRICT_SPREAD));
    ScheduleAndCommit();
    ASSERT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
    const std::string kept_node = Info(id).locations(0).node_id();
    const std::string lost_node = Info(id).locations(1).node_id();
    ASSERT_TRUE(table_.SetNodeState(lost_node, NodeState::kDead).ok());
    pgs_.OnNodeDead(lost_node, now_);
    AddNode("c" + suffix, 1);
    std::vector<CommitTask> tasks = pgs_.Schedule(now_);
    ASSERT_EQ(tasks.size(), 1u);
    // The kept bundle's node dies while bundle 1 commits on the new node.
    ASSERT_TRUE(table_.SetNodeState(kept_node, NodeState::kDead).ok());
    pgs_.OnNodeDead(kept_node, now_);
    if (succeed) pgs_.OnPrepared(id, tasks[0].attempt);
    pgs_.OnCommitDone(id, tasks[0].attempt,
                      succeed ? absl::OkStatus() : absl::UnavailableError("refused"), now_);
    const v1::PlacementGroupInfo info = Info(id);
    EXPECT_NE(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
    for (const v1::BundleLocation& l : info.locations()) EXPECT_NE(l.node_id(), kept_node);
    EXPECT_EQ(table_.node(*table_.FindNode(kept_node)).available.Get(kGpu), Quantity::Whole(1));
    ASSERT_TRUE(pgs_.Remove(id).ok());
  }
}

TEST_F(PlacementGroupManagerTest, StrictSpreadThatNoLongerFitsStaysPendingWithAReason) {
  AddNode("a", 1);
  AddNode("b", 1);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_STRICT_SPREAD));
  ScheduleAndCommit();
  ASSERT_TRUE(table_.SetNodeState("b", NodeState::kDead).ok());
  pgs_.OnNodeDead("b", now_);
  ScheduleAndCommit();
  v1::PlacementGroupInfo info = Info(id);
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_TRUE(info.infeasible());
  EXPECT_THAT(info.pending_reason(), HasSubstr("STRICT_SPREAD"));
  v1::GetClusterStatusResponse status;
  pgs_.ClusterStatus(&status);
  ASSERT_EQ(status.pending_demand_size(), 1);
  EXPECT_EQ(status.pending_demand(0).shape_size(), 1);
  EXPECT_TRUE(status.pending_demand(0).infeasible());
  ASSERT_EQ(status.accelerators_size(), 1);
  // Only node a is ALIVE, and bundle 0 holds its GPU.
  EXPECT_EQ(status.accelerators(0).total().amounts().at("CPU"), 16);
  EXPECT_EQ(status.accelerators(0).total().amounts().at("GPU"), 1);
  EXPECT_EQ(status.accelerators(0).available().amounts().count("GPU"), 0u);
  ASSERT_EQ(status.placement_groups_size(), 1);
  EXPECT_EQ(status.placement_groups(0).state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_EQ(status.placement_groups(0).count(), 1u);
}

TEST_F(PlacementGroupManagerTest, RemoveReleasesAndCancels) {
  AddNode("a", 2);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  ScheduleAndCommit();
  auto cancels = pgs_.Remove(id);
  ASSERT_TRUE(cancels.ok());
  ASSERT_EQ(cancels->size(), 1u);
  EXPECT_EQ((*cancels)[0].address, "a:1");
  EXPECT_EQ((*cancels)[0].bundle_indices, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(table_.node(0).available, table_.node(0).total);
  EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  EXPECT_TRUE(pgs_.Remove(id).ok());  // idempotent
  EXPECT_EQ(pgs_.Remove("pg-none").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PlacementGroupManagerTest, RemoveDuringCommitReleasesWhenItEnds) {
  AddNode("a", 2);
  const std::string id = Create(Request(2, v1::PLACEMENT_STRATEGY_PACK));
  std::vector<CommitTask> tasks = pgs_.Schedule(now_);
  ASSERT_EQ(tasks.size(), 1u);
  auto cancels = pgs_.Remove(id);
  ASSERT_TRUE(cancels.ok());
  EXPECT_TRUE(cancels->empty());
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(0));  // still held
  std::vector<CancelTask> after = pgs_.OnCommitDone(id, tasks[0].attempt, absl::OkStatus(), now_);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(table_.node(0).available, table_.node(0).total);
}

TEST_F(PlacementGroupManagerTest, CreateIsIdempotentAndValidated) {
  AddNode("a", 2);
  v1::CreatePlacementGroupRequest r = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  r.set_name("trainer");
  const std::string id = Create(r);
  auto again = pgs_.Create(r, "pg-other", now_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, id);
  v1::CreatePlacementGroupRequest changed = r;
  changed.set_priority(3);
  EXPECT_EQ(pgs_.Create(changed, "pg-x", now_).status().code(), absl::StatusCode::kInvalidArgument);
  v1::CreatePlacementGroupRequest same_name = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  same_name.set_request_id("other");
  same_name.set_name("trainer");
  EXPECT_EQ(pgs_.Create(same_name, "pg-y", now_).status().code(), absl::StatusCode::kAlreadyExists);

  auto expect_invalid = [&](v1::CreatePlacementGroupRequest bad, const std::string& field) {
    auto s = pgs_.Create(bad, "pg-bad", now_);
    ASSERT_FALSE(s.ok()) << field;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(field));
  };
  auto empty = Request(0, v1::PLACEMENT_STRATEGY_PACK);
  empty.set_request_id("e1");
  expect_invalid(empty, "bundles");
  auto nan = Request(1, v1::PLACEMENT_STRATEGY_PACK, std::nan(""));
  nan.set_request_id("e2");
  expect_invalid(nan, "bundles[0].resources.amounts[\"GPU\"]");
  auto strategy = Request(1, static_cast<v1::PlacementStrategy>(42));
  strategy.set_request_id("e3");
  expect_invalid(strategy, "strategy");
  auto oversize = Request(5000, v1::PLACEMENT_STRATEGY_PACK);
  oversize.set_request_id("e4");
  expect_invalid(oversize, "bundles: 5000 bundles");
  auto long_name = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  long_name.set_request_id("e5");
  long_name.set_name(std::string(300, 'n'));
  expect_invalid(long_name, "name");
  auto internal = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  internal.set_request_id("e6");
  (*internal.mutable_bundles(0)->mutable_resources()->mutable_amounts())["accelerator_type:T4"] =
      0.001;
  expect_invalid(internal, "berth.io/accelerator-type in (T4)");
  auto no_id = Request(1, v1::PLACEMENT_STRATEGY_PACK);
  no_id.clear_request_id();
  expect_invalid(no_id, "request_id");
  v1::ListPlacementGroupsResponse all;
  pgs_.List({}, &all);
  EXPECT_EQ(all.placement_groups_size(), 1);  // nothing half-applied
}

TEST_F(PlacementGroupManagerTest, AJobAskingAgainForItsGroupGetsTheSameOne) {
  AddNode("a", 2);
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpec::FromInput({{{{{"GPU", 1}}, {}}}, "PACK"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::CreatePlacementGroupRequest meta;
  meta.set_request_id("job-1/pg");
  meta.set_job_id("job-1");
  absl::StatusOr<std::string> first = pgs_.CreateFromSpec(*spec, meta, "pg-1", now_);
  ASSERT_TRUE(first.ok()) << first.status();
  // A restarted head's job asks again: the same group, not a second one.
  absl::StatusOr<std::string> again = pgs_.CreateFromSpec(*spec, meta, "pg-2", now_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  // Another job may not take the request id.
  v1::CreatePlacementGroupRequest other = meta;
  other.set_job_id("job-2");
  EXPECT_EQ(pgs_.CreateFromSpec(*spec, other, "pg-3", now_).status().code(),
            absl::StatusCode::kAlreadyExists);
  v1::ListPlacementGroupsResponse all;
  pgs_.List({}, &all);
  EXPECT_EQ(all.placement_groups_size(), 1);
}

TEST_F(PlacementGroupManagerTest, ManyCreateRemoveCyclesRestoreTheTable) {
  AddNode("a", 4, "A10G");
  AddNode("b", 2, "T4");
  AddNode("c", 8, "T4");
  const std::vector<v1::PlacementStrategy> strategies = {
      v1::PLACEMENT_STRATEGY_PACK, v1::PLACEMENT_STRATEGY_SPREAD,
      v1::PLACEMENT_STRATEGY_STRICT_PACK, v1::PLACEMENT_STRATEGY_STRICT_SPREAD};
  for (int i = 0; i < 1000; ++i) {
    const std::string id = Create(Request(1 + i % 3, strategies[i % 4], i % 5 == 0 ? 0.5 : 1));
    ScheduleAndCommit();
    ASSERT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED) << i;
    ASSERT_TRUE(pgs_.Remove(id).ok());
  }
  for (NodeIndex n = 0; n < table_.slot_count(); ++n) {
    EXPECT_EQ(table_.node(n).available, table_.node(n).total);
  }
  // The default scorer learned the groups' GPU tasks and took over from
  // the built-in ranking after the first 100.
  v1::GetClusterStatusResponse status;
  pgs_.ClusterStatus(&status);
  EXPECT_EQ(status.placement_scorer().name(), "fragmentation");
  EXPECT_EQ(status.placement_scorer().active(), "fragmentation");
  EXPECT_GE(status.placement_scorer().builds(), 1u);
  EXPECT_GE(status.placement_scorer().window_tasks(), 1000u);
  EXPECT_GT(status.placement_scorer().window_shapes(), 1u);
}

// A batch is created whole or not at all; a retried batch keeps its ids.
TEST_F(PlacementGroupManagerTest, CreateBatchIsAllOrNothingAndIdempotent) {
  AddNode("a", 8);
  google::protobuf::RepeatedPtrField<v1::CreatePlacementGroupRequest> batch;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    *batch.Add() = Request(1, v1::PLACEMENT_STRATEGY_PACK);
    batch[i].set_request_id("batch-" + std::to_string(i));
    ids.push_back("pg-batch-" + std::to_string(i));
  }
  auto listed = [&] {
    v1::ListPlacementGroupsResponse all;
    pgs_.List({}, &all);
    return all.placement_groups_size();
  };
  // A bad bundle in the last request: nothing is created, the error names it.
  v1::CreatePlacementGroupRequest bad = batch[2];
  (*batch[2].mutable_bundles(0)->mutable_resources()->mutable_amounts())["GPU"] = -1;
  absl::StatusOr<std::vector<std::string>> refused = pgs_.CreateBatch(batch, ids, now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("requests[2].bundles[0]"));
  EXPECT_EQ(listed(), 0);
  // Two requests with one name, or one request_id twice: refused, nothing created.
  batch[2] = bad;
  batch[0].set_name("twin");
  batch[1].set_name("twin");
  refused = pgs_.CreateBatch(batch, ids, now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("requests[1].name"));
  batch[1].set_name("");
  batch[1].set_request_id("batch-0");
  refused = pgs_.CreateBatch(batch, ids, now_);
  EXPECT_THAT(refused.status().message(), HasSubstr("requests[1].request_id: repeats requests[0]"));
  EXPECT_EQ(listed(), 0);
  batch[1].set_request_id("batch-1");
  absl::StatusOr<std::vector<std::string>> created = pgs_.CreateBatch(batch, ids, now_);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, ids);
  ScheduleAndCommit();
  for (const std::string& id : ids) EXPECT_EQ(Info(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // The retry (new ids offered) answers with the first ids and creates nothing.
  absl::StatusOr<std::vector<std::string>> retried =
      pgs_.CreateBatch(batch, {"pg-x", "pg-y", "pg-z"}, now_);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(*retried, ids);
  EXPECT_EQ(listed(), 3);
}

TEST(PlacementGroupManagerLimitsTest, CreateBatchMustFitUnderMaxPendingGroups) {
  NodeResourceTable table;
  HeartbeatBook heartbeats(LivenessConfig{1000, 5});
  NodeManager nodes(&table, &heartbeats);
  SchedulerConfig config;
  config.max_pending_groups = 2;
  PlacementGroupManager pgs(&table, &nodes, config);
  google::protobuf::RepeatedPtrField<v1::CreatePlacementGroupRequest> batch;
  for (int i = 0; i < 3; ++i) {
    v1::CreatePlacementGroupRequest* r = batch.Add();
    r->set_request_id("r" + std::to_string(i));
    (*r->add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  }
  absl::StatusOr<std::vector<std::string>> refused =
      pgs.CreateBatch(batch, {"pg-0", "pg-1", "pg-2"}, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("requests[2]."));
  v1::ListPlacementGroupsResponse listed;
  pgs.List({}, &listed);
  EXPECT_EQ(listed.placement_groups_size(), 0);
}

// The admission limits refuse with the field and the flag, and change nothing.
TEST(PlacementGroupManagerLimitsTest, BundlesPendingGroupsAndNamesAreBounded) {
  NodeResourceTable table;
  HeartbeatBook heartbeats(LivenessConfig{1000, 5});
  NodeManager nodes(&table, &heartbeats);
  SchedulerConfig config;
  config.max_bundles_per_group = 3;
  config.max_pending_groups = 2;
  config.max_name_length = 8;
  PlacementGroupManager pgs(&table, &nodes, config);
  auto request = [](int bundles, const std::string& id, const std::string& name = "") {
    v1::CreatePlacementGroupRequest r;
    r.set_request_id(id);
    r.set_name(name);
    for (int i = 0; i < bundles; ++i)
      (*r.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
    return r;
  };
  absl::StatusOr<std::string> too_big = pgs.Create(request(4, "r1"), "pg-1", 0);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      too_big.status().message(),
      HasSubstr("bundles: 4 bundles; at most 3 per group (berth-head --max-bundles-per-group)"));
  absl::StatusOr<std::string> long_name = pgs.Create(request(1, "r2", "ninechars"), "pg-2", 0);
  EXPECT_EQ(long_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_name.status().message(), HasSubstr("name"));
  // No node: both wait; a third is refused, a retry of an accepted one is not.
  ASSERT_TRUE(pgs.Create(request(3, "r3"), "pg-3", 0).ok());
  ASSERT_TRUE(pgs.Create(request(1, "r4"), "pg-4", 0).ok());
  absl::StatusOr<std::string> third = pgs.Create(request(1, "r5"), "pg-5", 0);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max-pending-groups 2"));
  EXPECT_EQ(*pgs.Create(request(1, "r4"), "pg-6", 0), "pg-4");
  v1::ListPlacementGroupsResponse listed;
  pgs.List({}, &listed);
  EXPECT_EQ(listed.placement_groups_size(), 2);
  // Room again once one is removed.
  ASSERT_TRUE(pgs.Remove("pg-3").ok());
  EXPECT_TRUE(pgs.Create(request(1, "r5"), "pg-5", 0).ok());
}

// A drain: a job's group moves when its job lets go (LetGo), only its
// bundles on the draining node, and is placed elsewhere first; a group
// created directly moves at the deadline, not before; undrain ends it.
TEST_F(PlacementGroupManagerTest, DrainedNodesBundlesMoveWithTheJobOrAtTheDeadline) {
  AddNode("a", 2);
  const std::string job_group = Create(InQueue("", 2, "job-1"));
  ScheduleAndCommit();
  AddNode("b", 2);
  const std::string plain = Create(InQueue("", 2));
  ScheduleAndCommit();
  AddNode("c", 4);
  ASSERT_EQ(Info(job_group).locations(0).node_id(), "a");
  ASSERT_EQ(Info(plain).locations(0).node_id(), "b");
  EXPECT_FALSE(pgs_.LetGo(job_group, now_).ok());  // nothing asks it to

  v1::DrainNodeRequest drain;
  drain.set_node_id("a");
  drain.set_reason("kernel upgrade");
  drain.set_deadline_unix_ms(now_ + 10000);
  ASSERT_TRUE(nodes_.Drain(drain).ok());
  drain.set_node_id("b");
  ASSERT_TRUE(nodes_.Drain(drain).ok());
  EXPECT_THAT(pgs_.GroupsOn("a"), ElementsAre(job_group));
  v1::PlacementGroupInfo moving = Info(job_group);
  EXPECT_TRUE(moving.moving());
  EXPECT_EQ(moving.move_deadline_unix_ms(), now_ + 10000);
  EXPECT_EQ(moving.moving_reason(), "node a is draining: kernel upgrade");
  EXPECT_EQ(moving.state(), v1::PLACEMENT_GROUP_STATE_CREATED);

  // The job stopped: only a's bundles go, to c (b drains too).
  absl::StatusOr<std::vector<CancelTask>> released = pgs_.LetGo(job_group, now_);
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_EQ(released->size(), 1u);
  EXPECT_EQ((*released)[0].address, "a:1");
  EXPECT_THAT((*released)[0].bundle_indices, ElementsAre(0));
  EXPECT_EQ(Info(job_group).state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(Info(job_group).pending_reason(), HasSubstr("moved off draining node a"));
  EXPECT_FALSE(Info(job_group).moving());
  ScheduleAndCommit();
  EXPECT_EQ(Info(job_group).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(job_group).locations(0).node_id(), "c");

  // The plain group stays on b until the deadline.
  EXPECT_TRUE(pgs_.MoveAtDrainDeadlines(now_ + 9999).empty());
  EXPECT_EQ(Info(plain).locations(0).node_id(), "b");
  now_ += 10000;
  std::vector<CancelTask> moved = pgs_.MoveAtDrainDeadlines(now_);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].address, "b:1");
  EXPECT_EQ(Info(plain).state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  ScheduleAndCommit();
  EXPECT_EQ(Info(plain).locations(0).node_id(), "c");
  EXPECT_EQ(table_.node(*table_.FindNode("a")).available.Get(kGpu), Quantity::Whole(2));
  EXPECT_EQ(table_.node(*table_.FindNode("b")).available.Get(kGpu), Quantity::Whole(2));

  // Undrained, a takes bundles again.
  ASSERT_TRUE(nodes_.Undrain("a").ok());
  pgs_.OnNodesChanged(now_);
  const std::string next = Create(InQueue("", 2));
  ScheduleAndCommit();
  EXPECT_EQ(Info(next).locations(0).node_id(), "a");
}

// An unhealthy GPU: the bundle holding it moves at once (a job's when its
// job let go, a direct group's at the next look), on healthy GPUs; no
// bundle gets the GPU until it is returned.
TEST_F(PlacementGroupManagerTest, ABundleOnAnUnhealthyGpuMovesAndTheGpuIsWithheld) {
  AddNode("a", 4);
  v1::CreatePlacementGroupRequest job_request = Request(2, v1::PLACEMENT_STRATEGY_STRICT_PACK);
  job_request.set_job_id("job-1");
  const std::string job_group = Create(job_request);
  const std::string plain = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK));
  ScheduleAndCommit();
  ASSERT_EQ(Info(job_group).locations(1).gpus(0).index(), 1u);
  ASSERT_EQ(Info(plain).locations(0).gpus(0).index(), 2u);
  auto unhealthy = [&](std::vector<uint32_t> gpus) {
    google::protobuf::RepeatedPtrField<v1::UnhealthyGpu> list;
    for (uint32_t gpu : gpus) {
      v1::UnhealthyGpu* u = list.Add();
      u->set_index(gpu);
      u->set_reason("XID 79, GPU has fallen off the bus");
      u->set_since_unix_ms(now_ - 5);
    }
    absl::StatusOr<bool> changed = nodes_.SetUnhealthyGpus("a", list);
    ASSERT_TRUE(changed.ok() && *changed) << changed.status();
    pgs_.OnNodesChanged(now_);
  };
  unhealthy({1});
  v1::PlacementGroupInfo moving = Info(job_group);
  EXPECT_TRUE(moving.moving());
  EXPECT_EQ(moving.move_cause(), v1::MOVE_CAUSE_UNHEALTHY_GPU);
  EXPECT_EQ(moving.moving_reason(), "GPU 1 of a: XID 79, GPU has fallen off the bus");
  EXPECT_EQ(moving.move_deadline_unix_ms(), now_ - 5);
  EXPECT_FALSE(Info(plain).moving());
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(1));  // GPU 3

  absl::StatusOr<std::vector<CancelTask>> released = pgs_.LetGo(job_group, now_);
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_EQ(released->size(), 1u);
  EXPECT_THAT((*released)[0].bundle_indices, ElementsAre(1));
  EXPECT_THAT(Info(job_group).pending_reason(),
              HasSubstr("moved off an unhealthy GPU (GPU 1 of a"));
  ScheduleAndCommit();
  EXPECT_EQ(Info(job_group).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(job_group).locations(1).gpus(0).index(), 3u);
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity());  // GPU 1 stays out
  const std::string waiting = Create(Request(1, v1::PLACEMENT_STRATEGY_PACK));
  ScheduleAndCommit();
  EXPECT_EQ(Info(waiting).state(), v1::PLACEMENT_GROUP_STATE_PENDING);

  // The plain group's GPU goes bad too: it moves at the next look, to GPU 1
  // once that is returned.
  unhealthy({1, 2});
  std::vector<CancelTask> moved = pgs_.MoveAtDrainDeadlines(now_);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].placement_group_id, plain);
  unhealthy({2});
  ScheduleAndCommit();
  EXPECT_EQ(Info(plain).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Info(plain).locations(0).gpus(0).index(), 1u);  // a lost bundle goes first
  EXPECT_EQ(Info(waiting).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
}

}  // namespace
}  // namespace berth
