// berth-autoscaler end to end: a real head, the autoscaler with the
// `command` provider (scripts/local-pool.sh starting and stopping real
// raylets), a pending 8-GPU gang that only a new node can hold, and the
// node's removal once it has been idle.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class AutoscalerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_dir_ = cluster_.dir() + "/pools";
    std::ofstream(cluster_.dir() + "/autoscaler.yaml")
        << "provider:\n"
           "  type: command\n"
           "  command: [/bin/sh, " BERTH_SOURCE_DIR
           "/scripts/local-pool.sh]\n"
           "pools:\n"
           "  - {name: a10g, accelerator_type: A10G, gpus: 4, cpus: 8, memory: 16Gi, max_nodes: "
           "4,\n"
           "     idle_timeout_s: 1}\n"
           "  - {name: h100, accelerator_type: H100, gpus: 8, cpus: 16, memory: 32Gi, max_nodes: "
           "1,\n"
           "     idle_timeout_s: 1}\n";
    // The provider's script inherits the autoscaler's environment.
    setenv("BERTH_POOL_DIR", pool_dir_.c_str(), 1);
    setenv("BERTH_RAYLET_BIN", BERTH_RAYLET_BIN, 1);
    autoscaler_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{BERTH_AUTOSCALER_BIN, "--head", cluster_.head_address(),
                                 "--config", cluster_.dir() + "/autoscaler.yaml", "--period-ms",
                                 "200"},
        cluster_.dir() + "/autoscaler.log");
  }

  void TearDown() override {
    autoscaler_.reset();
    // Raylets the script started are not the cluster's children.
    for (const auto& pool : std::filesystem::directory_iterator(pool_dir_, ec_)) {
      for (const auto& f : std::filesystem::directory_iterator(pool.path(), ec_)) {
        if (f.path().extension() != ".pid") continue;
        std::ifstream in(f.path());
        pid_t pid = 0;
        // Only a raylet still running under that pid, not whatever got it since.
        std::error_code error;
        if (in >> pid && pid > 0 &&
            std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error) ==
                std::filesystem::canonical(BERTH_RAYLET_BIN, error)) {
          kill(pid, SIGKILL);
        }
      }
    }
  }

  v1::GetClusterStatusResponse Status() {
    v1::GetClusterStatusResponse status;
    EXPECT_TRUE(cluster_.cluster().GetClusterStatus(Context().get(), {}, &status).ok());
    return status;
  }

  v1::PlacementGroupState State(const std::string& id) {
    v1::GetPlacementGroupRequest get;
    get.set_placement_group_id(id);
    v1::GetPlacementGroupResponse response;
    cluster_.groups().GetPlacementGroup(Context().get(), get, &response);
    return response.placement_group().state();
  }

  std::string Create(int bundles, double gpus, v1::PlacementStrategy strategy,
                     const std::string& request_id) {
    v1::CreatePlacementGroupRequest request;
    request.set_strategy(strategy);
    request.set_request_id(request_id);
    for (int i = 0; i < bundles; ++i)
      (*request.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
    v1::CreatePlacementGroupResponse response;
    EXPECT_TRUE(cluster_.groups().CreatePlacementGroup(Context().get(), request, &response).ok());
    return response.placement_group_id();
  }

  LocalCluster cluster_;
  std::string pool_dir_;
  std::unique_ptr<ChildProcess> autoscaler_;
  std::error_code ec_;
};

TEST_F(AutoscalerTest, APendingEightGpuGangGetsANodeThatGoesAwayWhenIdle) {
  // 8 x 1 GPU on one node: no 4-GPU A10G node can hold it, one H100 node can.
  const std::string gang = Create(8, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK, "gang");
  // 16 GPUs on one node: no pool can; reported, and nothing is added for it.
  Create(1, 16, v1::PLACEMENT_STRATEGY_PACK, "never");

  ASSERT_TRUE(
      WaitUntil([&] { return State(gang) == v1::PLACEMENT_GROUP_STATE_CREATED; }, seconds(30)))
      << "autoscaler log:\n"
      << ReadFileOrEmpty(cluster_.dir() + "/autoscaler.log");
  v1::GetClusterStatusResponse status;
  ASSERT_TRUE(WaitUntil(
      [&] {
        status = Status();
        return status.autoscaler().recent_actions_size() >= 1 &&
               status.autoscaler().unsatisfiable_size() == 1 &&
               status.autoscaler().pools_size() == 2 && status.autoscaler().pools(1).nodes() == 1;
      },
      seconds(5)));
  const v1::AutoscalerStatus& report = status.autoscaler();
  const v1::AutoscalerAction& up = report.recent_actions(0);
  EXPECT_EQ(up.kind(), v1::AUTOSCALER_ACTION_KIND_SCALE_UP);
  EXPECT_EQ(up.pool(), "h100");
  EXPECT_EQ(up.target_nodes(), 1u);
  EXPECT_EQ(up.error(), "");
  EXPECT_THAT(report.unsatisfiable(0).reason(), HasSubstr("no node pool"));
  ASSERT_EQ(report.pools_size(), 2);
  EXPECT_EQ(report.pools(0).name(), "a10g");
  EXPECT_EQ(report.pools(0).target_nodes(), 0u);  // nothing for the 16-GPU gang
  EXPECT_EQ(report.pools(1).nodes(), 1u);
  EXPECT_EQ(status.alive_nodes(), 1u);

  // Idle for idle_timeout_s: drained, then removed; the raylet stops and
  // the head sees the node die.
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(gang);
  remove.set_request_id("remove-gang");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(cluster_.groups().RemovePlacementGroup(Context().get(), remove, &removed).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return Status().alive_nodes() == 0 && Status().draining_nodes() == 0; }, seconds(30)))
      << "autoscaler log:\n"
      << ReadFileOrEmpty(cluster_.dir() + "/autoscaler.log");
  status = Status();
  std::vector<v1::AutoscalerActionKind> kinds;
  for (const auto& a : status.autoscaler().recent_actions()) kinds.push_back(a.kind());
  EXPECT_THAT(kinds, ::testing::ElementsAre(v1::AUTOSCALER_ACTION_KIND_SCALE_UP,
                                            v1::AUTOSCALER_ACTION_KIND_DRAIN,
                                            v1::AUTOSCALER_ACTION_KIND_REMOVE));
  EXPECT_EQ(status.autoscaler().pools(1).target_nodes(), 0u);
}

}  // namespace
}  // namespace berth::testing
