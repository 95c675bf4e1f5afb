// BundleOpBatcher against a fake raylet served over real gRPC on 127.0.0.1:
// ops queued while a call is in flight go together in the next call, in
// order; a failed call fails each of its ops.
#include "scheduler/bundle_op_batcher.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "berth/v1/raylet.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

// Answers every prepare with prepared = (its placement group id is not
// "refuse"); records each call's op count. The first call waits for `release`.
class FakeRaylet final : public v1::RayletService::Service {
 public:
  grpc::Status ApplyBundleOps(grpc::ServerContext*, const v1::ApplyBundleOpsRequest* request,
                              v1::ApplyBundleOpsResponse* response) override {
    if (calls_++ == 0) release_.WaitForNotification();
    {
      absl::MutexLock lock(&mu_);
      batch_sizes_.push_back(request->ops_size());
    }
    if (fail_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "raylet down");
    for (const v1::BundleOp& op : request->ops()) {
      v1::BundleOpResult* result = response->add_results();
      result->mutable_prepare()->set_prepared(op.prepare().placement_group_id() != "refuse");
    }
    return grpc::Status::OK;
  }

  std::vector<int> batch_sizes() {
    absl::MutexLock lock(&mu_);
    return batch_sizes_;
  }

  absl::Notification release_;
  std::atomic<int> calls_{0};
  std::atomic<bool> fail_{false};

 private:
  absl::Mutex mu_;
  std::vector<int> batch_sizes_ ABSL_GUARDED_BY(mu_);
};

class BundleOpBatcherTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&raylet_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (!raylet_.release_.HasBeenNotified()) raylet_.release_.Notify();
    JoinBatchThreads();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  // The batcher must outlive its calls: join them before it goes.
  void JoinBatchThreads() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  static v1::BundleOp Prepare(const std::string& pg) {
    v1::BundleOp op;
    op.mutable_prepare()->set_placement_group_id(pg);
    return op;
  }

  FakeRaylet raylet_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  RayletClients clients_{absl::Seconds(5)};
  std::vector<std::thread> threads_;
  // Each batch on a thread of its own, as the head's committer pool runs them.
  BundleOpBatcher::Executor executor_ = [this](std::function<void()> work) {
    threads_.emplace_back(std::move(work));
  };
};

TEST_F(BundleOpBatcherTest, OpsQueuedDuringACallGoTogetherInOrder) {
  absl::Mutex mu;
  std::vector<std::string> done;
  std::vector<uint64_t> after_batch;  // the tickets `durable` was called with after a batch
  absl::Notification all_done;
  BundleOpBatcher batcher(&clients_, executor_, [&](uint64_t ticket) {
    absl::MutexLock lock(&mu);
    after_batch.push_back(ticket);
    all_done.Notify();
  });
  auto record = [&](const std::string& pg, uint64_t ticket) {
    return [&, pg, ticket](const BundleOpBatcher::Result& r) -> uint64_t {
      absl::MutexLock lock(&mu);
      done.push_back(
          absl::StrCat(pg, r.status.ok() && r.prepare.prepared() ? ":prepared" : ":refused"));
      return ticket;
    };
  };
  batcher.Enqueue(address_, Prepare("pg-0"), record("pg-0", 0));
  // The first call is now in flight (held by the raylet): these 50 queue.
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); raylet_.calls_ == 0;) {
    ASSERT_LT(absl::Now(), deadline) << "the first ApplyBundleOps call never reached the raylet";
    absl::SleepFor(absl::Milliseconds(1));
  }
  for (int i = 1; i <= 50; ++i) {
    const std::string pg = i == 7 ? "refuse" : absl::StrCat("pg-", i);
    batcher.Enqueue(address_, Prepare(pg), record(pg, static_cast<uint64_t>(i)));
  }
  raylet_.release_.Notify();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  JoinBatchThreads();
  EXPECT_EQ(raylet_.batch_sizes(), (std::vector<int>{1, 50}));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(done[0], "pg-0:prepared");
  EXPECT_EQ(done[7], "refuse:refused");
  EXPECT_EQ(done[50], "pg-50:prepared");
  // Not after the first call (its ticket was 0); once after the second,
  // with its largest ticket.
  EXPECT_EQ(after_batch, std::vector<uint64_t>{50});
}

TEST_F(BundleOpBatcherTest, AnOpQueuedBeforeItsDecisionIsDurableIsSentOnceItIs) {
  raylet_.release_.Notify();
  absl::Notification asked;    // the batcher waits for sequence 9
  absl::Notification durable;  // ... which the test then makes durable
  BundleOpBatcher batcher(&clients_, executor_, [&](uint64_t seq) {
    EXPECT_EQ(seq, 9u);
    asked.Notify();
    durable.WaitForNotification();
  });
  absl::Notification done;
  batcher.Enqueue(
      address_, Prepare("pg-a"),
      [&](const BundleOpBatcher::Result& r) -> uint64_t {
        EXPECT_TRUE(r.status.ok()) << r.status;
        done.Notify();
        return 0;
      },
      /*durable_first=*/9);
  ASSERT_TRUE(asked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(raylet_.calls_, 0) << "sent before its decision was durable";
  durable.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  JoinBatchThreads();
  EXPECT_EQ(raylet_.calls_, 1);
}

TEST_F(BundleOpBatcherTest, AFailedCallFailsEachOpAfterOneRetry) {
  raylet_.fail_ = true;
  raylet_.release_.Notify();
  absl::Mutex mu;
  std::vector<absl::StatusCode> codes;
  absl::Notification done;
  BundleOpBatcher batcher(&clients_, executor_, nullptr);
  batcher.Enqueue(address_, Prepare("pg-a"), [&](const BundleOpBatcher::Result& r) -> uint64_t {
    absl::MutexLock lock(&mu);
    codes.push_back(r.status.code());
    done.Notify();
    return 0;
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  JoinBatchThreads();
  EXPECT_EQ(raylet_.calls_, 2);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(codes, std::vector<absl::StatusCode>{absl::StatusCode::kUnavailable});
}

}  // namespace
}  // namespace berth
