#include "queueing/queue_scheduler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/queueing/pool_capacity_test_util.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::PoolCapacity;
using ::testing::UnorderedElementsAre;
using testing::Victims;

ResourceSet Gpus(double n) { return ResourceSet::Of({{kGpu, n}}); }

QueueSpec Team(const std::string& name, const std::string& cohort, double gpus, double weight = 1) {
  QueueInput in;
  in.name = name;
  in.cohort = cohort;
  if (gpus >= 0) in.nominal = {{"GPU", gpus}};
  in.weight = weight;
  return QueueSpecFromInput(in, "queue").value();
}

// A scheduler and a pool, and a short way to submit.
struct Cluster {
  Cluster(QueueConfig config, double gpus, QueueSchedulerOptions options = {})
      : scheduler(std::move(config), options), pool(Gpus(gpus)) {}

  void Submit(const std::string& id, const std::string& queue, double gpus, int64_t now,
              int32_t priority = 0, std::optional<int64_t> limit = std::nullopt,
              bool preemptible = true) {
    pool.Add(id, Gpus(gpus));
    GangRequest r{id, queue, priority, Gpus(gpus), preemptible, limit};
    ASSERT_TRUE(scheduler.Submit(r, now).ok()) << id;
  }
  PassResult Pass(int64_t now) { return scheduler.Pass(now, pool); }
  // The caller's side of a preemption: stop, release, report.
  void Stopped(const PassResult& r, int64_t now) {
    for (const Preemption& p : r.preempted) {
      pool.Release(p.victim);
      scheduler.Preempted(p.victim, now);
    }
  }
  void End(const std::string& id) {
    pool.Release(id);
    scheduler.Finish(id);
  }
  GangState State(const std::string& id) { return scheduler.Find(id)->state; }

  QueueScheduler scheduler;
  PoolCapacity pool;
};

QueueConfig TwoTeams(double a, double b, double b_weight = 1) {
  return QueueConfig()
      .WithCohort("gpus")
      .value()
      .WithQueue(Team("a", "gpus", a))
      .value()
      .WithQueue(Team("b", "gpus", b, b_weight))
      .value();
}

// Gangs of one shape in one queue share a quota verdict within a pass only
// while the ledger is unchanged: the first one admitted uses the quota the
// next would have had.
TEST(QueueScheduler, GangsOfOneShapeGetAFreshQuotaVerdictOnceOneIsAdmitted) {
  QueueConfig config =
      QueueConfig().WithQueue(Team("a", "", 4)).value();  // no cohort: 4 GPUs at most
  Cluster c(std::move(config), 16);
  for (const std::string id : {"s0", "s1", "s2"}) {
    c.pool.Add(id, Gpus(3));
    GangRequest r{id, "a", 0, Gpus(3)};
    r.shape = 42;
    ASSERT_TRUE(c.scheduler.Submit(r, 0).ok());
  }
  EXPECT_THAT(c.Pass(1).admitted, ElementsAre("s0"));
  EXPECT_EQ(c.scheduler.Find("s1")->reason.kind, GangWait::kQuota);
  EXPECT_EQ(c.scheduler.Find("s2")->reason.kind, GangWait::kQuota);
  // Gangs of one shape share one verdict.
  EXPECT_EQ(c.scheduler.Find("s1")->reason.quota(), c.scheduler.Find("s2")->reason.quota());
  c.End("s0");
  EXPECT_THAT(c.Pass(2).admitted, ElementsAre("s1"));
  EXPECT_EQ(c.State("s1"), GangState::kRunning);
  EXPECT_THAT(GangReasonText(*c.scheduler.Find("s2")),
              HasSubstr("GPU 3 in use + 3 asked would pass its quota of 4"));
}

