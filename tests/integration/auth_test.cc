// The cluster token: with --token-file on the head and raylets, every RPC
// without the right `authorization: Bearer` token is refused with
// UNAUTHENTICATED and does nothing; the head's own calls to raylets carry
// it; a token file others can read is refused at start.
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>

#include "common/cluster_token.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

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
  EXPECT_EQ(cluster.nodes().ListNodes(Context().get(), {}, &nodes).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::ListPlacementGroupsResponse groups;
  ASSERT_TRUE(cluster.groups().ListPlacementGroups(cluster.context().get(), {}, &groups).ok());
  EXPECT_EQ(groups.placement_groups_size(), 0);

  // With the token: placed, which also means the head's prepare and commit
  // calls carried the token to the raylet.
  ASSERT_TRUE(cluster.groups().CreatePlacementGroup(cluster.context().get(), create, &created).ok());
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(created.placement_group_id());
  v1::GetPlacementGroupResponse group;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return cluster.groups().GetPlacementGroup(cluster.context().get(), get, &group).ok() &&
               group.placement_group().state() == v1::PLACEMENT_GROUP_STATE_CREATED;
      },
      seconds(10)));

  // The raylet refuses to start a process without the token.
  v1::StartWorkerRequest start;
  start.set_request_id("start-1");
  start.mutable_spec()->set_worker_id("intruder");
  start.mutable_spec()->set_placement_group_id(created.placement_group_id());
  for (const char* a : {"/bin/sh", "-c", "sleep 30"}) start.mutable_spec()->add_argv(a);
  v1::StartWorkerResponse started;
  EXPECT_EQ(cluster.raylet("n0").StartWorker(Context().get(), start, &started).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::PrepareBundleResourcesRequest prepare;
  prepare.set_placement_group_id("pg-x");
  prepare.set_request_id("prepare-1");
  (*prepare.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  v1::PrepareBundleResourcesResponse prepared;
  EXPECT_EQ(cluster.raylet("n0").PrepareBundleResources(Context().get(), prepare, &prepared).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster.raylet("n0").ListWorkers(cluster.context().get(), {}, &workers).ok());
  EXPECT_EQ(workers.workers_size(), 0);
}

TEST(AuthTest, ATokenFileOthersCanReadIsRefused) {
  char dir[] = "/tmp/berth-auth-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string token = std::string(dir) + "/token";
  std::ofstream(token) << "0123456789abcdef0123456789abcdef\n";
  chmod(token.c_str(), 0644);
  ChildProcess head({BERTH_HEAD_BIN, "--listen", "127.0.0.1:0", "--token-file", token}, std::string(dir) + "/head.log");
  const int status = head.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_THAT(ReadFileOrEmpty(std::string(dir) + "/head.log"), HasSubstr("readable by others"));
  std::remove(token.c_str());
  std::remove((std::string(dir) + "/head.log").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace berth::testing
