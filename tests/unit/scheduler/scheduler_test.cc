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
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "berth/v1/raylet.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;

constexpr uint64_t kEpoch = 7;
constexpr absl::Duration kDeadline = absl::Seconds(20);

// One reservation op as a raylet applied it: "prepare", "prepare+commit",
// "commit" or "cancel", its request id, whether it succeeded, and how many
// bundles the raylet held right after.
struct AppliedOp {
  std::string kind;
  std::string request_id;
  bool ok = true;
  size_t held_after = 0;
};

// A raylet's reservation books: a prepare holds its bundles, a commit keeps
// them, a cancel lets go. The test may have it refuse prepares, fail
// commits, or hold calls with a prepare until it lets them go (a held call
// whose caller gave up by then applies nothing, as with a lost call).
class FakeRaylet final : public v1::RayletService::Service {
 public:
  grpc::Status ApplyBundleOps(grpc::ServerContext* context,
                              const v1::ApplyBundleOpsRequest* request,
                              v1::ApplyBundleOpsResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (HasPrepare(*request) && holding_) {
      ++held_calls_;
      mu_.Await(absl::Condition(
          +[](bool* holding) { return !*holding; }, &holding_));
      if (context->IsCancelled() || std::chrono::system_clock::now() > context->deadline()) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "the caller gave up");
      }
    }
    for (const v1::BundleOp& op : request->ops()) *response->add_results() = ApplyLocked(op);
    return grpc::Status::OK;
  }

  void RefusePrepares(int count) {
    absl::MutexLock lock(&mu_);
    refuse_prepares_ = count;
  }
  void FailCommits(int count) {
    absl::MutexLock lock(&mu_);
    fail_commits_ = count;
  }
  void Hold(bool holding) {
    absl::MutexLock lock(&mu_);
    holding_ = holding;
  }

  // Waits until `done(ops, held calls)` holds; false after kDeadline.
  bool AwaitOps(const std::function<bool(const std::vector<AppliedOp>&, int)>& done) {
    absl::MutexLock lock(&mu_);
    auto condition = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(ops_, held_calls_); };
    return mu_.AwaitWithTimeout(absl::Condition(&condition), kDeadline);
  }
  std::vector<AppliedOp> ops() {
    absl::MutexLock lock(&mu_);
    return ops_;
  }
  // group id -> its bundles here, with true for those committed.
  std::map<std::string, std::map<uint32_t, bool>> held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }

 private:
  static bool HasPrepare(const v1::ApplyBundleOpsRequest& request) {
    for (const v1::BundleOp& op : request.ops()) {
      if (op.has_prepare()) return true;
    }
    return false;
  }

  v1::BundleOpResult ApplyLocked(const v1::BundleOp& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    v1::BundleOpResult result;
    if (op.has_prepare()) {
      const v1::PrepareBundleResourcesRequest& prepare = op.prepare();
      const bool refuse = refuse_prepares_ > 0;
      refuse_prepares_ -= refuse ? 1 : 0;
      result.mutable_prepare()->set_prepared(!refuse);
      if (refuse) result.mutable_prepare()->set_reason("refused by the test");
      for (const v1::BundleReservation& b : prepare.bundles()) {
        if (!refuse) held_[prepare.placement_group_id()][b.bundle_index()] = prepare.commit();
      }
      Log(prepare.commit() ? "prepare+commit" : "prepare", prepare.request_id(), !refuse);
    } else if (op.has_commit()) {
      const bool fail = fail_commits_ > 0;
      fail_commits_ -= fail ? 1 : 0;
      if (fail) {
        result.set_code(grpc::StatusCode::UNAVAILABLE);
        result.set_message("commit failed by the test");
      }
      for (uint32_t b : op.commit().bundle_indices()) {
        if (!fail) held_[op.commit().placement_group_id()][b] = true;
      }
      Log("commit", op.commit().request_id(), !fail);
    } else if (op.has_cancel()) {
      auto group = held_.find(op.cancel().placement_group_id());
      for (uint32_t b : op.cancel().bundle_indices()) {
        if (group != held_.end()) group->second.erase(b);
      }
      if (group != held_.end() && group->second.empty()) held_.erase(group);
      Log("cancel", op.cancel().request_id(), true);
    }
    return result;
  }

  void Log(const std::string& kind, const std::string& request_id, bool ok)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t held = 0;
    for (const auto& [group, bundles] : held_) held += bundles.size();
    ops_.push_back({kind, request_id, ok, held});
  }

  absl::Mutex mu_;
  std::vector<AppliedOp> ops_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<uint32_t, bool>> held_ ABSL_GUARDED_BY(mu_);
  int refuse_prepares_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_commits_ ABSL_GUARDED_BY(mu_) = 0;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  int held_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

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

class SchedulerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& raylet : raylets_) raylet->Hold(false);
    scheduler_.reset();  // joins its threads, whose calls reach the raylets
    for (auto& server : servers_)
      server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  // `nodes` raylets of one GPU each, and the scheduler, whose raylet calls
  // time out after `timeout`.
  void Start(int nodes, absl::Duration timeout = absl::Seconds(5)) {
    for (int n = 0; n < nodes; ++n) AddNode(absl::StrCat("n", n));
    clients_ = std::make_unique<RayletClients>(timeout);
    scheduler_ = std::make_unique<Scheduler>(&state_, clients_.get());
    scheduler_->Start(kEpoch);
  }

  void AddNode(const std::string& id) {
    raylets_.push_back(std::make_unique<FakeRaylet>());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(raylets_.back().get());
    servers_.push_back(builder.BuildAndStart());
    ASSERT_NE(servers_.back(), nullptr);
    v1::RegisterNodeRequest r;
    r.set_node_id(id);
    r.set_address(absl::StrCat("127.0.0.1:", port));
    r.set_request_id("register-" + id);
    (*r.mutable_total()->mutable_amounts())["CPU"] = 8;
    (*r.mutable_total()->mutable_amounts())["GPU"] = 1;
    r.add_gpus()->set_accelerator_type("A10G");
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(state_.nodes.Register(r, HeadNowMs()).ok());
    state_.groups.OnNodesChanged(HeadNowMs());
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
    for (auto& raylet : raylets_) {
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

  std::vector<std::unique_ptr<FakeRaylet>> raylets_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  HeadState state_{Config(), nullptr};
  std::unique_ptr<RayletClients> clients_;
  std::unique_ptr<Scheduler> scheduler_;
  int next_request_ = 0;
};

TEST_F(SchedulerTest, AGroupIsCreatedOncePreparedAndCommittedOnEveryNode) {
  Start(2);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_) {
    const std::vector<AppliedOp> ops = raylet->ops();
    EXPECT_THAT(KindsAndAttempts(ops), ElementsAre("prepare@1", "commit@1"));
    // This head's epoch first: a raylet's memory of an earlier head's ids
    // cannot answer them.
    for (const AppliedOp& op : ops) EXPECT_TRUE(absl::StartsWith(op.request_id, "e7/" + id + "/"));
  }
  const v1::PlacementGroupInfo info = scheduler_->GetGroup(id).value();
  EXPECT_EQ(info.locations_size(), 2);
  EXPECT_NE(info.locations(0).node_id(), info.locations(1).node_id());
}

TEST_F(SchedulerTest, AOneNodeGroupCommitsWithItsPrepare) {
  Start(1);
  const std::string id = CreateGroup(1);
  ExpectCreatedEverywhere(id);
  EXPECT_THAT(KindsAndAttempts(raylets_[0]->ops()), ElementsAre("prepare+commit@1"));
}