TEST(QueueScheduler, AQueueBelowItsQuotaReclaimsWhatAnotherBorrowed) {
  Cluster c(TwoTeams(8, 8), 16);
  for (int i = 0; i < 4; ++i) {  // a borrows all of b's idle quota
    c.Submit("a" + std::to_string(i), "a", 4, i);
    EXPECT_EQ(c.Pass(i).admitted.size(), 1u);
  }
  c.Submit("b0", "b", 8, 20);
  PassResult r = c.Pass(30);
  EXPECT_THAT(r.admitted, IsEmpty());
  // The two youngest of a's gangs, and only two: 8 GPUs are enough.
  EXPECT_THAT(Victims(r), UnorderedElementsAre("a2", "a3"));
  for (const Preemption& p : r.preempted) {
    EXPECT_EQ(p.rule, PreemptionRule::kReclaim);
    EXPECT_EQ(p.by, "b0");
    EXPECT_EQ(p.by_queue, "b");
    EXPECT_EQ(PreemptionText(p), "preempted by b0 of queue b (reclaim)");
  }
  EXPECT_EQ(c.State("b0"), GangState::kClaimed);
  EXPECT_EQ(c.State("a3"), GangState::kPreempting);
  // Until the victims stop, b0 waits and no one takes the room.
  EXPECT_THAT(c.Pass(31).admitted, IsEmpty());
  c.Stopped(r, 40);
  EXPECT_THAT(c.Pass(41).admitted, ElementsAre("b0"));
  EXPECT_EQ(c.State("a2"), GangState::kPending);
  EXPECT_EQ(c.scheduler.Find("a2")->preemptions, 1u);
  ASSERT_NE(c.scheduler.Find("a2")->preempted_by, nullptr);
  EXPECT_EQ(c.scheduler.Find("a2")->preempted_by->by, "b0");
  EXPECT_THAT(GangReasonText(*c.scheduler.Find("a2")), HasSubstr("preempted by b0"));
  c.End("b0");
  EXPECT_THAT(c.Pass(50).admitted, ElementsAre("a2", "a3"));  // back in their old order
}

// A victim costs the work it would lose: the GPU-hours since its last
// checkpoint, or since its start when it reported none.
TEST(QueueScheduler, VictimsAreTheGangsThatLoseTheLeastSinceTheirLastCheckpoint) {
  Cluster c(TwoTeams(8, 8), 16);
  for (int i = 0; i < 4; ++i) c.Submit("a" + std::to_string(i), "a", 4, 0);
  ASSERT_EQ(c.Pass(0).admitted.size(), 4u);  // a borrows all of b's idle quota
  // a0 and a1 saved a checkpoint a moment ago; a2 and a3 never did.
  c.scheduler.Checkpointed("a0", 900);
  c.scheduler.Checkpointed("a1", 950);
  c.Submit("b0", "b", 8, 960);
  PassResult r = c.Pass(1000);
  EXPECT_THAT(Victims(r), UnorderedElementsAre("a0", "a1"));
  // A checkpoint of an earlier run counts for nothing once it runs again.
  c.Stopped(r, 1010);
  c.End("b0");
  ASSERT_THAT(c.Pass(1020).admitted, ElementsAre("a0", "a1"));
  EXPECT_EQ(c.scheduler.Find("a0")->checkpointed_ms, 0);
  // Nor does one reported before the start (a late report of that run).
  c.scheduler.Checkpointed("a1", 950);
  EXPECT_EQ(c.scheduler.Find("a1")->checkpointed_ms, 0);
}

// a (quota 6) runs 2 GPUs, b (quota 10) borrows 4 on a cluster of 16, and
// a asks for 6 more (a2): the pass that follows.
PassResult ABelowItsQuotaAsksPastIt(Cluster& c) {
  c.Submit("a1", "a", 2, 0);
  for (const std::string id : {"b0", "b1", "b2"}) c.Submit(id, "b", 4, 0);
  c.Submit("b3", "b", 2, 0);
  EXPECT_EQ(c.Pass(0).admitted.size(), 5u);
  c.Submit("a2", "a", 6, 10);
  return c.Pass(20);
}

// a2 would take a past its quota, but a is below it and its share with a2
// (8 of 16) stays at most b's without the victims: a reclaims what b
// borrows, and no more.
TEST(QueueScheduler, AQueueBelowItsQuotaReclaimsForAGangThatTakesItPastIt) {
  Cluster c(TwoTeams(6, 10), 16);
  PassResult r = ABelowItsQuotaAsksPastIt(c);
  EXPECT_THAT(Victims(r), UnorderedElementsAre("b3", "b0"));
  for (const Preemption& p : r.preempted) EXPECT_EQ(p.rule, PreemptionRule::kReclaim);
  c.Stopped(r, 30);
  EXPECT_THAT(c.Pass(31).admitted, ElementsAre("a2"));
  // a now borrows 2 and b is at its quota: b reclaims nothing back.
  EXPECT_THAT(c.Pass(40).preempted, IsEmpty());
}

