// The cluster token: with --token-file on the head and raylets, every RPC
// without the right `authorization: Bearer` token is refused with
// UNAUTHENTICATED and does nothing; the head's own calls to raylets carry
// it; a token file others can read is refused at start. With TLS, the head
// and raylets speak mutual TLS, a raylet serves only the head and the head
// registers only nodes, each refusal with nothing done.
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>

#include "auth/cluster_tls.h"
#include "auth/cluster_token.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

// Creates a one-GPU group with the cluster's credentials and waits until it
// is CREATED (the head's prepare and commit reached the raylet); "" if not.
std::string CreateGroup(LocalCluster& cluster, const std::string& request_id) {
  v1::CreatePlacementGroupRequest create;
  create.set_request_id(request_id);
  (*create.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
  v1::CreatePlacementGroupResponse created;
  if (!cluster.groups().CreatePlacementGroup(cluster.context().get(), create, &created).ok())
    return "";
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(created.placement_group_id());
  v1::GetPlacementGroupResponse group;
  const bool placed = WaitUntil(
      [&] {
        return cluster.groups().GetPlacementGroup(cluster.context().get(), get, &group).ok() &&
               group.placement_group().state() == v1::PLACEMENT_GROUP_STATE_CREATED;
      },
      seconds(10));
  return placed ? created.placement_group_id() : "";
}

TEST(AuthTest, EveryCallNeedsTheClusterToken) {
  LocalCluster cluster(100, {}, "127.0.0.1", /*with_token=*/true);
  cluster.AddRaylet({"n0", 2, "A10G", 8, "32Gi"});

  // No token, a wrong token: refused, nothing done.
  v1::CreatePlacementGroupRequest create;
  create.set_request_id("create-1");
  (*create.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
  v1::CreatePlacementGroupResponse created;
  grpc::Status s = cluster.groups().CreatePlacementGroup(Context().get(), create, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("cluster token"));
  auto wrong = Context();
  AttachClusterToken(wrong.get(), std::string(cluster.token().size(), 'x'));
  EXPECT_EQ(cluster.groups().CreatePlacementGroup(wrong.get(), create, &created).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListNodesResponse nodes;
  EXPECT_EQ(cluster.nodes().ListNodes(Context().get(), {}, &nodes).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListPlacementGroupsResponse groups;
  ASSERT_TRUE(cluster.groups().ListPlacementGroups(cluster.context().get(), {}, &groups).ok());
  EXPECT_EQ(groups.placement_groups_size(), 0);

  // With the token: placed, which also means the head's prepare and commit
  // calls carried the token to the raylet.
  const std::string id = CreateGroup(cluster, "create-1");
  ASSERT_FALSE(id.empty());

  // The raylet refuses to start a process without the token.
  v1::StartWorkerRequest start;
  start.set_request_id("start-1");
  start.mutable_spec()->set_worker_id("intruder");
  start.mutable_spec()->set_placement_group_id(id);
  for (const char* a : {"/bin/sh", "-c", "sleep 30"}) start.mutable_spec()->add_argv(a);
  v1::StartWorkerResponse started;
  EXPECT_EQ(cluster.raylet("n0").StartWorker(Context().get(), start, &started).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::PrepareBundleResourcesRequest prepare;
  prepare.set_placement_group_id("pg-x");
  prepare.set_request_id("prepare-1");
  (*prepare.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  v1::PrepareBundleResourcesResponse prepared;
  EXPECT_EQ(
      cluster.raylet("n0").PrepareBundleResources(Context().get(), prepare, &prepared).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster.raylet("n0").ListWorkers(cluster.context().get(), {}, &workers).ok());
  EXPECT_EQ(workers.workers_size(), 0);
}

// A stub of `Service` at `address`, as a peer holding `as`'s certificate of
// `tls_dir` (or plaintext when `tls_dir` is empty), expecting `server`.
template <typename Service>
std::unique_ptr<typename Service::Stub> StubAs(const std::string& address,
                                               const std::string& tls_dir, TlsRole as,
                                               TlsRole server) {
  TlsConfig tls;
  if (!tls_dir.empty()) tls = *LoadTlsConfig(ClusterTlsFiles(tls_dir, as), true);
  return Service::NewStub(tls.MakeChannel(address, server));
}

TEST(AuthTest, MutualTlsAdmitsOnlyTheHeadToRayletsAndOnlyNodesToRegister) {
  LocalCluster cluster(100, {}, "127.0.0.1", /*with_token=*/true, /*with_tls=*/true);
  cluster.AddRaylet({"n0", 2, "A10G", 8, "32Gi"});  // registered over mutual TLS

  // Placed: the head's prepare and commit reached the raylet over TLS.
  const std::string id = CreateGroup(cluster, "create-tls");
  ASSERT_FALSE(id.empty());

  // Plaintext, or a certificate of another CA, to the head: no connection.
  v1::ListPlacementGroupsResponse groups;
  auto plain_head = StubAs<v1::PlacementGroupService>(cluster.head_address(), "", TlsRole::kClient,
                                                      TlsRole::kHead);
  EXPECT_EQ(plain_head->ListPlacementGroups(cluster.context().get(), {}, &groups).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  char other[] = "/tmp/berth-other-ca-XXXXXX";
  ASSERT_NE(mkdtemp(other), nullptr);
  ASSERT_TRUE(CreateClusterCertificates(other).ok());
  auto foreign = StubAs<v1::PlacementGroupService>(cluster.head_address(), other, TlsRole::kClient,
                                                   TlsRole::kHead);
  v1::CreatePlacementGroupRequest create;
  create.set_request_id("create-foreign");
  (*create.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
  v1::CreatePlacementGroupResponse created;
  EXPECT_EQ(foreign->CreatePlacementGroup(cluster.context().get(), create, &created).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // A client certificate (with the token) cannot register a node.
  v1::RegisterNodeRequest impostor;
  impostor.set_node_id("impostor");
  impostor.set_address("127.0.0.1:1");
  (*impostor.mutable_total()->mutable_amounts())["CPU"] = 64;
  v1::RegisterNodeResponse registered;
  grpc::Status refused =
      cluster.nodes().RegisterNode(cluster.context().get(), impostor, &registered);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("RegisterNode: only a peer with a berth-node certificate"));

  // The raylet: plaintext and TLS without a client certificate get no
  // connection; a client's or a node's certificate, token or not, is
  // refused; nothing starts.
  const std::string raylet = cluster.raylet_address("n0");
  v1::StartWorkerRequest start;
  start.set_request_id("start-tls");
  start.mutable_spec()->set_worker_id("intruder");
  start.mutable_spec()->set_placement_group_id(id);
  for (const char* a : {"/bin/sh", "-c", "sleep 30"}) start.mutable_spec()->add_argv(a);
  v1::StartWorkerResponse started;
  auto plain_raylet = StubAs<v1::RayletService>(raylet, "", TlsRole::kClient, TlsRole::kNode);
  EXPECT_EQ(plain_raylet->StartWorker(cluster.context().get(), start, &started).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  TlsConfig no_certificate = *LoadTlsConfig({cluster.tls_dir() + "/ca.crt", "", ""}, false);
  auto anonymous = v1::RayletService::NewStub(no_certificate.MakeChannel(raylet, TlsRole::kNode));
  EXPECT_EQ(anonymous->StartWorker(cluster.context().get(), start, &started).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  for (TlsRole role : {TlsRole::kClient, TlsRole::kNode}) {
    auto stub = StubAs<v1::RayletService>(raylet, cluster.tls_dir(), role, TlsRole::kNode);
    grpc::Status s = stub->StartWorker(cluster.context().get(), start, &started);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << TlsRoleName(role);
    EXPECT_THAT(s.error_message(),
                HasSubstr("StartWorker: only a peer with a berth-head certificate"));
    v1::CancelResourceReserveRequest cancel;
    cancel.set_placement_group_id(id);
    cancel.set_request_id(std::string("cancel-") + TlsRoleName(role));
    cancel.add_bundle_indices(0);
    v1::CancelResourceReserveResponse cancelled;
    EXPECT_EQ(stub->CancelResourceReserve(cluster.context().get(), cancel, &cancelled).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster.raylet("n0").ListWorkers(cluster.context().get(), {}, &workers).ok());
  EXPECT_EQ(workers.workers_size(), 0);
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(cluster.nodes().ListNodes(cluster.context().get(), {}, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  v1::GetPlacementGroupResponse group;
  ASSERT_TRUE(cluster.groups().GetPlacementGroup(cluster.context().get(), get, &group).ok());
  EXPECT_EQ(group.placement_group().state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  std::system((std::string("rm -rf ") + other).c_str());
}

TEST(AuthTest, ATokenFileOthersCanReadIsRefused) {
  char dir[] = "/tmp/berth-auth-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string token = std::string(dir) + "/token";
  std::ofstream(token) << "0123456789abcdef0123456789abcdef\n";
  chmod(token.c_str(), 0644);
  ChildProcess head({BERTH_HEAD_BIN, "--listen", "127.0.0.1:0", "--token-file", token},
                    std::string(dir) + "/head.log");
  const int status = head.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_THAT(ReadFileOrEmpty(std::string(dir) + "/head.log"), HasSubstr("readable by others"));
  std::remove(token.c_str());
  std::remove((std::string(dir) + "/head.log").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace berth::testing
