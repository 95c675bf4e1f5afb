// NodeServiceImpl served over loopback gRPC on a head's state: what a
// raylet sees of registration, heartbeats, drains and worker-exit reports.
// A bad request is refused naming its field and registers, drains or
// records nothing; a node the head does not know is told to register
// again; a retried report is recorded once.
#include "scheduler/node_service.h"

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

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int raylet_port = 0;
    raylet_server_ = testing::ServeOnLoopback(&raylet_, &raylet_port);
    ASSERT_NE(raylet_server_, nullptr);
    raylet_address_ = absl::StrCat("127.0.0.1:", raylet_port);
    int port = 0;
    server_ = testing::ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::NodeService::NewStub(testing::LoopbackChannel(port));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    raylet_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  v1::RegisterNodeRequest Registration(const std::string& node_id) const {
    v1::RegisterNodeRequest r;
    r.set_node_id(node_id);
    r.set_address(raylet_address_);
    r.set_request_id("register-" + node_id);
    (*r.mutable_total()->mutable_amounts())["CPU"] = 8;
    (*r.mutable_total()->mutable_amounts())["GPU"] = 2;
    for (int i = 0; i < 2; ++i) {
      v1::GpuInstance* gpu = r.add_gpus();
      gpu->set_index(i);
      gpu->set_accelerator_type("A10G");
    }
    return r;
  }

  grpc::Status Register(const v1::RegisterNodeRequest& request,
                        v1::RegisterNodeResponse* response) {
    return stub_->RegisterNode(testing::CallContext().get(), request, response);
  }

  std::vector<v1::NodeInfo> Nodes() {
    v1::ListNodesResponse response;
    EXPECT_TRUE(stub_->ListNodes(testing::CallContext().get(), {}, &response).ok());
    return {response.nodes().begin(), response.nodes().end()};
  }

  v1::HeartbeatResponse Heartbeat(const std::string& node_id, uint64_t sequence) {
    v1::HeartbeatRequest request;
    request.set_node_id(node_id);
    request.set_sequence(sequence);
    v1::HeartbeatResponse response;
    EXPECT_TRUE(stub_->Heartbeat(testing::CallContext().get(), request, &response).ok());
    return response;
  }

  static v1::ReportWorkerExitRequest Exit(const std::string& node_id, const std::string& worker_id,
                                          const std::string& job_id) {
    v1::ReportWorkerExitRequest r;
    r.set_node_id(node_id);
    r.mutable_status()->set_worker_id(worker_id);
    r.mutable_status()->set_job_id(job_id);
    return r;
  }

  HeadState state_{HeadConfig(), nullptr};
  RayletClients raylets_{absl::Seconds(5)};
  NodeServiceImpl service_{&state_, &raylets_};
  testing::FakeRaylet raylet_;
  std::string raylet_address_;
  std::unique_ptr<grpc::Server> raylet_server_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
};

TEST_F(NodeServiceTest, ANodeRegistersAndIsListedAliveWithItsResources) {
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(Register(Registration("n0"), &response).ok());
  EXPECT_TRUE(response.accepted());
  EXPECT_GT(response.heartbeat_interval_ms(), 0u);
  EXPECT_TRUE(response.held_bundles().empty());  // the head placed nothing there
  const std::vector<v1::NodeInfo> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].node_id(), "n0");
  EXPECT_EQ(nodes[0].address(), raylet_address_);
  EXPECT_EQ(nodes[0].state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(nodes[0].total().amounts().at("GPU"), 2);
  EXPECT_EQ(nodes[0].labels().at("berth.io/accelerator-type"), "A10G");
}

TEST_F(NodeServiceTest, ABadRegistrationNamesItsFieldAndRegistersNothing) {
  v1::RegisterNodeRequest no_id = Registration("n0");
  no_id.clear_node_id();
  v1::RegisterNodeResponse response;
  grpc::Status s = Register(no_id, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("node_id"));

  v1::RegisterNodeRequest reserved = Registration("n1");
  (*reserved.mutable_labels())["berth.io/accelerator-type"] = "H100";
  s = Register(reserved, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("labels"));

  v1::RegisterNodeRequest gpus_disagree = Registration("n2");
  v1::GpuInstance* third = gpus_disagree.add_gpus();  // three instances, GPU: 2
  third->set_index(2);
  third->set_accelerator_type("A10G");
  s = Register(gpus_disagree, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("gpus: 3 GPU instances"));
  EXPECT_TRUE(Nodes().empty());
}