// The same, but b weighs 4: its share without the victims (8 of 16 / 4)
// would fall below a's with a2 (8 of 16), so a2 waits.
TEST(QueueScheduler, AQueueReclaimsPastItsQuotaOnlyFromAQueueWithALargerShare) {
  Cluster c(TwoTeams(6, 10, /*b_weight=*/4), 16);
  EXPECT_THAT(ABelowItsQuotaAsksPastIt(c).preempted, IsEmpty());
  EXPECT_EQ(c.State("a2"), GangState::kPending);
  // Within its quota a gang of a reclaims whatever the shares.
  c.Submit("a3", "a", 4, 21);
  EXPECT_THAT(Victims(c.Pass(30)), ElementsAre("b0"));
}

// One queue "a" of 16 GPUs whose within_queue_preemption is `policy`.
QueueConfig OneQueue(const std::string& policy) {
  QueueInput in;
  in.name = "a";
  in.nominal = {{"GPU", 16}};
  in.within_queue_preemption = policy;
  return QueueConfig().WithQueue(QueueSpecFromInput(in, "queue").value()).value();
}

// On 8 GPUs, "big" waits for all 8 while "small", which came after it,
// runs on 4 (the quota has room for both): only LowerOrNewerEqualPriority
// lets big preempt it, and no gang preempts one that came before it.
TEST(QueueScheduler, LowerOrNewerEqualPriorityPreemptsTheLaterGangsOfTheQueueAndPriority) {
  for (const std::string policy : {"LowerPriority", "LowerOrNewerEqualPriority"}) {
    SCOPED_TRACE(policy);
    QueueSchedulerOptions options;
    options.reservations = false;  // else small would start past big's as a backfill victim
    Cluster c(OneQueue(policy), 8, options);
    c.Submit("first", "a", 4, 0);
    ASSERT_THAT(c.Pass(1).admitted, ElementsAre("first"));
    c.Submit("big", "a", 8, 2);
    c.Submit("small", "a", 4, 3);
    ASSERT_THAT(c.Pass(4).admitted, ElementsAre("small"));
    c.End("first");
    PassResult r = c.Pass(5);
    if (policy == "LowerPriority") {
      EXPECT_THAT(r.preempted, IsEmpty());
      EXPECT_EQ(c.State("big"), GangState::kPending);
      continue;
    }
    ASSERT_THAT(Victims(r), ElementsAre("small"));
    EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kNewer);
    EXPECT_THAT(PreemptionText(r.preempted[0]), HasSubstr("(newer, same priority)"));
    c.Stopped(r, 6);
    EXPECT_THAT(c.Pass(7).admitted, ElementsAre("big"));
    // small came after big: it waits, and preempts nothing.
    EXPECT_THAT(c.Pass(8).preempted, IsEmpty());
    EXPECT_EQ(c.State("small"), GangState::kPending);
  }
}

// The same when "big" would borrow: queue a's quota is 4 of the cohort's 8,
// b's 4 are idle. "big" asks 8, past a's quota, so it may preempt only a's
// own later gang, never b's quota (b runs nothing to reclaim).
TEST(QueueScheduler, ABorrowingGangPreemptsTheLaterGangsOfItsQueueAndPriorityToo) {
  QueueInput in;
  in.name = "a";
  in.cohort = "gpus";
  in.nominal = {{"GPU", 4}};
  in.within_queue_preemption = "LowerOrNewerEqualPriority";
  QueueSpec a = QueueSpecFromInput(in, "queue").value();
  QueueSchedulerOptions options;
  options.reservations = false;
  Cluster c(QueueConfig()
                .WithCohort("gpus")
                .value()
                .WithQueue(a)
                .value()
                .WithQueue(Team("b", "gpus", 4))
                .value(),
            8, options);
  c.Submit("first", "a", 4, 0);
  ASSERT_THAT(c.Pass(1).admitted, ElementsAre("first"));
  c.Submit("big", "a", 8, 2);
  c.Submit("small", "a", 4, 3);
  ASSERT_THAT(c.Pass(4).admitted, ElementsAre("small"));  // a borrows b's 4
  c.End("first");
  PassResult r = c.Pass(5);
  ASSERT_THAT(Victims(r), ElementsAre("small"));
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kNewer);
  c.Stopped(r, 6);
  EXPECT_THAT(c.Pass(7).admitted, ElementsAre("big"));
  // b's gang within its quota takes back what big borrows.
  c.Submit("b0", "b", 4, 8);
  r = c.Pass(9);
  ASSERT_THAT(Victims(r), ElementsAre("big"));
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kReclaim);
}

