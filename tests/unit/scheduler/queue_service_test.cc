// QueueServiceImpl served over loopback gRPC on a head's state: queues are
// created, read and deleted; a refused change (a bad quota, a name taken, a
// queue a live group names, a batch with one bad queue) is answered with an
// error naming its field and changes nothing.
#include "scheduler/queue_service.h"

#include <memory>
#include <string>

#include "berth/v1/head.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "tests/unit/loopback_server.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

class QueueServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    server_ = testing::ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::QueueService::NewStub(testing::LoopbackChannel(port));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  static v1::Queue Queue(const std::string& name, double gpus) {
    v1::Queue q;
    q.set_name(name);
    (*q.mutable_nominal_quota())["GPU"] = gpus;
    return q;
  }

  grpc::Status Create(const v1::Queue& queue) {
    v1::CreateQueueRequest request;
    *request.mutable_queue() = queue;
    v1::CreateQueueResponse response;
    return stub_->CreateQueue(testing::CallContext().get(), request, &response);
  }

  // The names of the queues, in order.
  std::vector<std::string> Names() {
    v1::ListQueuesResponse response;
    EXPECT_TRUE(stub_->ListQueues(testing::CallContext().get(), {}, &response).ok());
    std::vector<std::string> names;
    for (const v1::Queue& q : response.queues()) names.push_back(q.name());
    return names;
  }

  HeadState state_{HeadConfig(), nullptr};
  QueueServiceImpl service_{&state_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::QueueService::Stub> stub_;
};

TEST_F(QueueServiceTest, AQueueIsCreatedReadAndDeleted) {
  const std::vector<std::string> before = Names();
  ASSERT_TRUE(Create(Queue("team-a", 4)).ok());
  v1::GetQueueRequest get;
  get.set_name("team-a");
  v1::GetQueueResponse got;
  ASSERT_TRUE(stub_->GetQueue(testing::CallContext().get(), get, &got).ok());
  EXPECT_EQ(got.queue().nominal_quota().at("GPU"), 4);
  EXPECT_EQ(Create(Queue("team-a", 2)).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::DeleteQueueRequest remove;
  remove.set_name("team-a");
  v1::DeleteQueueResponse removed;
  ASSERT_TRUE(stub_->DeleteQueue(testing::CallContext().get(), remove, &removed).ok());
  EXPECT_EQ(Names(), before);
  EXPECT_EQ(stub_->GetQueue(testing::CallContext().get(), get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(QueueServiceTest, ABadQuotaNamesItsFieldAndChangesNothing) {
  const std::vector<std::string> before = Names();
  grpc::Status s = Create(Queue("team-a", -1));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("nominal_quota"));
  EXPECT_EQ(Names(), before);
}

TEST_F(QueueServiceTest, AQueueALiveGroupNamesIsNotDeleted) {
  ASSERT_TRUE(Create(Queue("team-a", 4)).ok());
  {
    absl::MutexLock lock(&state_.mu);
    v1::CreatePlacementGroupRequest group;
    group.set_request_id("g-1");
    group.set_queue("team-a");
    (*group.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
    ASSERT_TRUE(state_.groups.Create(group, "pg-1", HeadNowMs()).ok());
  }
  v1::DeleteQueueRequest remove;
  remove.set_name("team-a");
  v1::DeleteQueueResponse removed;
  grpc::Status s = stub_->DeleteQueue(testing::CallContext().get(), remove, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("team-a"));
  EXPECT_THAT(Names(), ::testing::Contains("team-a"));
}

TEST_F(QueueServiceTest, AnApplyWithOneBadQueueAppliesNothing) {
  const std::vector<std::string> before = Names();
  v1::ApplyQueuesRequest apply;
  *apply.add_queues() = Queue("team-a", 4);
  *apply.add_queues() = Queue("team-b", -4);
  v1::ApplyQueuesResponse response;
  grpc::Status s = stub_->ApplyQueues(testing::CallContext().get(), apply, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("nominal_quota"));
  EXPECT_EQ(Names(), before);
}

}  // namespace
}  // namespace berth