TEST_F(SchedulerTest, ARefusedPrepareCancelsEveryNodeThenTheGroupIsPlacedAgain) {
  Start(2);
  raylets_[1]->RefusePrepares(1);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_) {
    const std::vector<AppliedOp> ops = raylet->ops();
    // The cancel reaches each node before the next attempt's prepare.
    ASSERT_THAT(KindsAndAttempts(ops),
                ElementsAre("prepare@1", "cancel@1", "prepare@2", "commit@2"));
    EXPECT_EQ(ops[1].held_after, 0u) << "the failed attempt left a bundle reserved";
  }
  EXPECT_FALSE(raylets_[1]->ops()[0].ok);
}

TEST_F(SchedulerTest, AFailedCommitCancelsEveryNodeThenTheGroupIsPlacedAgain) {
  Start(2);
  raylets_[0]->FailCommits(1);
  const std::string id = CreateGroup(2);
  ExpectCreatedEverywhere(id);
  for (auto& raylet : raylets_) {
    const std::vector<AppliedOp> ops = raylet->ops();
    ASSERT_THAT(KindsAndAttempts(ops),
                ElementsAre("prepare@1", "commit@1", "cancel@1", "prepare@2", "commit@2"));
    EXPECT_EQ(ops[2].held_after, 0u) << "the failed attempt left a bundle reserved";
  }
  EXPECT_FALSE(raylets_[0]->ops()[1].ok);
  EXPECT_TRUE(raylets_[1]->ops()[1].ok);  // committed, then cancelled with the rest
}

TEST_F(SchedulerTest, AGroupRemovedDuringItsCommitIsReleasedWhenTheCommitEnds) {
  Start(2);
  raylets_[0]->Hold(true);
  const std::string id = CreateGroup(2);
  ASSERT_TRUE(raylets_[0]->AwaitOps([](const auto&, int held_calls) { return held_calls > 0; }));
  scheduler_->RemoveGroup(id);
  // Nothing is released while the commit is under way.
  EXPECT_FALSE(SawCancel(raylets_[1]->ops()));
  raylets_[0]->Hold(false);
  for (auto& raylet : raylets_) {
    ASSERT_TRUE(raylet->AwaitOps([](const std::vector<AppliedOp>& ops, int) {
      return !ops.empty() && ops.back().kind == "cancel" && ops.back().held_after == 0;
    })) << "the removed group's bundles were not released";
    EXPECT_TRUE(raylet->held().empty());
  }
  EXPECT_THAT(KindsAndAttempts(raylets_[0]->ops()),
              ElementsAre("prepare@1", "commit@1", "cancel@remove"));
  EXPECT_EQ(scheduler_->GetGroup(id).value().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  // The head let go of its GPUs too: a group of both fits.
  ExpectCreatedEverywhere(CreateGroup(2));
}

TEST_F(SchedulerTest, APrepareThatTimesOutIsCancelledEverywhereAndPlacedAgain) {
  Start(2, /*timeout=*/absl::Milliseconds(300));
  raylets_[0]->Hold(true);
  const std::string id = CreateGroup(2);
  // The first attempt's calls to n0 time out (once retried): n1, which
  // prepared, is told to cancel it.
  ASSERT_TRUE(raylets_[1]->AwaitOps([](const std::vector<AppliedOp>& ops, int) {
    return SawCancel(ops);
  })) << "the timed-out attempt was not cancelled";
  EXPECT_THAT(KindsAndAttempts(raylets_[1]->ops()),
              ::testing::IsSupersetOf({"prepare@1", "cancel@1"}));
  raylets_[0]->Hold(false);
  ExpectCreatedEverywhere(id);
  // n0 was told too, and the held calls of the attempt applied nothing.
  const std::vector<std::string> n0 = KindsAndAttempts(raylets_[0]->ops());
  EXPECT_THAT(n0, ::testing::Contains("cancel@1"));
  EXPECT_THAT(n0, ::testing::Not(::testing::Contains("prepare@1")));
}

}  // namespace
}  // namespace berth