TEST(QueueScheduler, AQueueThatNeverPreemptsWithinItselfKeepsItsLowerPriorityGangs) {
  Cluster c(OneQueue("Never"), 8);
  c.Submit("low", "a", 8, 0, /*priority=*/1);
  ASSERT_THAT(c.Pass(1).admitted, ElementsAre("low"));
  c.Submit("high", "a", 8, 2, /*priority=*/10);
  EXPECT_THAT(c.Pass(3).preempted, IsEmpty());
  EXPECT_EQ(c.State("high"), GangState::kPending);
}

TEST(QueueScheduler, WithinAQueueAHigherPriorityPreemptsLowerButNeverAProtectedGang) {
  Cluster c(QueueConfig(), 8);
  c.Submit("low", "", 4, 0, /*priority=*/1);
  c.Submit("kept", "", 4, 1, /*priority=*/0, std::nullopt, /*preemptible=*/false);
  ASSERT_EQ(c.Pass(2).admitted.size(), 2u);
  c.Submit("high", "", 4, 3, /*priority=*/10);
  PassResult r = c.Pass(4);
  ASSERT_THAT(Victims(r), ElementsAre("low"));
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kPriority);
  c.Stopped(r, 5);
  EXPECT_THAT(c.Pass(6).admitted, ElementsAre("high"));
  // "kept" may not be preempted, and "high" alone frees too little: none is.
  c.Submit("top", "", 8, 7, /*priority=*/100);
  EXPECT_THAT(c.Pass(8).preempted, IsEmpty());
  EXPECT_EQ(c.State("high"), GangState::kRunning);
}

TEST(QueueScheduler, NoPreemptionWhenTheFreedRoomWouldNotBeEnough) {
  Cluster c(QueueConfig(), 8);
  c.Submit("low", "", 2, 0, 0);
  c.Submit("kept", "", 6, 1, 0, std::nullopt, false);
  ASSERT_EQ(c.Pass(2).admitted.size(), 2u);
  c.Submit("high", "", 4, 3, 10);
  PassResult r = c.Pass(4);
  EXPECT_THAT(r.preempted, IsEmpty());  // 2 freed GPUs would not fit 4
  EXPECT_EQ(c.State("low"), GangState::kRunning);
  EXPECT_EQ(c.scheduler.Find("high")->reason.kind, GangWait::kRoom);
}

TEST(QueueScheduler, AProtectedGangRunsOnlyWithinItsQueuesQuota) {
  Cluster c(TwoTeams(4, 4), 8);
  c.Submit("a0", "a", 4, 0, 0, std::nullopt, false);
  c.Submit("a1", "a", 4, 1, 0, std::nullopt, false);
  EXPECT_THAT(c.Pass(2).admitted, ElementsAre("a0"));
  EXPECT_EQ(c.scheduler.Find("a1")->reason.kind, GangWait::kNominalOnly);
}

TEST(QueueScheduler, QueuesSplitIdleCapacityByWeightedDominantShare) {
  QueueConfig config = QueueConfig()
                           .WithQueue(Team("light", "", -1, 1))
                           .value()
                           .WithQueue(Team("heavy", "", -1, 3))
                           .value();
  Cluster c(std::move(config), 8);
  for (int i = 0; i < 10; ++i) {
    c.Submit("l" + std::to_string(i), "light", 1, i);
    c.Submit("h" + std::to_string(i), "heavy", 1, i);
  }
  c.Pass(100);
  EXPECT_EQ(c.scheduler.Queue("light", c.pool.Capacity()).running, 2u);
  EXPECT_EQ(c.scheduler.Queue("heavy", c.pool.Capacity()).running, 6u);
}

