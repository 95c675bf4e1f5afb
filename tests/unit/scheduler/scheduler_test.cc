// Scheduler's two-phase commit loop against fake raylets served over real
// gRPC on 127.0.0.1: a group is CREATED once every node prepared and
// committed; a refused prepare, a failed commit or a prepare that times out
// cancels every node before the group is placed again; a group removed
// during its commit is released when the commit ends. Every wait is for an
// event (a raylet's op, a group's state), with a deadline.
#include "scheduler/scheduler.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/scheduler/fake_raylet.h"

namespace berth {
namespace {

using ::testing::ElementsAre;

using testing::AppliedOp;
using testing::kDeadline;

constexpr uint64_t kEpoch = 7;

// "prepare@1": an op's kind and what its request id says after the epoch
// and the group: a commit's attempt ("e<epoch>/<group>/<attempt>/<node>/
// <phase>"), or why a group let go ("e<epoch>/<group>/remove/<node>").
std::vector<std::string> KindsAndAttempts(const std::vector<AppliedOp>& ops) {
  std::vector<std::string> out;
  for (const AppliedOp& op : ops) {
    std::vector<std::string> parts = absl::StrSplit(op.request_id, '/');
    out.push_back(absl::StrCat(op.kind, "@", parts.size() > 2 ? parts[2] : "?"));
  }
  return out;
}

bool SawCancel(const std::vector<AppliedOp>& ops) {
  for (const AppliedOp& op : ops) {
    if (op.kind == "cancel") return true;
  }
  return false;
}

// A store in memory whose writes wait while it is held: the head's
// changes are staged but not yet durable.
class HoldingStore final : public StateStore {
 public:
  absl::Status Apply(const std::vector<Write>& batch) override {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](bool* held) { return !*held; }, &held_));
    }
    return inner_->Apply(batch);
  }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    return inner_->Scan(table);
  }
  std::string Describe() const override { return "holding"; }
  void Hold(bool held) {
    absl::MutexLock lock(&mu_);
    held_ = held;
  }

 private:
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<StateStore> inner_ = NewMemoryStateStore();
};

class SchedulerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    store_->Hold(false);
    for (auto& raylet : raylets_.all()) raylet->Hold(false);
    scheduler_.reset();  // joins its threads, whose calls reach the raylets
  }

  // `nodes` raylets of one GPU each, and the scheduler, whose raylet calls
  // time out after `timeout`.
  void Start(int nodes, absl::Duration timeout = absl::Seconds(5)) {
    for (int n = 0; n < nodes; ++n) raylets_.Add(state_, absl::StrCat("n", n));
    clients_ = std::make_unique<RayletClients>(timeout);
    scheduler_ = std::make_unique<Scheduler>(&state_, clients_.get());
    scheduler_->Start(kEpoch);
  }

  // A group of `bundles` one-GPU bundles, each on a node of its own.
  std::string CreateGroup(int bundles) {
    std::vector<Bundle> spec(bundles, Bundle{ResourceSet::Of({{"GPU", 1}}), {}});
    v1::CreatePlacementGroupRequest meta;
    meta.set_request_id(absl::StrCat("create-", next_request_++));
    absl::StatusOr<std::string> id = scheduler_->CreateGroup(
        PlacementGroupSpec::Create(std::move(spec), PlacementStrategy::kStrictSpread).value(),
        meta);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  // Waits until the group is in `state` (nullopt: gone); false after kDeadline.
  bool AwaitGroup(const std::string& id, std::optional<v1::PlacementGroupState> state) {
    absl::MutexLock lock(&state_.mu);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
      return state_.groups.State(id) == state;
    };
    return state_.mu.AwaitWithTimeout(absl::Condition(&reached), kDeadline);
  }

  // The group CREATED on every raylet, each holding one committed bundle.
  void ExpectCreatedEverywhere(const std::string& id) {
    ASSERT_TRUE(AwaitGroup(id, v1::PLACEMENT_GROUP_STATE_CREATED));
    for (auto& raylet : raylets_.all()) {
      ASSERT_EQ(raylet->held().count(id), 1u);
      EXPECT_THAT(raylet->held().at(id), ElementsAre(::testing::Pair(::testing::_, true)));
    }
  }

  HeadConfig Config() {
    HeadConfig config;
    config.liveness.heartbeat_period_ms = 3'600'000;  // no node dies in a test
    config.committer_threads = 4;
    return config;
  }

  HoldingStore* store_ = new HoldingStore;  // owned by state_
  HeadState state_{Config(), std::unique_ptr<StateStore>(store_)};
  testing::FakeRaylets raylets_;  // after state_: they stop serving before it goes
  std::unique_ptr<RayletClients> clients_;
  std::unique_ptr<Scheduler> scheduler_;
  int next_request_ = 0;
};

