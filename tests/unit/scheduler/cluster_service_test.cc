// ClusterServiceImpl served over loopback gRPC on a head's state: the
// cluster's status (nodes, resources, accelerators, groups by state, what
// waits) as a client reads it, and the autoscaler's reports: a bad report
// is refused naming its field and replaces nothing.
#include "scheduler/cluster_service.h"

#include <memory>
#include <string>

#include "berth/v1/head.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "tests/unit/loopback_server.h"
#include "tests/unit/scheduler/fake_raylet.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

class ClusterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    raylets_.Add(state_, "n0");
    raylets_.Add(state_, "n1");
    int port = 0;
    server_ = testing::ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ClusterService::NewStub(testing::LoopbackChannel(port));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  v1::GetClusterStatusResponse Status() {
    v1::GetClusterStatusResponse response;
    EXPECT_TRUE(stub_->GetClusterStatus(testing::CallContext().get(), {}, &response).ok());
    return response;
  }

  static v1::ReportAutoscalerStatusRequest Report(const std::string& pool, uint32_t target) {
    v1::ReportAutoscalerStatusRequest r;
    v1::NodePoolStatus* p = r.mutable_status()->add_pools();
    p->set_name(pool);
    p->set_accelerator_type("A10G");
    p->set_target_nodes(target);
    return r;
  }

  HeadState state_{HeadConfig(), nullptr};
  testing::FakeRaylets raylets_;
  ClusterServiceImpl service_{&state_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ClusterService::Stub> stub_;
};

TEST_F(ClusterServiceTest, TheStatusCountsNodesResourcesAndWaitingGroups) {
  v1::GetClusterStatusResponse idle = Status();
  EXPECT_EQ(idle.alive_nodes(), 2u);
  EXPECT_EQ(idle.draining_nodes(), 0u);
  EXPECT_EQ(idle.total().amounts().at("GPU"), 2);
  EXPECT_EQ(idle.available().amounts().at("GPU"), 2);
  ASSERT_EQ(idle.accelerators_size(), 1);
  EXPECT_EQ(idle.accelerators(0).accelerator_type(), "A10G");
  EXPECT_EQ(idle.accelerators(0).gpus_total(), 2u);
  EXPECT_TRUE(idle.placement_groups().empty());
  EXPECT_EQ(idle.oldest_pending_since_unix_ms(), 0);
  EXPECT_FALSE(idle.has_autoscaler());  // none reported yet
  EXPECT_GT(idle.as_of_unix_ms(), 0);

  // A group no scheduling loop has placed: it waits, and its demand shows.
  v1::CreatePlacementGroupRequest create;
  create.set_request_id("c-1");
  (*create.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(state_.groups.Create(create, "pg-1", HeadNowMs()).ok());
  }
  v1::GetClusterStatusResponse waiting = Status();
  ASSERT_EQ(waiting.placement_groups_size(), 1);
  EXPECT_EQ(waiting.placement_groups(0).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(waiting.placement_groups(0).count(), 1u);
  EXPECT_GT(waiting.oldest_pending_since_unix_ms(), 0);
  EXPECT_FALSE(waiting.pending_demand().empty());
}

TEST_F(ClusterServiceTest, TheAutoscalersLastGoodReportIsShown) {
  v1::ReportAutoscalerStatusResponse reported;
  ASSERT_TRUE(
      stub_->ReportAutoscalerStatus(testing::CallContext().get(), Report("gpu", 3), &reported)
          .ok());
  v1::GetClusterStatusResponse status = Status();
  ASSERT_TRUE(status.has_autoscaler());
  EXPECT_GT(status.autoscaler().reported_unix_ms(), 0);
  ASSERT_EQ(status.autoscaler().pools_size(), 1);
  EXPECT_EQ(status.autoscaler().pools(0).target_nodes(), 3u);

  grpc::Status s =
      stub_->ReportAutoscalerStatus(testing::CallContext().get(), Report("", 9), &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("status.pools[0].name"));
  EXPECT_EQ(Status().autoscaler().pools(0).target_nodes(), 3u);  // the last good one stays
}

}  // namespace
}  // namespace berth