TEST(QueueScheduler, BackfillStartsOnlyWhatCannotDelayTheReservedGang) {
  Cluster c(QueueConfig(), 10);
  c.Submit("running", "", 6, 0, 0, /*limit=*/1000);
  ASSERT_EQ(c.Pass(0).admitted.size(), 1u);
  c.Submit("big", "", 10, 10);
  c.Submit("short", "", 2, 11, 0, /*limit=*/500);         // ends by 600 < 1000
  c.Submit("long", "", 2, 12, 0, /*limit=*/5000, false);  // would delay, may not be preempted
  PassResult r = c.Pass(100);
  EXPECT_THAT(r.admitted, ElementsAre("short"));
  EXPECT_EQ(c.scheduler.Find("long")->reason.kind, GangWait::kReservation);
  EXPECT_EQ(c.scheduler.Find("long")->reason.gang(), "big");
  c.End("short");
  c.Submit("open", "", 2, 13);  // no limit: only as preemptible
  r = c.Pass(700);
  EXPECT_THAT(r.admitted, ElementsAre("open"));
  EXPECT_EQ(c.State("long"), GangState::kPending);
  EXPECT_EQ(c.scheduler.Find("open")->reason.kind, GangWait::kBackfilled);
  // When "running" ends, "big" takes back the room "open" borrowed.
  c.End("running");
  r = c.Pass(1000);
  ASSERT_THAT(Victims(r), ElementsAre("open"));
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kBackfill);
  c.Stopped(r, 1001);
  EXPECT_THAT(c.Pass(1002).admitted, ElementsAre("big"));
}

// On 6 GPUs, queue a (quota 2) borrows 3 of b's 10 with a0 (ending by its
// limit at 1000) and a1; a2 would borrow 4 and waits, 1 GPU free.
void ABorrowsAndA2Waits(Cluster& c) {
  c.Submit("a0", "a", 3, 0, 0, /*limit=*/1000);
  c.Submit("a1", "a", 2, 1);
  ASSERT_EQ(c.Pass(2).admitted.size(), 2u);
  c.Submit("a2", "a", 4, 3);  // would borrow; 1 GPU is free
  EXPECT_THAT(c.Pass(4).admitted, IsEmpty());
}

// A borrowing gang's reservation does not hold against another queue's
// quota: that queue's gang, within its nominal quota, starts on the room
// the borrowing gang waits for as if it held none, is not backfilled past
// it, and is not preempted for it later.
TEST(QueueScheduler, ABorrowingGangsReservationLeavesAnotherQueuesQuotaAlone) {
  Cluster c(TwoTeams(2, 10), 6);
  ABorrowsAndA2Waits(c);
  c.Submit("b0", "b", 1, 5);
  EXPECT_THAT(c.Pass(6).admitted, ElementsAre("b0"));
  EXPECT_EQ(c.scheduler.Find("b0")->reason.kind, GangWait::kRunning);  // not "backfilled past a2"
  c.End("a0");
  PassResult r = c.Pass(1000);
  EXPECT_THAT(r.preempted, IsEmpty());
  EXPECT_THAT(r.admitted, IsEmpty());  // 3 GPUs free: a2 waits for b0 to end
  EXPECT_EQ(c.State("b0"), GangState::kRunning);
}

// Against gangs that would borrow too, a borrowing gang's reservation
// holds as any other: a later one starts on its room only as preemptible,
// and is preempted (kBackfill) once that makes the room.
TEST(QueueScheduler, ABorrowingGangPreemptsTheBorrowersThatStartedPastIt) {
  Cluster c(TwoTeams(2, 10), 6);
  ABorrowsAndA2Waits(c);
  c.Submit("a3", "a", 1, 5);  // would borrow too
  EXPECT_THAT(c.Pass(6).admitted, ElementsAre("a3"));
  EXPECT_EQ(c.scheduler.Find("a3")->reason.kind, GangWait::kBackfilled);
  c.End("a0");  // 3 GPUs free: a2 fits once a3 stops
  PassResult r = c.Pass(1000);
  ASSERT_THAT(Victims(r), ElementsAre("a3"));
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kBackfill);
  c.Stopped(r, 1001);
  EXPECT_THAT(c.Pass(1002).admitted, ElementsAre("a2"));
}

