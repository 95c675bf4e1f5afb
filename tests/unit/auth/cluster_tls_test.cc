// Certificates from CreateClusterCertificates, the flags' checks, and real
// TLS handshakes: a server that requires client certificates and admits
// only the head's, as a raylet does.
#include "auth/cluster_tls.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "berth/v1/head.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  char pattern[] = "/tmp/berth-tls-XXXXXX";
  return mkdtemp(pattern);
}

// A service whose ListNodes is allowed only to the head.
class HeadOnlyService final : public v1::NodeService::Service {
 public:
  explicit HeadOnlyService(const TlsConfig* tls) : tls_(tls) {}
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest*,
                         v1::ListNodesResponse*) override {
    return CheckPeerRole(context, *tls_, TlsRole::kHead, "ListNodes");
  }

 private:
  const TlsConfig* tls_;
};

class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_TRUE(CreateClusterCertificates(dir_, {"10.1.2.3", "head.example"}).ok());
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  TlsConfig Load(TlsRole role) {
    absl::StatusOr<TlsConfig> tls = LoadTlsConfig(ClusterTlsFiles(dir_, role), true);
    EXPECT_TRUE(tls.ok()) << tls.status();
    return tls.value_or(TlsConfig{});
  }

  // Starts a node-like server (client certificates required); returns its address.
  std::string StartServer(const TlsConfig& tls) {
    server_tls_ = tls;
    service_ = std::make_unique<HeadOnlyService>(&server_tls_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", server_tls_.ServerCredentials(true), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    return "127.0.0.1:" + std::to_string(port);
  }

  grpc::Status Call(const std::string& address, const TlsConfig& client,
                    TlsRole expect = TlsRole::kNode) {
    auto stub = v1::NodeService::NewStub(client.MakeChannel(address, expect));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListNodesResponse response;
    return stub->ListNodes(&context, {}, &response);
  }

  std::string dir_;
  TlsConfig server_tls_;
  std::unique_ptr<HeadOnlyService> service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClusterTlsTest, EveryFileIsPrivate) {
  for (const char* name : {"ca.crt", "ca.key", "head.crt", "head.key", "node.crt", "node.key",
                           "client.crt", "client.key"}) {
    struct stat st {};
    ASSERT_EQ(stat((dir_ + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
}

TEST_F(ClusterTlsTest, OnlyTheHeadsCertificateIsAdmitted) {
  const std::string address = StartServer(Load(TlsRole::kNode));
  EXPECT_TRUE(Call(address, Load(TlsRole::kHead)).ok());
  grpc::Status client = Call(address, Load(TlsRole::kClient));
  EXPECT_EQ(client.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(client.error_message(),
              HasSubstr("ListNodes: only a peer with a berth-head certificate"));
  EXPECT_EQ(Call(address, Load(TlsRole::kNode)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ClusterTlsTest, HandshakesWithoutTheClustersCertificatesFail) {
  const std::string address = StartServer(Load(TlsRole::kNode));
  // Plaintext.
  EXPECT_EQ(Call(address, TlsConfig{}).error_code(), grpc::StatusCode::UNAVAILABLE);
  // TLS without a client certificate.
  TlsConfig no_cert = Load(TlsRole::kHead);
  no_cert.cert_pem.clear();
  no_cert.key_pem.clear();
  EXPECT_EQ(Call(address, no_cert).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A head certificate of another cluster's CA.
  const std::string other = TempDir();
  ASSERT_TRUE(CreateClusterCertificates(other).ok());
  absl::StatusOr<TlsConfig> foreign = LoadTlsConfig(ClusterTlsFiles(other, TlsRole::kHead), true);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(Call(address, *foreign).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Our CA but a foreign head certificate: the server refuses it.
  TlsConfig mixed = Load(TlsRole::kHead);
  mixed.cert_pem = foreign->cert_pem;
  mixed.key_pem = foreign->key_pem;
  EXPECT_EQ(Call(address, mixed).error_code(), grpc::StatusCode::UNAVAILABLE);
  std::system(("rm -rf " + other).c_str());
}

TEST_F(ClusterTlsTest, ClientsCheckTheServersRole) {
  // A node certificate cannot pass for the head: a client expecting the head
  // refuses it.
  const std::string address = StartServer(Load(TlsRole::kNode));
  EXPECT_EQ(Call(address, Load(TlsRole::kHead), TlsRole::kHead).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ClusterTlsTest, FlagErrorsNameTheFlag) {
  TlsFiles files = ClusterTlsFiles(dir_, TlsRole::kHead);
  EXPECT_FALSE(LoadTlsConfig(TlsFiles{}, true)->enabled);
  EXPECT_THAT(LoadTlsConfig({"", files.cert_file, files.key_file}, true).status().message(),
              HasSubstr("--tls-ca-file: required"));
  EXPECT_THAT(LoadTlsConfig({files.ca_file, files.cert_file, ""}, true).status().message(),
              HasSubstr("--tls-key-file: required"));
  EXPECT_THAT(LoadTlsConfig({files.ca_file, "", ""}, true).status().message(),
              HasSubstr("--tls-cert-file"));
  EXPECT_TRUE(
      LoadTlsConfig({files.ca_file, "", ""}, false).ok());  // a client without a certificate
  EXPECT_THAT(LoadTlsConfig({files.key_file, "", ""}, false).status().message(),
              HasSubstr("--tls-ca-file " + files.key_file + ": no PEM certificate"));
  chmod(files.key_file.c_str(), 0644);
  absl::StatusOr<TlsConfig> open_key = LoadTlsConfig(files, true);
  EXPECT_EQ(open_key.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(open_key.status().message(), HasSubstr("--tls-key-file"));
}

}  // namespace
}  // namespace berth