TEST_F(SchedulerTest, AGroupIsCreatedOncePreparedAndCommittedOnEveryNode) {
  Start(2);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_.all()) {
    const std::vector<AppliedOp> ops = raylet->ops();
    EXPECT_THAT(KindsAndAttempts(ops), ElementsAre("prepare@1", "commit@1"));
    // This head's epoch first: a raylet's memory of an earlier head's ids
    // cannot answer them.
    for (const AppliedOp& op : ops) EXPECT_TRUE(absl::StartsWith(op.request_id, "e7/" + id + "/"));
  }
  const v1::PlacementGroupInfo info = scheduler_->GetGroup(id).info.value();
  EXPECT_EQ(info.locations_size(), 2);
  EXPECT_NE(info.locations(0).node_id(), info.locations(1).node_id());
}

TEST_F(SchedulerTest, AOneNodeGroupCommitsWithItsPrepare) {
  Start(1);
  const std::string id = CreateGroup(1);
  ExpectCreatedEverywhere(id);
  EXPECT_THAT(KindsAndAttempts(raylets_[0].ops()), ElementsAre("prepare+commit@1"));
}

TEST_F(SchedulerTest, ARefusedPrepareCancelsEveryNodeThenTheGroupIsPlacedAgain) {
  Start(2);
  raylets_[1].RefusePrepares(1);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_.all()) {
    const std::vector<AppliedOp> ops = raylet->ops();
    // The cancel reaches each node before the next attempt's prepare.
    ASSERT_THAT(KindsAndAttempts(ops),
                ElementsAre("prepare@1", "cancel@1", "prepare@2", "commit@2"));
    EXPECT_EQ(ops[1].held_after, 0u) << "the failed attempt left a bundle reserved";
  }
  EXPECT_FALSE(raylets_[1].ops()[0].ok);
}

TEST_F(SchedulerTest, AFailedCommitCancelsEveryNodeThenTheGroupIsPlacedAgain) {
  Start(2);
  raylets_[0].FailCommits(1);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_.all()) {
    const std::vector<AppliedOp> ops = raylet->ops();
    ASSERT_THAT(KindsAndAttempts(ops),
                ElementsAre("prepare@1", "commit@1", "cancel@1", "prepare@2", "commit@2"));
    EXPECT_EQ(ops[2].held_after, 0u) << "the failed attempt left a bundle reserved";
  }
  EXPECT_FALSE(raylets_[0].ops()[1].ok);
  EXPECT_TRUE(raylets_[1].ops()[1].ok);  // committed, then cancelled with the rest
}