// Starving gangs search for victims past the per-pass budget, and do not
// spend it: a starving gang that finds none leaves the budget to others.
TEST(QueueScheduler, AStarvingGangsSearchDoesNotSpendThePassBudget) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = 10;
  options.max_preemption_searches = 1;
  Cluster c(QueueConfig(), 8, options);
  c.Submit("low", "", 4, 0);
  c.Submit("kept", "", 4, 0, 0, std::nullopt, /*preemptible=*/false);
  ASSERT_EQ(c.Pass(0).admitted.size(), 2u);
  c.Submit("huge", "", 8, 1, /*priority=*/10);  // "kept" leaves it no victims
  c.Submit("high", "", 4, 95, /*priority=*/10);
  PassResult r = c.Pass(100);  // huge has starved, high has not
  EXPECT_THAT(Victims(r), ElementsAre("low"));
  EXPECT_EQ(c.State("high"), GangState::kClaimed);
}

// A pass treats as starving the oldest gang past the bound of each queue,
// then the oldest others up to max_starving; only those search for victims
// past the budget (here none).
TEST(QueueScheduler, APassTreatsTheOldestStarvingGangOfEachQueueThenOthersUpToTheCap) {
  for (const auto& [cap, searched] :
       {std::pair(size_t{1}, size_t{2}), std::pair(size_t{3}, size_t{3})}) {
    QueueSchedulerOptions options;
    options.starvation_bound_ms = 10;
    options.max_preemption_searches = 0;
    options.max_starving = cap;
    Cluster c(TwoTeams(8, 8), 16, options);
    for (const char* id : {"a0", "a1"}) c.Submit(id, "a", 4, 0);
    for (const char* id : {"b0", "b1"}) c.Submit(id, "b", 4, 0);
    ASSERT_EQ(c.Pass(0).admitted.size(), 4u);
    c.Submit("a_old", "a", 4, 1, /*priority=*/10);
    c.Submit("b_old", "b", 4, 2, /*priority=*/10);
    c.Submit("a_young", "a", 4, 3, /*priority=*/10);
    EXPECT_EQ(c.Pass(100).preempted.size(), searched) << "max_starving " << cap;
    EXPECT_EQ(c.State("a_old"), GangState::kClaimed);
    EXPECT_EQ(c.State("b_old"), GangState::kClaimed);  // the oldest of its queue, past the cap
    EXPECT_EQ(c.State("a_young"), searched == 3 ? GangState::kClaimed : GangState::kPending);
  }
}

TEST(QueueScheduler, WithoutReservationsSmallGangsPassABlockedOne) {
  QueueSchedulerOptions greedy;
  greedy.reservations = false;
  greedy.preemption = false;
  Cluster c(QueueConfig(), 8, greedy);
  c.Submit("running", "", 6, 0);
  c.Pass(0);
  c.Submit("big", "", 8, 1);
  c.Submit("small", "", 2, 2);
  EXPECT_THAT(c.Pass(3).admitted, ElementsAre("small"));
}

TEST(QueueScheduler, PastTheStarvationBoundAQueueAdmitsNothingBehindItsHead) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = 1000;
  QueueConfig config = QueueConfig().WithQueue(Team("q", "", 8)).value();
  Cluster c(std::move(config), 16, options);
  c.Submit("r0", "q", 4, 0);
  c.Submit("r1", "q", 4, 0);
  c.Pass(0);
  c.Submit("big", "q", 8, 10);
  c.Submit("s0", "q", 2, 11);
  c.End("r0");
  EXPECT_THAT(c.Pass(500).admitted, ElementsAre("s0"));  // big waits for quota; s0 fits it
  c.End("s0");
  c.Submit("s1", "q", 2, 600);
  EXPECT_THAT(c.Pass(1500).admitted, IsEmpty());  // big has waited past the bound
  c.End("r1");
  EXPECT_THAT(c.Pass(1600).admitted, ElementsAre("big"));
}

