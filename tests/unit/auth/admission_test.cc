// Admitted services over loopback gRPC: a refused call gets the right code
// and its handler never runs; an admitted one reaches the handler with its
// request intact; unary and server-streaming methods alike; TLS roles per
// method and for every method.
#include "auth/admission.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

#include "auth/cluster_token.h"
#include "berth/v1/head.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

// Counts the calls its handlers see; ListNodes answers with the number of
// states the request asked for, so the request is seen whole.
class CountingNodeService final : public Admitted<v1::NodeService::Service> {
 public:
  explicit CountingNodeService(AdmissionPolicy policy) : Admitted(std::move(policy)) {}
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override {
    ++calls;
    for (int i = 0; i < request->states_size(); ++i) response->add_nodes();
    return grpc::Status::OK;
  }
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest*,
                            v1::RegisterNodeResponse*) override {
    ++calls;
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

class CountingLogService final : public Admitted<v1::TrainJobService::Service> {
 public:
  explicit CountingLogService(AdmissionPolicy policy) : Admitted(std::move(policy)) {}
  grpc::Status StreamTrainJobLogs(grpc::ServerContext*,
                                  const v1::StreamTrainJobLogsRequest* request,
                                  grpc::ServerWriter<v1::LogChunk>* writer) override {
    ++calls;
    v1::LogChunk chunk;
    chunk.set_data(request->job_id());
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  AttachClusterToken(context.get(), token);
  return context;
}

class AdmissionTest : public ::testing::Test {
 protected:
  void Start(AdmissionPolicy policy, std::shared_ptr<grpc::ServerCredentials> credentials) {
    nodes_ = std::make_unique<CountingNodeService>(policy);
    logs_ = std::make_unique<CountingLogService>(policy);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(nodes_.get());
    builder.RegisterService(logs_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  std::shared_ptr<grpc::Channel> Plaintext() {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                               grpc::InsecureChannelCredentials());
  }
  grpc::Status ListNodes(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                         v1::ListNodesResponse* response) {
    v1::ListNodesRequest request;
    request.add_states(v1::NODE_STATE_ALIVE);
    request.add_states(v1::NODE_STATE_DEAD);
    return v1::NodeService::NewStub(channel)->ListNodes(Context(token).get(), request, response);
  }
  // The chunks read and the stream's status.
  std::pair<int, grpc::Status> StreamLogs(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& token) {
    v1::StreamTrainJobLogsRequest request;
    request.set_job_id("job-7");
    auto context = Context(token);
    auto reader = v1::TrainJobService::NewStub(channel)->StreamTrainJobLogs(context.get(), request);
    v1::LogChunk chunk;
    int chunks = 0;
    while (reader->Read(&chunk)) {
      EXPECT_EQ(chunk.data(), "job-7");
      ++chunks;
    }
    return {chunks, reader->Finish()};
  }
  TlsConfig Load(TlsRole role) {
    absl::StatusOr<TlsConfig> tls = LoadTlsConfig(ClusterTlsFiles(dir_, role), true);
    EXPECT_TRUE(tls.ok()) << tls.status();
    return tls.value_or(TlsConfig{});
  }
  void MakeCertificates() {
    char pattern[] = "/tmp/berth-admission-XXXXXX";
    dir_ = mkdtemp(pattern);
    ASSERT_TRUE(CreateClusterCertificates(dir_).ok());
  }

  int port_ = 0;
  std::string dir_;
  // Declared before the server: its handler threads read the teams until
  // the server is destroyed (a test's local was destroyed first: TSan saw
  // the race).
  TeamCredentials teams_;
  std::unique_ptr<CountingNodeService> nodes_;
  std::unique_ptr<CountingLogService> logs_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(AdmissionTest, CallsWithoutTheTokenAreRefusedBeforeTheirHandler) {
  Start(AdmissionPolicy{kToken}, grpc::InsecureServerCredentials());
  v1::ListNodesResponse response;
  grpc::Status missing = ListNodes(Plaintext(), "", &response);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("cluster token"));
  EXPECT_EQ(ListNodes(Plaintext(), "fedcba9876543210fedcba9876543210", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto [chunks, status] = StreamLogs(Plaintext(), "wrong-token-of-some-length");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(chunks, 0);
  EXPECT_EQ(nodes_->calls, 0);
  EXPECT_EQ(logs_->calls, 0);
}

TEST_F(AdmissionTest, CallsWithTheTokenReachTheHandlerWithTheirRequest) {
  Start(AdmissionPolicy{kToken}, grpc::InsecureServerCredentials());
  v1::ListNodesResponse response;
  ASSERT_TRUE(ListNodes(Plaintext(), kToken, &response).ok());
  EXPECT_EQ(response.nodes_size(), 2);
  auto [chunks, status] = StreamLogs(Plaintext(), kToken);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(nodes_->calls, 1);
  EXPECT_EQ(logs_->calls, 1);
}

TEST_F(AdmissionTest, ATeamTokenReachesOnlyTheMethodsTeamsMayCall) {
  const TeamCredentials::Issued issued = TeamCredentials::Mint();
  teams_.Add(issued.digest, "ml-research");
  EXPECT_NE(issued.digest, issued.token);  // only the digest is kept
  AdmissionPolicy policy{kToken};
  policy.teams = &teams_;
  policy.team_methods = {"StreamTrainJobLogs"};
  Start(policy, grpc::InsecureServerCredentials());
  auto [chunks, status] = StreamLogs(Plaintext(), issued.token);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(chunks, 1);
  v1::ListNodesResponse response;
  grpc::Status denied = ListNodes(Plaintext(), issued.token, &response);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("ListNodes: team 'ml-research'"));
  EXPECT_EQ(nodes_->calls, 0);
  // Revoked: no longer anyone's.
  EXPECT_EQ(teams_.Revoke("ml-research").size(), 1u);
  EXPECT_EQ(StreamLogs(Plaintext(), issued.token).second.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(logs_->calls, 1);
}

TEST_F(AdmissionTest, NoTokenMeansAuthenticationIsOff) {
  Start(AdmissionPolicy{}, grpc::InsecureServerCredentials());
  v1::ListNodesResponse response;
  EXPECT_TRUE(ListNodes(Plaintext(), "", &response).ok());
  EXPECT_TRUE(ListNodes(Plaintext(), kToken, &response).ok());
  EXPECT_EQ(nodes_->calls, 2);
}

TEST_F(AdmissionTest, AMethodsRoleIsAskedOnlyOfThatMethod) {
  MakeCertificates();
  AdmissionPolicy policy{kToken, Load(TlsRole::kHead)};
  policy.role_of_method["RegisterNode"] = TlsRole::kNode;
  Start(policy, policy.tls.ServerCredentials(/*require_client_certificate=*/false));
  auto as_client =
      Load(TlsRole::kClient).MakeChannel("127.0.0.1:" + std::to_string(port_), TlsRole::kHead);
  auto as_node =
      Load(TlsRole::kNode).MakeChannel("127.0.0.1:" + std::to_string(port_), TlsRole::kHead);

  v1::RegisterNodeResponse registered;
  grpc::Status refused =
      v1::NodeService::NewStub(as_client)->RegisterNode(Context(kToken).get(), {}, &registered);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("RegisterNode"));
  EXPECT_EQ(nodes_->calls, 0);
  // The token is checked first, whatever the certificate.
  EXPECT_EQ(v1::NodeService::NewStub(as_node)
                ->RegisterNode(Context("").get(), {}, &registered)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(
      v1::NodeService::NewStub(as_node)->RegisterNode(Context(kToken).get(), {}, &registered).ok());
  v1::ListNodesResponse listed;
  EXPECT_TRUE(ListNodes(as_client, kToken, &listed).ok());
  EXPECT_EQ(nodes_->calls, 2);
}

TEST_F(AdmissionTest, ARoleForEveryMethodCoversStreamsToo) {
  MakeCertificates();
  AdmissionPolicy policy{"", Load(TlsRole::kNode)};
  policy.role_of_every_method = TlsRole::kHead;
  Start(policy, policy.tls.ServerCredentials(/*require_client_certificate=*/true));
  auto as_client =
      Load(TlsRole::kClient).MakeChannel("127.0.0.1:" + std::to_string(port_), TlsRole::kNode);
  auto as_head =
      Load(TlsRole::kHead).MakeChannel("127.0.0.1:" + std::to_string(port_), TlsRole::kNode);
  auto [refused_chunks, refused] = StreamLogs(as_client, "");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("StreamTrainJobLogs"));
  EXPECT_EQ(refused_chunks, 0);
  EXPECT_EQ(logs_->calls, 0);
  auto [chunks, status] = StreamLogs(as_head, "");
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(logs_->calls, 1);
}

}  // namespace
}  // namespace berth
