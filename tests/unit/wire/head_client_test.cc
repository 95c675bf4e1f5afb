#include "wire/head_client.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

// What the fake head saw of one call.
struct SeenCall {
  std::string method;
  std::string request_id;  // empty for reads
  // Time left until the call's deadline when it arrived; infinite without one.
  absl::Duration time_left;
};

// The head's four services, recording every call. Scripted failures:
// `create_failures` are returned, in order, by the first creates, and
// `submit_failures` by the first job submissions.
class FakeHead final : public v1::PlacementGroupService::Service,
                       public v1::NodeService::Service,
                       public v1::ClusterService::Service,
                       public v1::TrainJobService::Service {
 public:
  std::vector<grpc::Status> create_failures;
  std::vector<grpc::Status> submit_failures;

  std::vector<SeenCall> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  grpc::Status CreatePlacementGroup(grpc::ServerContext* context,
                                    const v1::CreatePlacementGroupRequest* request,
                                    v1::CreatePlacementGroupResponse* response) override {
    const size_t n = Record(context, "CreatePlacementGroup", request->request_id());
    if (n < create_failures.size()) return create_failures[n];
    response->set_placement_group_id("pg-1");
    return grpc::Status::OK;
  }

  grpc::Status GetPlacementGroup(grpc::ServerContext* context,
                                 const v1::GetPlacementGroupRequest* request,
                                 v1::GetPlacementGroupResponse* response) override {
    Record(context, "GetPlacementGroup", "");
    // One group, "pg-1" named "train".
    if (request->placement_group_id() == "pg-1" || request->name() == "train") {
      response->mutable_placement_group()->set_placement_group_id("pg-1");
      response->mutable_placement_group()->set_name("train");
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such group");
  }

  grpc::Status ListPlacementGroups(grpc::ServerContext* context,
                                   const v1::ListPlacementGroupsRequest*,
                                   v1::ListPlacementGroupsResponse*) override {
    Record(context, "ListPlacementGroups", "");
    return grpc::Status::OK;
  }

  grpc::Status WaitPlacementGroupReady(grpc::ServerContext* context,
                                       const v1::WaitPlacementGroupReadyRequest*,
                                       v1::WaitPlacementGroupReadyResponse* response) override {
    Record(context, "WaitPlacementGroupReady", "");
    response->set_ready(true);
    return grpc::Status::OK;
  }

  grpc::Status RemovePlacementGroup(grpc::ServerContext* context,
                                    const v1::RemovePlacementGroupRequest* request,
                                    v1::RemovePlacementGroupResponse*) override {
    Record(context, "RemovePlacementGroup", request->request_id());
    return grpc::Status::OK;
  }

  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest*,
                         v1::ListNodesResponse* response) override {
    Record(context, "ListNodes", "");
    response->add_nodes()->set_node_id("node-a");
    return grpc::Status::OK;
  }

  grpc::Status DrainNode(grpc::ServerContext* context, const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override {
    Record(context, "DrainNode", request->request_id());
    response->set_accepted(true);
    return grpc::Status::OK;
  }

  grpc::Status ListWorkerExits(grpc::ServerContext* context, const v1::ListWorkerExitsRequest*,
                               v1::ListWorkerExitsResponse*) override {
    Record(context, "ListWorkerExits", "");
    return grpc::Status::OK;
  }

  grpc::Status GetClusterStatus(grpc::ServerContext* context, const v1::GetClusterStatusRequest*,
                                v1::GetClusterStatusResponse* response) override {
    Record(context, "GetClusterStatus", "");
    response->set_alive_nodes(1);
    return grpc::Status::OK;
  }

  grpc::Status SubmitTrainJob(grpc::ServerContext* context,
                              const v1::SubmitTrainJobRequest* request,
                              v1::SubmitTrainJobResponse* response) override {
    const size_t n = Record(context, "SubmitTrainJob", request->request_id());
    if (n < submit_failures.size()) return submit_failures[n];
    response->set_job_id("job-1");
    return grpc::Status::OK;
  }

  grpc::Status GetTrainJob(grpc::ServerContext* context, const v1::GetTrainJobRequest* request,
                           v1::GetTrainJobResponse* response) override {
    Record(context, "GetTrainJob", "");
    if (request->job_id() != "job-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
    }
    response->mutable_job()->set_job_id("job-1");
    response->mutable_job()->set_state(v1::TRAIN_JOB_STATE_RUNNING);
    return grpc::Status::OK;
  }

  grpc::Status ListTrainJobs(grpc::ServerContext* context, const v1::ListTrainJobsRequest* request,
                             v1::ListTrainJobsResponse* response) override {
    Record(context, "ListTrainJobs", "");
    // One RUNNING job, filtered as the head does.
    if (request->states().empty() ||
        std::find(request->states().begin(), request->states().end(),
                  v1::TRAIN_JOB_STATE_RUNNING) != request->states().end()) {
      response->add_jobs()->set_job_id("job-1");
    }
    return grpc::Status::OK;
  }

  grpc::Status StopTrainJob(grpc::ServerContext* context, const v1::StopTrainJobRequest* request,
                            v1::StopTrainJobResponse*) override {
    Record(context, "StopTrainJob", request->request_id());
    return grpc::Status::OK;
  }

 private:
  // Returns how many calls of `method` came before this one.
  size_t Record(grpc::ServerContext* context, const std::string& method,
                const std::string& request_id) {
    const auto deadline = context->deadline();
    const absl::Duration time_left =
        deadline == std::chrono::system_clock::time_point::max()
            ? absl::InfiniteDuration()
            : absl::FromChrono(deadline - std::chrono::system_clock::now());
    absl::MutexLock lock(&mu_);
    size_t before = 0;
    for (const SeenCall& call : calls_) before += call.method == method;
    calls_.push_back({method, request_id, time_left});
    return before;
  }

  absl::Mutex mu_;
  std::vector<SeenCall> calls_;
};

class HeadClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(static_cast<v1::PlacementGroupService::Service*>(&head_));
    builder.RegisterService(static_cast<v1::NodeService::Service*>(&head_));
    builder.RegisterService(static_cast<v1::ClusterService::Service*>(&head_));
    builder.RegisterService(static_cast<v1::TrainJobService::Service*>(&head_));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<HeadClient> Client(HeadClientOptions options = FastOptions()) {
    absl::StatusOr<std::unique_ptr<HeadClient>> client =
        HeadClient::Create(absl::StrCat("127.0.0.1:", port_), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  static HeadClientOptions FastOptions() {
    HeadClientOptions options;
    options.initial_backoff = absl::Milliseconds(1);
    return options;
  }

  static v1::CreatePlacementGroupRequest OneGpuGroup() {
    v1::CreatePlacementGroupRequest request;
    (*request.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
    return request;
  }

  FakeHead head_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(HeadClientTest, CreateRetriesUnavailableWithTheSameRequestId) {
  head_.create_failures = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "head restarting")};
  absl::StatusOr<v1::CreatePlacementGroupResponse> created =
      Client()->CreatePlacementGroup(OneGpuGroup());
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->placement_group_id(), "pg-1");

  const std::vector<SeenCall> calls = head_.calls();
  ASSERT_THAT(calls, SizeIs(2));
  EXPECT_THAT(calls[0].request_id, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(calls[1].request_id, calls[0].request_id);
}

TEST_F(HeadClientTest, CallerRequestIdIsKept) {
  v1::CreatePlacementGroupRequest request = OneGpuGroup();
  request.set_request_id("my-id");
  ASSERT_TRUE(Client()->CreatePlacementGroup(request).ok());
  EXPECT_EQ(head_.calls().at(0).request_id, "my-id");
}

TEST_F(HeadClientTest, GivesUpAfterMaxRetries) {
  head_.create_failures.assign(10, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  HeadClientOptions options = FastOptions();
  options.max_retries = 2;
  absl::StatusOr<v1::CreatePlacementGroupResponse> created =
      Client(options)->CreatePlacementGroup(OneGpuGroup());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(created.status().message(), "down");
  EXPECT_THAT(head_.calls(), SizeIs(3));
}

TEST_F(HeadClientTest, OtherErrorsAreNotRetriedAndKeepTheHeadsMessage) {
  head_.create_failures = {
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bundles[0].resources: empty")};
  absl::StatusOr<v1::CreatePlacementGroupResponse> created =
      Client()->CreatePlacementGroup(OneGpuGroup());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(created.status().message(), "bundles[0].resources: empty");
  EXPECT_THAT(head_.calls(), SizeIs(1));
}

TEST_F(HeadClientTest, EveryCallHasTheConfiguredDeadline) {
  HeadClientOptions options = FastOptions();
  options.timeout = absl::Seconds(3);
  std::unique_ptr<HeadClient> client = Client(options);
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id("pg-1");
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id("pg-1");
  v1::DrainNodeRequest drain;
  drain.set_node_id("node-a");
  ASSERT_TRUE(client->ListNodes().ok());
  ASSERT_TRUE(client->DrainNode(drain).ok());
  ASSERT_TRUE(client->ListWorkerExits().ok());
  ASSERT_TRUE(client->CreatePlacementGroup(OneGpuGroup()).ok());
  ASSERT_TRUE(client->GetPlacementGroup(get).ok());
  ASSERT_TRUE(client->ListPlacementGroups().ok());
  ASSERT_TRUE(client->RemovePlacementGroup(remove).ok());
  ASSERT_TRUE(client->GetClusterStatus().ok());
  v1::GetTrainJobRequest get_job;
  get_job.set_job_id("job-1");
  v1::StopTrainJobRequest stop_job;
  stop_job.set_job_id("job-1");
  ASSERT_TRUE(client->SubmitTrainJob(v1::SubmitTrainJobRequest()).ok());
  ASSERT_TRUE(client->GetTrainJob(get_job).ok());
  ASSERT_TRUE(client->ListTrainJobs().ok());
  ASSERT_TRUE(client->StopTrainJob(stop_job).ok());

  const std::vector<SeenCall> calls = head_.calls();
  ASSERT_THAT(calls, SizeIs(12));
  // The wire rounds the timeout up a little.
  for (const SeenCall& call : calls) {
    EXPECT_LE(call.time_left, absl::Seconds(3.1)) << call.method;
    EXPECT_GT(call.time_left, absl::Seconds(2)) << call.method;
  }
  // Mutating calls get a request id.
  EXPECT_EQ(calls[1].method, "DrainNode");
  EXPECT_THAT(calls[1].request_id, SizeIs(32));
  EXPECT_EQ(calls[6].method, "RemovePlacementGroup");
  EXPECT_THAT(calls[6].request_id, SizeIs(32));
  EXPECT_EQ(calls[8].method, "SubmitTrainJob");
  EXPECT_THAT(calls[8].request_id, SizeIs(32));
  EXPECT_EQ(calls[11].method, "StopTrainJob");
  EXPECT_THAT(calls[11].request_id, SizeIs(32));
}

TEST_F(HeadClientTest, SubmitTrainJobRetriesUnavailableWithTheSameRequestId) {
  head_.submit_failures = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "head restarting")};
  v1::SubmitTrainJobRequest request;
  request.mutable_spec()->mutable_scaling_config()->set_num_workers(4);
  absl::StatusOr<v1::SubmitTrainJobResponse> submitted = Client()->SubmitTrainJob(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->job_id(), "job-1");

  const std::vector<SeenCall> calls = head_.calls();
  ASSERT_THAT(calls, SizeIs(2));
  EXPECT_THAT(calls[0].request_id, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(calls[1].request_id, calls[0].request_id);
}

TEST_F(HeadClientTest, TrainJobReadsPassRequestAndErrorThrough) {
  std::unique_ptr<HeadClient> client = Client();
  v1::GetTrainJobRequest get;
  get.set_job_id("job-1");
  absl::StatusOr<v1::GetTrainJobResponse> job = client->GetTrainJob(get);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job().state(), v1::TRAIN_JOB_STATE_RUNNING);

  get.set_job_id("job-9");
  job = client->GetTrainJob(get);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "no such job");

  v1::ListTrainJobsRequest failed;
  failed.add_states(v1::TRAIN_JOB_STATE_FAILED);
  absl::StatusOr<v1::ListTrainJobsResponse> listed = client->ListTrainJobs(failed);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->jobs(), SizeIs(0));
  listed = client->ListTrainJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->jobs(), SizeIs(1));
}