// A gang that does not fit even the idle cluster (Ray's infeasible group:
// a type the cluster lacks, more than it has) keeps no room and holds no
// quota, before the starvation bound or after: the gangs behind it start.
TEST(QueueScheduler, AGangThatFitsNoIdleClusterKeepsNoRoomFromTheGangsBehindIt) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = 1000;
  QueueConfig config = QueueConfig().WithQueue(Team("q", "", 32)).value();
  Cluster c(std::move(config), 8, options);
  c.Submit("huge", "q", 16, 0);
  c.Submit("fixed", "q", 2, 1, 0, std::nullopt, /*preemptible=*/false);
  EXPECT_THAT(c.Pass(2).admitted, ElementsAre("fixed"));
  EXPECT_EQ(c.scheduler.Find("huge")->reason.kind, GangWait::kInfeasible);
  c.Submit("later", "q", 6, 3);
  EXPECT_THAT(c.Pass(2000).admitted, ElementsAre("later"));  // huge waited past the bound
  EXPECT_EQ(c.State("huge"), GangState::kPending);
}

TEST(QueueScheduler, RefusesUnknownQueuesAndDeletingAQueueInUse) {
  Cluster c(TwoTeams(4, 4), 8);
  GangRequest r{"x", "nope", 0, Gpus(1)};
  absl::Status s = c.scheduler.Submit(r, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("queue"));
  c.Submit("a0", "a", 1, 0);
  absl::Status deleted = c.scheduler.Reconfigure(c.scheduler.config().WithoutQueue("a").value());
  EXPECT_EQ(deleted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.scheduler.config().FindQueue("a"), nullptr);
  EXPECT_TRUE(c.scheduler.Reconfigure(c.scheduler.config().WithoutQueue("b").value()).ok());
}

TEST(QueueScheduler, ARestoredSchedulerKeepsUsageOrderAndPreemptions) {
  Cluster c(TwoTeams(8, 8), 16);
  for (int i = 0; i < 4; ++i) {
    c.Submit("a" + std::to_string(i), "a", 4, i);
    c.Pass(i);
  }
  c.Submit("b0", "b", 8, 10);
  PassResult r = c.Pass(11);  // b0 claims; a2 and a3 are being preempted
  ASSERT_EQ(r.preempted.size(), 2u);
  c.Submit("a4", "a", 4, 12);
  c.Submit("b1", "b", 2, 13);
  std::vector<QueueScheduler::GangRecord> saved = c.scheduler.Export();
  ASSERT_EQ(saved.size(), 7u);
  EXPECT_EQ(saved.front().request.id, "a0");  // in place-in-line order

  // A new head: the same config, the same pool (its raylets kept their bundles).
  QueueScheduler restored(c.scheduler.config(), {});
  ASSERT_TRUE(restored.Restore(saved).ok());
  EXPECT_EQ(restored.ledger().Usage("a"), c.scheduler.ledger().Usage("a"));
  EXPECT_EQ(restored.Find("a3")->state, GangState::kPreempting);
  EXPECT_EQ(restored.Find("b0")->state, GangState::kPending);  // it claims again
  EXPECT_FALSE(restored.Restore(saved).ok());                  // only into an empty one
  // The victims stop, in both: the same gangs start, in the same order.
  for (QueueScheduler* s : {&c.scheduler, &restored}) {
    s->Preempted("a2", 20);
    s->Preempted("a3", 20);
  }
  c.pool.Release("a2");
  c.pool.Release("a3");
  PoolCapacity copy = c.pool;
  const std::vector<std::string> original = c.scheduler.Pass(21, c.pool).admitted;
  EXPECT_EQ(restored.Pass(21, copy).admitted, original);
  EXPECT_THAT(original, ::testing::Contains("b0"));
}

TEST(QueueScheduler, RestoreRefusesAGangOfAnUnknownQueueAndRestoresNothing) {
  Cluster c(TwoTeams(8, 8), 16);
  c.Submit("a0", "a", 4, 0);
  c.Submit("b0", "b", 4, 0);
  std::vector<QueueScheduler::GangRecord> saved = c.scheduler.Export();
  QueueScheduler fewer(c.scheduler.config().WithoutQueue("b").value(), {});
  absl::Status s = fewer.Restore(saved);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("queue 'b'"));
  EXPECT_EQ(fewer.Find("a0"), nullptr);
}

}  // namespace
}  // namespace berth
