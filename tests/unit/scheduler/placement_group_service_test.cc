// PlacementGroupServiceImpl served over loopback gRPC, on a head's state
// and scheduler with fake raylets: what a client sees of create, get, list,
// wait and remove, one at a time and in batches; a bad request is refused
// naming its field and changes nothing, a batch is all or nothing, a retry
// with the same request id is the first call's answer.
#include "scheduler/placement_group_service.h"

#include <memory>
#include <string>
#include <vector>

#include "berth/v1/head.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "tests/unit/loopback_server.h"
#include "tests/unit/scheduler/fake_raylet.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PlacementGroupServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    raylets_.Add(state_, "n0");
    raylets_.Add(state_, "n1");
    clients_ = std::make_unique<RayletClients>(absl::Seconds(5));
    scheduler_ = std::make_unique<Scheduler>(&state_, clients_.get());
    scheduler_->Start(/*epoch=*/3);
    service_ = std::make_unique<PlacementGroupServiceImpl>(&state_, scheduler_.get());
    int port = 0;
    server_ = testing::ServeOnLoopback(service_.get(), &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::PlacementGroupService::NewStub(testing::LoopbackChannel(port));
  }

  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    scheduler_.reset();
  }

  static v1::CreatePlacementGroupRequest Request(const std::string& request_id, double gpus) {
    v1::CreatePlacementGroupRequest r;
    r.set_request_id(request_id);
    (*r.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
    return r;
  }

  grpc::Status Create(const v1::CreatePlacementGroupRequest& request, std::string* id) {
    v1::CreatePlacementGroupResponse response;
    grpc::Status s = stub_->CreatePlacementGroup(testing::CallContext().get(), request, &response);
    *id = response.placement_group_id();
    return s;
  }

  std::vector<v1::PlacementGroupInfo> List() {
    v1::ListPlacementGroupsResponse response;
    EXPECT_TRUE(stub_->ListPlacementGroups(testing::CallContext().get(), {}, &response).ok());
    return {response.placement_groups().begin(), response.placement_groups().end()};
  }

  size_t RayletOps() {
    size_t ops = 0;
    for (auto& raylet : raylets_.all()) ops += raylet->ops().size();
    return ops;
  }

  HeadState state_{HeadConfig(), nullptr};
  testing::FakeRaylets raylets_;
  std::unique_ptr<RayletClients> clients_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<PlacementGroupServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::PlacementGroupService::Stub> stub_;
};

TEST_F(PlacementGroupServiceTest, AGroupIsCreatedWaitedForAndRemoved) {
  std::string id;
  ASSERT_TRUE(Create(Request("c-1", 1), &id).ok());
  v1::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id(id);
  wait.set_timeout_ms(20000);
  v1::WaitPlacementGroupReadyResponse ready;
  ASSERT_TRUE(stub_->WaitPlacementGroupReady(testing::CallContext().get(), wait, &ready).ok());
  EXPECT_TRUE(ready.ready()) << ready.placement_group().pending_reason();
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  v1::GetPlacementGroupResponse got;
  ASSERT_TRUE(stub_->GetPlacementGroup(testing::CallContext().get(), get, &got).ok());
  EXPECT_EQ(got.placement_group().state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(got.placement_group().locations_size(), 1);
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(id);
  remove.set_request_id("r-1");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(stub_->RemovePlacementGroup(testing::CallContext().get(), remove, &removed).ok());
  ASSERT_TRUE(stub_->GetPlacementGroup(testing::CallContext().get(), get, &got).ok());
  EXPECT_EQ(got.placement_group().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  // The raylet it was on let go of it.
  for (auto& raylet : raylets_.all()) {
    EXPECT_TRUE(raylet->AwaitOps([](const std::vector<testing::AppliedOp>& ops, int) {
      return ops.empty() || ops.back().held_after == 0;
    }));
  }
}

TEST_F(PlacementGroupServiceTest, ABadRequestNamesItsFieldAndChangesNothing) {
  std::string id;
  grpc::Status s = Create(Request("c-1", -1), &id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("bundles[0]"));
  s = Create(v1::CreatePlacementGroupRequest(), &id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::CreatePlacementGroupRequest unknown_queue = Request("c-2", 1);
  unknown_queue.set_queue("nobody");
  s = Create(unknown_queue, &id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("queue"));
  EXPECT_THAT(List(), IsEmpty());
  EXPECT_EQ(RayletOps(), 0u);
}

TEST_F(PlacementGroupServiceTest, ABatchWithOneBadRequestCreatesNothing) {
  v1::CreatePlacementGroupsRequest batch;
  *batch.add_requests() = Request("b-0", 1);
  *batch.add_requests() = Request("b-1", 0);  // no non-zero resource
  *batch.add_requests() = Request("b-2", 1);
  v1::CreatePlacementGroupsResponse response;
  grpc::Status s = stub_->CreatePlacementGroups(testing::CallContext().get(), batch, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("requests[1]."));
  EXPECT_THAT(response.placement_group_ids(), IsEmpty());
  EXPECT_THAT(List(), IsEmpty());
  s = stub_->CreatePlacementGroups(testing::CallContext().get(), v1::CreatePlacementGroupsRequest(),
                                   &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("requests: at least one is required"));
  EXPECT_EQ(RayletOps(), 0u);
}

TEST_F(PlacementGroupServiceTest, ARetryIsTheFirstCallsAnswerAndOtherArgumentsAreRefused) {
  std::string first, retried, other;
  ASSERT_TRUE(Create(Request("same", 1), &first).ok());
  ASSERT_TRUE(Create(Request("same", 1), &retried).ok());
  EXPECT_EQ(retried, first);
  grpc::Status s = Create(Request("same", 0.5), &other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("request_id"));
  EXPECT_EQ(List().size(), 1u);
}

TEST_F(PlacementGroupServiceTest, WaitingForAnUnknownGroupIsNotFoundNamingIt) {
  v1::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id("pg-none");
  v1::WaitPlacementGroupReadyResponse response;
  grpc::Status s = stub_->WaitPlacementGroupReady(testing::CallContext().get(), wait, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("placement_group_id: no placement group 'pg-none'"));
  v1::WaitPlacementGroupsReadyRequest many;
  many.add_placement_group_ids("pg-none");
  v1::WaitPlacementGroupsReadyResponse many_response;
  s = stub_->WaitPlacementGroupsReady(testing::CallContext().get(), many, &many_response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("pg-none"));
}

}  // namespace
}  // namespace berth