TEST_F(NodeServiceTest, AnUnknownNodesHeartbeatAsksItToRegisterAgain) {
  v1::HeartbeatResponse unknown = Heartbeat("n0", 1);
  EXPECT_FALSE(unknown.ack());
  EXPECT_TRUE(unknown.reregister_required());

  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(Register(Registration("n0"), &registered).ok());
  v1::HeartbeatResponse known = Heartbeat("n0", 1);
  EXPECT_TRUE(known.ack());
  EXPECT_FALSE(known.reregister_required());
  EXPECT_FALSE(known.drain_requested());
  EXPECT_EQ(known.head_epoch(), registered.head_epoch());

  v1::HeartbeatRequest no_id;
  v1::HeartbeatResponse response;
  grpc::Status s = stub_->Heartbeat(testing::CallContext().get(), no_id, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("node_id"));
}

// A queue pass holds the head's mutex; heartbeats are answered and counted
// meanwhile (the call's deadline would end a heartbeat that waited for it).
TEST_F(NodeServiceTest, AHeartbeatIsAnsweredWhileThePassHoldsTheHeadsMutex) {
  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(Register(Registration("n0"), &registered).ok());
  {
    absl::MutexLock pass(&state_.mu);
    v1::HeartbeatRequest request;
    request.set_node_id("n0");
    request.set_sequence(7);
    v1::HeartbeatResponse response;
    std::unique_ptr<grpc::ClientContext> context = testing::CallContext(absl::Seconds(5));
    const grpc::Status s = stub_->Heartbeat(context.get(), request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(response.ack());
    EXPECT_FALSE(response.reregister_required());
  }
}

TEST_F(NodeServiceTest, ADrainedNodeIsListedDrainingAndToldSoInItsHeartbeat) {
  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(Register(Registration("n0"), &registered).ok());
  v1::DrainNodeRequest drain;
  drain.set_node_id("n0");
  drain.set_reason("kernel upgrade");
  drain.set_request_id("drain-1");
  v1::DrainNodeResponse drained;
  ASSERT_TRUE(stub_->DrainNode(testing::CallContext().get(), drain, &drained).ok());
  EXPECT_TRUE(drained.accepted());
  EXPECT_EQ(drained.bundles_to_move(), 0u);
  const std::vector<v1::NodeInfo> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].state(), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(nodes[0].drain_reason(), "kernel upgrade");
  EXPECT_TRUE(Heartbeat("n0", 2).drain_requested());

  drain.set_node_id("n9");
  drain.set_request_id("drain-2");
  grpc::Status s = stub_->DrainNode(testing::CallContext().get(), drain, &drained);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("n9"));
}

TEST_F(NodeServiceTest, AWorkerExitIsRecordedOnceAndListedByJob) {
  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(Register(Registration("n0"), &registered).ok());
  v1::ReportWorkerExitResponse reported;
  ASSERT_TRUE(
      stub_->ReportWorkerExit(testing::CallContext().get(), Exit("n0", "w-1", "job-a"), &reported)
          .ok());
  ASSERT_TRUE(
      stub_->ReportWorkerExit(testing::CallContext().get(), Exit("n0", "w-1", "job-a"), &reported)
          .ok());
  ASSERT_TRUE(
      stub_->ReportWorkerExit(testing::CallContext().get(), Exit("n0", "w-2", "job-b"), &reported)
          .ok());

  v1::ListWorkerExitsRequest by_job;
  by_job.set_job_id("job-a");
  v1::ListWorkerExitsResponse listed;
  ASSERT_TRUE(stub_->ListWorkerExits(testing::CallContext().get(), by_job, &listed).ok());
  ASSERT_EQ(listed.exits_size(), 1);  // the retry is not a second exit
  EXPECT_EQ(listed.exits(0).status().worker_id(), "w-1");
  v1::ListWorkerExitsResponse all;
  ASSERT_TRUE(stub_->ListWorkerExits(testing::CallContext().get(), {}, &all).ok());
  EXPECT_EQ(all.exits_size(), 2);

  grpc::Status s =
      stub_->ReportWorkerExit(testing::CallContext().get(), Exit("n9", "w-3", "job-a"), &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("node_id"));
  s = stub_->ReportWorkerExit(testing::CallContext().get(), Exit("n0", "", "job-a"), &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("status.worker_id"));
  v1::ListWorkerExitsResponse after;
  ASSERT_TRUE(stub_->ListWorkerExits(testing::CallContext().get(), {}, &after).ok());
  EXPECT_EQ(after.exits_size(), 2);  // nothing recorded of the refused ones
}

}  // namespace
}  // namespace berth