TEST_F(HeadClientTest, WaitDeadlineIncludesTheWait) {
  HeadClientOptions options = FastOptions();
  options.timeout = absl::Seconds(2);
  v1::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id("pg-1");
  wait.set_timeout_ms(30000);
  absl::StatusOr<v1::WaitPlacementGroupReadyResponse> ready =
      Client(options)->WaitPlacementGroupReady(wait);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->ready());
  const absl::Duration time_left = head_.calls().at(0).time_left;
  EXPECT_GT(time_left, absl::Seconds(31));
  EXPECT_LE(time_left, absl::Seconds(32.1));
}

TEST_F(HeadClientTest, FindPlacementGroupTriesIdThenName) {
  std::unique_ptr<HeadClient> client = Client();
  absl::StatusOr<v1::GetPlacementGroupResponse> by_id = client->FindPlacementGroup("pg-1");
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_THAT(head_.calls(), SizeIs(1));

  absl::StatusOr<v1::GetPlacementGroupResponse> by_name = client->FindPlacementGroup("train");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->placement_group().placement_group_id(), "pg-1");

  absl::StatusOr<v1::GetPlacementGroupResponse> missing = client->FindPlacementGroup("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'nope'"));
}

TEST_F(HeadClientTest, UnreachableHeadIsUnavailableAfterRetries) {
  const int port = port_;
  server_->Shutdown();
  HeadClientOptions options = FastOptions();
  options.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<HeadClient>> client =
      HeadClient::Create(absl::StrCat("127.0.0.1:", port), options);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->ListNodes().status().code(), absl::StatusCode::kUnavailable);
}

TEST(HeadClientCreateTest, RejectsBadAddressesAndOptions) {
  for (const char* address : {"", "localhost", "localhost:", "localhost:http", ":6380",
                              "localhost:70000", "localhost:0"}) {
    absl::StatusOr<std::unique_ptr<HeadClient>> client = HeadClient::Create(address);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(std::string(client.status().message()), StartsWith("address: ")) << address;
  }
  EXPECT_TRUE(HeadClient::Create("[::1]:6380").ok());

  HeadClientOptions options;
  options.timeout = absl::ZeroDuration();
  EXPECT_THAT(std::string(HeadClient::Create("127.0.0.1:6380", options).status().message()),
              StartsWith("timeout: "));
  options = HeadClientOptions();
  options.max_retries = -1;
  EXPECT_THAT(std::string(HeadClient::Create("127.0.0.1:6380", options).status().message()),
              StartsWith("max_retries: "));
}

TEST(HeadClientCreateTest, RequestIdsAreRandom128BitHex) {
  const std::string a = NewRequestId();
  const std::string b = NewRequestId();
  EXPECT_THAT(a, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace berth