TEST_F(SchedulerTest, AGroupRemovedDuringItsCommitIsReleasedWhenTheCommitEnds) {
  Start(2);
  raylets_[0].Hold(true);
  const std::string id = CreateGroup(2);
  ASSERT_TRUE(raylets_[0].AwaitOps([](const auto&, int held_calls) { return held_calls > 0; }));
  scheduler_->RemoveGroup(id);
  // Nothing is released while the commit is under way.
  EXPECT_FALSE(SawCancel(raylets_[1].ops()));
  raylets_[0].Hold(false);
  for (auto& raylet : raylets_.all()) {
    ASSERT_TRUE(raylet->AwaitOps([](const std::vector<AppliedOp>& ops, int) {
      return !ops.empty() && ops.back().kind == "cancel" && ops.back().held_after == 0;
    })) << "the removed group's bundles were not released";
    EXPECT_TRUE(raylet->held().empty());
  }
  EXPECT_THAT(KindsAndAttempts(raylets_[0].ops()),
              ElementsAre("prepare@1", "commit@1", "cancel@remove"));
  EXPECT_EQ(scheduler_->GetGroup(id).info.value().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  // The head let go of its GPUs too: a group of both fits.
  ExpectCreatedEverywhere(CreateGroup(2));
}

// A removed group's room is given back at once, and its cancel is queued
// for its node in the same step, ahead of any prepare placed there; it is
// sent once the removal is durable (a head restarted before finds the
// bundles held).
TEST_F(SchedulerTest, ARemovedGroupsCancelReachesItsNodeBeforeTheNextPrepareThere) {
  Start(1);
  const std::string first = CreateGroup(1);
  ExpectCreatedEverywhere(first);
  store_->Hold(true);
  std::thread remover([&] { scheduler_->RemoveGroup(first); });
  ASSERT_TRUE(AwaitGroup(first, v1::PLACEMENT_GROUP_STATE_REMOVED));
  std::thread creator([&] { CreateGroup(1); });
  {
    // The next group is placed in the room while the removal is not yet
    // durable, and its commit begins.
    absl::MutexLock lock(&state_.mu);
    auto committing = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
      v1::ListPlacementGroupsResponse listed;
      state_.groups.List({}, &listed);
      for (const v1::PlacementGroupInfo& g : listed.placement_groups()) {
        if (absl::StrContains(g.pending_reason(), "two-phase commit")) return true;
      }
      return false;
    };
    EXPECT_TRUE(state_.mu.AwaitWithTimeout(absl::Condition(&committing), kDeadline));
  }
  EXPECT_THAT(KindsAndAttempts(raylets_[0].ops()), ElementsAre("prepare+commit@1"))
      << "a raylet call went out before the removal was durable";
  store_->Hold(false);
  remover.join();
  creator.join();
  ASSERT_TRUE(
      raylets_[0].AwaitOps([](const std::vector<AppliedOp>& ops, int) { return ops.size() == 3; }));
  const std::vector<AppliedOp> ops = raylets_[0].ops();
  EXPECT_THAT(KindsAndAttempts(ops),
              ElementsAre("prepare+commit@1", "cancel@remove", "prepare+commit@1"));
  for (const AppliedOp& op : ops) EXPECT_TRUE(op.ok) << op.kind << " " << op.request_id;
}

TEST_F(SchedulerTest, APrepareThatTimesOutIsCancelledEverywhereAndPlacedAgain) {
  Start(2, /*timeout=*/absl::Milliseconds(300));
  raylets_[0].Hold(true);
  const std::string id = CreateGroup(2);
  // The first attempt's calls to n0 time out (once retried): n1, which
  // prepared, is told to cancel it.
  ASSERT_TRUE(raylets_[1].AwaitOps([](const std::vector<AppliedOp>& ops, int) {
    return SawCancel(ops);
  })) << "the timed-out attempt was not cancelled";
  EXPECT_THAT(KindsAndAttempts(raylets_[1].ops()),
              ::testing::IsSupersetOf({"prepare@1", "cancel@1"}));
  raylets_[0].Hold(false);
  ExpectCreatedEverywhere(id);
  // n0 was told too, and the held calls of the attempt applied nothing.
  const std::vector<std::string> n0 = KindsAndAttempts(raylets_[0].ops());
  EXPECT_THAT(n0, ::testing::Contains("cancel@1"));
  EXPECT_THAT(n0, ::testing::Not(::testing::Contains("prepare@1")));
}

}  // namespace
}  // namespace berth
