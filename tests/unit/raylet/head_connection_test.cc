// HeadConnection against an in-process fake NodeService on 127.0.0.1.
#include "raylet/head_connection.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

// Refuses the first `refusals` registrations, then accepts; asks for a
// re-registration on heartbeat number `reregister_on`.
class FakeHead final : public v1::NodeService::Service {
 public:
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override {
    absl::MutexLock lock(&mu);
    registrations.push_back(*request);
    if (static_cast<int>(registrations.size()) <= refusals) {
      response->set_reason("not yet");
      return grpc::Status::OK;
    }
    response->set_accepted(true);
    response->set_heartbeat_interval_ms(20);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu);
    heartbeats.push_back(*request);
    response->set_ack(true);
    response->set_reregister_required(static_cast<int>(heartbeats.size()) == reregister_on);
    return grpc::Status::OK;
  }
  grpc::Status ReportWorkerExit(grpc::ServerContext*, const v1::ReportWorkerExitRequest* request,
                                v1::ReportWorkerExitResponse*) override {
    absl::MutexLock lock(&mu);
    if (failing_exit_reports-- > 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "busy");
    exits.push_back(*request);
    return grpc::Status::OK;
  }

  absl::Mutex mu;
  int refusals = 0;
  int reregister_on = -1;
  int failing_exit_reports = 0;
  std::vector<v1::RegisterNodeRequest> registrations;
  std::vector<v1::HeartbeatRequest> heartbeats;
  std::vector<v1::ReportWorkerExitRequest> exits;
};

class HeadConnectionTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&head_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    connection_.reset();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  void Connect() {
    HeadConnection::Options options;
    options.node_id = "node-1";
    options.initial_backoff = absl::Milliseconds(10);
    options.max_backoff = absl::Milliseconds(40);
    connection_ = std::make_unique<HeadConnection>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()),
        options);
    connection_->Start({
        [] {
          v1::RegisterNodeRequest request;
          request.set_node_id("node-1");
          request.set_address("127.0.0.1:1");
          return request;
        },
        [] {
          ResourceSet free = ResourceSet::Of({{"CPU", 3}});
          free.Set(AcceleratorResourceName("T4"), Quantity::Whole(1));
          return free;
        },
        [] { return 2u; },
        [this](const v1::RegisterNodeResponse&) {
          absl::MutexLock lock(&head_.mu);
          ++accepted_;
        },
    });
  }

  // Waits until `done` holds under the fake head's lock.
  bool WaitFor(const std::function<bool()>& done) {
    absl::MutexLock lock(&head_.mu);
    return head_.mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10));
  }

  FakeHead head_;
  int accepted_ = 0;  // guarded by head_.mu
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HeadConnection> connection_;
};

TEST_F(HeadConnectionTest, RegistersUntilAcceptedThenHeartbeats) {
  head_.refusals = 3;
  Connect();
  ASSERT_TRUE(WaitFor([&] { return head_.heartbeats.size() >= 3; }));
  EXPECT_TRUE(connection_->registered());
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.registrations.size(), 4u);
  EXPECT_EQ(accepted_, 1);
  // Each attempt has its own request id, so a refusal is not replayed.
  EXPECT_NE(head_.registrations[0].request_id(), head_.registrations[1].request_id());
  for (size_t i = 1; i < head_.heartbeats.size(); ++i) {
    EXPECT_GT(head_.heartbeats[i].sequence(), head_.heartbeats[i - 1].sequence());
  }
  const v1::HeartbeatRequest& beat = head_.heartbeats[0];
  EXPECT_EQ(beat.node_id(), "node-1");
  EXPECT_EQ(beat.running_worker_count(), 2u);
  // The accelerator_type resource is the head's to announce, not the raylet's.
  EXPECT_EQ(beat.available().amounts().size(), 1u);
  EXPECT_EQ(beat.available().amounts().at("CPU"), 3);
}

TEST_F(HeadConnectionTest, RegistersAgainWhenTheHeadAsks) {
  head_.reregister_on = 2;
  Connect();
  ASSERT_TRUE(WaitFor([&] { return head_.heartbeats.size() >= 4; }));
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.registrations.size(), 2u);
  EXPECT_EQ(accepted_, 2);
}

TEST_F(HeadConnectionTest, ReportsWorkerExitsRetryingFailures) {
  head_.failing_exit_reports = 2;
  Connect();
  v1::WorkerStatus status;
  status.set_worker_id("w1");
  status.set_state(v1::WORKER_STATE_FAILED);
  status.set_exit_code(3);
  connection_->ReportWorkerExit(status);
  status.set_worker_id("w2");
  connection_->ReportWorkerExit(status);
  ASSERT_TRUE(WaitFor([&] { return head_.exits.size() == 2; }));
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.exits[0].node_id(), "node-1");
  EXPECT_EQ(head_.exits[0].status().worker_id(), "w1");  // in order
  EXPECT_EQ(head_.exits[0].status().exit_code(), 3);
  EXPECT_EQ(head_.exits[1].status().worker_id(), "w2");
}

TEST_F(HeadConnectionTest, AnExitIsReportedUntilAHeadThatWasAwayTakesIt) {
  // Away for many tries (a head restarting or failing over): the exit is
  // neither dropped nor reordered.
  head_.failing_exit_reports = 25;
  Connect();
  v1::WorkerStatus status;
  status.set_worker_id("w1");
  status.set_state(v1::WORKER_STATE_EXITED);
  connection_->ReportWorkerExit(status);
  status.set_worker_id("w2");
  connection_->ReportWorkerExit(status);
  ASSERT_TRUE(WaitFor([&] { return head_.exits.size() == 2; }));
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.exits[0].status().worker_id(), "w1");
  EXPECT_EQ(head_.exits[1].status().worker_id(), "w2");
}

TEST_F(HeadConnectionTest, ShutdownIsPromptWithoutAHead) {
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  Connect();
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  connection_->Shutdown(absl::ZeroDuration());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));  // at most one call's deadline
  EXPECT_FALSE(connection_->registered());
}

}  // namespace
}  // namespace berth
