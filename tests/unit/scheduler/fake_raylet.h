// FakeRaylet: a raylet's reservation service, served by the scheduler's
// unit tests over loopback gRPC: its books (a prepare holds bundles, a
// commit keeps them, a cancel lets go) and every op it applied, with what a
// test may make it do (refuse prepares, fail commits, hold calls).
#ifndef BERTH_TESTS_UNIT_SCHEDULER_FAKE_RAYLET_H_
#define BERTH_TESTS_UNIT_SCHEDULER_FAKE_RAYLET_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/v1/raylet.grpc.pb.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "scheduler/head_state.h"
#include "tests/unit/loopback_server.h"

namespace berth::testing {

// The longest a test waits for an event.
inline constexpr absl::Duration kDeadline = absl::Seconds(20);

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

// Fake raylets served on 127.0.0.1, each registered with a head's state
// as a node of one A10G GPU and 8 CPUs. Stops serving when destroyed.
class FakeRaylets {
 public:
  ~FakeRaylets() {
    for (auto& raylet : raylets_) raylet->Hold(false);
    for (auto& server : servers_)
      server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  void Add(HeadState& state, const std::string& node_id) {
    raylets_.push_back(std::make_unique<FakeRaylet>());
    int port = 0;
    servers_.push_back(ServeOnLoopback(raylets_.back().get(), &port));
    ASSERT_NE(servers_.back(), nullptr);
    v1::RegisterNodeRequest r;
    r.set_node_id(node_id);
    r.set_address(absl::StrCat("127.0.0.1:", port));
    r.set_request_id("register-" + node_id);
    (*r.mutable_total()->mutable_amounts())["CPU"] = 8;
    (*r.mutable_total()->mutable_amounts())["GPU"] = 1;
    r.add_gpus()->set_accelerator_type("A10G");
    absl::MutexLock lock(&state.mu);
    ASSERT_TRUE(state.nodes.Register(r, HeadNowMs()).ok());
    state.groups.OnNodesChanged(HeadNowMs());
  }

  std::vector<std::unique_ptr<FakeRaylet>>& all() { return raylets_; }
  FakeRaylet& operator[](size_t i) { return *raylets_[i]; }

 private:
  std::vector<std::unique_ptr<FakeRaylet>> raylets_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

}  // namespace berth::testing

#endif  // BERTH_TESTS_UNIT_SCHEDULER_FAKE_RAYLET_H_
