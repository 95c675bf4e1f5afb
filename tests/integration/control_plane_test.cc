// The control plane across real processes: one berth-head and three
// berth-raylets with simulated GPUs of two accelerator types, on 127.0.0.1.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

using Availability = std::map<std::string, std::map<std::string, double>>;

// An amount of a resource set; absent means zero, as on the wire.
double Amount(const std::map<std::string, double>& amounts, const std::string& name) {
  auto it = amounts.find(name);
  return it == amounts.end() ? 0 : it->second;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    // a10g-0 and a10g-1: 4 x A10G each; t4-0: 2 x T4.
    cluster_->AddRaylet({"a10g-0", 4, "A10G", 16, "64Gi", "zone=a"});
    cluster_->AddRaylet({"a10g-1", 4, "A10G", 16, "64Gi", "zone=b"});
    cluster_->AddRaylet({"t4-0", 2, "T4", 8, "32Gi", "zone=a"});
  }

  Availability Available() {
    v1::ListNodesResponse response;
    EXPECT_TRUE(cluster_->nodes().ListNodes(Context().get(), {}, &response).ok());
    Availability out;
    for (const auto& n : response.nodes()) {
      out[n.node_id()] = {n.available().amounts().begin(), n.available().amounts().end()};
    }
    return out;
  }

  static v1::Bundle GpuBundle(double gpus, const std::string& accelerator = "") {
    v1::Bundle b;
    (*b.mutable_resources()->mutable_amounts())["GPU"] = gpus;
    (*b.mutable_resources()->mutable_amounts())["CPU"] = 1;
    if (!accelerator.empty()) {
      auto* r = b.mutable_selector()->add_requirements();
      r->set_key("berth.io/accelerator-type");
      r->set_op(v1::LABEL_OPERATOR_IN);
      r->add_values(accelerator);
    }
    return b;
  }

  grpc::Status Create(std::vector<v1::Bundle> bundles, v1::PlacementStrategy strategy,
                      std::string* id, const std::string& name = "") {
    v1::CreatePlacementGroupRequest request;
    request.set_request_id("req-" + std::to_string(next_request_++));
    request.set_strategy(strategy);
    request.set_name(name);
    for (auto& b : bundles) *request.add_bundles() = std::move(b);
    v1::CreatePlacementGroupResponse response;
    grpc::Status s = cluster_->groups().CreatePlacementGroup(Context().get(), request, &response);
    *id = response.placement_group_id();
    return s;
  }

  std::string CreateOk(std::vector<v1::Bundle> bundles, v1::PlacementStrategy strategy) {
    std::string id;
    grpc::Status s = Create(std::move(bundles), strategy, &id);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return id;
  }

  v1::PlacementGroupInfo WaitReady(const std::string& id, int timeout_ms = 10000) {
    v1::WaitPlacementGroupReadyRequest request;
    request.set_placement_group_id(id);
    request.set_timeout_ms(timeout_ms);
    v1::WaitPlacementGroupReadyResponse response;
    grpc::Status s = cluster_->groups().WaitPlacementGroupReady(
        Context(milliseconds(timeout_ms + 5000)).get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.placement_group();
  }

  v1::PlacementGroupInfo Get(const std::string& id) {
    v1::GetPlacementGroupRequest request;
    request.set_placement_group_id(id);
    v1::GetPlacementGroupResponse response;
    EXPECT_TRUE(cluster_->groups().GetPlacementGroup(Context().get(), request, &response).ok());
    return response.placement_group();
  }

  void Remove(const std::string& id) {
    v1::RemovePlacementGroupRequest request;
    request.set_placement_group_id(id);
    request.set_request_id("rm-" + id);
    v1::RemovePlacementGroupResponse response;
    grpc::Status s = cluster_->groups().RemovePlacementGroup(Context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  // Asks the raylet itself whether all of its GPUs and CPUs are free, by
  // preparing (then cancelling) a probe bundle of its whole capacity.
  bool RayletIsIdle(const std::string& node_id, int gpus, int cpus) {
    v1::PrepareBundleResourcesRequest prepare;
    prepare.set_placement_group_id("probe");
    prepare.set_request_id("probe-" + std::to_string(next_request_++));
    v1::BundleReservation* b = prepare.add_bundles();
    (*b->mutable_resources()->mutable_amounts())["CPU"] = cpus;
    if (gpus > 0) (*b->mutable_resources()->mutable_amounts())["GPU"] = gpus;
    for (int i = 0; i < gpus; ++i) {
      v1::GpuShare* g = b->add_gpus();
      g->set_index(i);
      g->set_units(10000);
    }
    v1::PrepareBundleResourcesResponse prepared;
    grpc::Status s =
        cluster_->raylet(node_id).PrepareBundleResources(Context().get(), prepare, &prepared);
    EXPECT_TRUE(s.ok()) << s.error_message();
    v1::CancelResourceReserveRequest cancel;
    cancel.set_placement_group_id("probe");
    cancel.set_request_id(prepare.request_id() + "-cancel");
    cancel.add_bundle_indices(0);
    v1::CancelResourceReserveResponse cancelled;
    EXPECT_TRUE(
        cluster_->raylet(node_id).CancelResourceReserve(Context().get(), cancel, &cancelled).ok());
    return prepared.prepared();
  }

  // The three raylets of SetUp hold nothing, as they see it themselves.
  bool AllRayletsIdle() {
    return RayletIsIdle("a10g-0", 4, 16) && RayletIsIdle("a10g-1", 4, 16) &&
           RayletIsIdle("t4-0", 2, 8);
  }

  std::unique_ptr<LocalCluster> cluster_;
  int next_request_ = 0;
};

TEST_F(ControlPlaneTest, EveryStrategyPlacesAndRemovesWithExactAvailability) {
  const Availability idle = Available();
  ASSERT_EQ(idle.size(), 3u);
  EXPECT_EQ(idle.at("a10g-0").at("GPU"), 4);
  EXPECT_EQ(idle.at("a10g-0").at("accelerator_type:A10G"), 1);
  struct Case {
    v1::PlacementStrategy strategy;
    int bundles;
    std::string accelerator;
    size_t expected_nodes;
  };
  for (const Case& c : std::vector<Case>{{v1::PLACEMENT_STRATEGY_PACK, 3, "A10G", 1},
                                         {v1::PLACEMENT_STRATEGY_SPREAD, 3, "", 3},
                                         {v1::PLACEMENT_STRATEGY_STRICT_PACK, 4, "A10G", 1},
                                         {v1::PLACEMENT_STRATEGY_STRICT_SPREAD, 2, "A10G", 2}}) {
    SCOPED_TRACE(v1::PlacementStrategy_Name(c.strategy));
    std::vector<v1::Bundle> bundles(c.bundles, GpuBundle(1, c.accelerator));
    const std::string id = CreateOk(bundles, c.strategy);
    v1::PlacementGroupInfo info = WaitReady(id);
    ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.pending_reason();
    ASSERT_EQ(info.locations_size(), c.bundles);
    std::map<std::string, int> gpus_used;
    std::set<std::pair<std::string, uint32_t>> gpu_ids;
    for (const auto& loc : info.locations()) {
      ++gpus_used[loc.node_id()];
      ASSERT_EQ(loc.gpus_size(), 1);
      EXPECT_TRUE(gpu_ids.insert({loc.node_id(), loc.gpus(0).index()}).second) << "GPU given twice";
      if (!c.accelerator.empty()) {
        EXPECT_THAT(loc.node_id(), HasSubstr("a10g"));
      }
    }
    EXPECT_EQ(gpus_used.size(), c.expected_nodes);
    const Availability during = Available();
    for (const auto& [node, amounts] : idle) {
      const int used = gpus_used.count(node) ? gpus_used[node] : 0;
      EXPECT_EQ(Amount(during.at(node), "GPU"), Amount(amounts, "GPU") - used) << node;
      EXPECT_EQ(Amount(during.at(node), "CPU"), Amount(amounts, "CPU") - used) << node;
    }
    Remove(id);
    EXPECT_EQ(Get(id).state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
    EXPECT_EQ(Available(), idle);
  }
  // The raylets' own view: the head releases on them asynchronously.
  EXPECT_TRUE(WaitUntil([&] { return AllRayletsIdle(); }, seconds(5)));
}

TEST_F(ControlPlaneTest, KilledRayletsBundlesAreRescheduled) {
  const std::string spread =
      CreateOk(std::vector<v1::Bundle>(3, GpuBundle(1)), v1::PLACEMENT_STRATEGY_SPREAD);
  ASSERT_EQ(WaitReady(spread).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string strict =
      CreateOk(std::vector<v1::Bundle>(3, GpuBundle(1)), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  ASSERT_EQ(WaitReady(strict).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(Get(spread).locations(2).node_id().empty(), false);

  cluster_->KillRaylet("t4-0", SIGKILL);
  // DEAD after the liveness timeout; rescheduled soon after.
  const bool replaced = WaitUntil(
      [&] {
        v1::PlacementGroupInfo info = Get(spread);
        if (info.state() != v1::PLACEMENT_GROUP_STATE_CREATED || info.locations_size() != 3)
          return false;
        for (const auto& loc : info.locations()) {
          if (loc.node_id() == "t4-0") return false;
        }
        return true;
      },
      seconds(5));
  EXPECT_TRUE(replaced) << Get(spread).DebugString();
  // STRICT_SPREAD over 3 nodes cannot fit on the 2 that are left.
  v1::PlacementGroupInfo info = Get(strict);
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_EQ(info.locations_size(), 2);
  EXPECT_THAT(info.pending_reason(), HasSubstr("STRICT_SPREAD"));
  v1::ListNodesRequest dead;
  dead.add_states(v1::NODE_STATE_DEAD);
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(cluster_->nodes().ListNodes(Context().get(), dead, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).node_id(), "t4-0");
  // The node comes back: the group is whole again.
  cluster_->RestartRaylet("t4-0");
  EXPECT_EQ(WaitReady(strict).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(ControlPlaneTest, RefusedPrepareLeavesNoPartialPlacement) {
  const std::string refuse = cluster_->dir() + "/refuse";
  ASSERT_EQ(ReadFileOrEmpty(refuse), "");
  { std::ofstream(refuse) << "x"; }
  cluster_->AddRaylet({"t4-1", 2, "T4", 8, "32Gi", "", {"--refuse-prepare-file", refuse}});
  const Availability idle = Available();
  const std::string id =
      CreateOk(std::vector<v1::Bundle>(4, GpuBundle(1)), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  // Polled rather than read once after a fixed time: under a sanitizer the
  // first commit can take longer than that to be refused.
  v1::PlacementGroupInfo pending;
  EXPECT_TRUE(WaitUntil(
      [&] {
        pending = Get(id);
        return pending.pending_reason().find("refused to prepare") != std::string::npos;
      },
      seconds(20)))
      << pending.pending_reason();
  EXPECT_NE(pending.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // Every other raylet cancelled what it prepared.
  EXPECT_TRUE(WaitUntil([&] { return Available() == idle; }, seconds(3)));
  EXPECT_TRUE(WaitUntil([&] { return AllRayletsIdle(); }, seconds(5)));
  // The raylet recovers: the group is placed.
  std::remove(refuse.c_str());
  v1::PlacementGroupInfo created = WaitReady(id);
  EXPECT_EQ(created.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << created.pending_reason();
}

TEST_F(ControlPlaneTest, ThousandCreateRemoveCyclesLeaveAvailabilityExact) {
  const Availability idle = Available();
  const std::vector<v1::PlacementStrategy> strategies = {
      v1::PLACEMENT_STRATEGY_PACK, v1::PLACEMENT_STRATEGY_SPREAD,
      v1::PLACEMENT_STRATEGY_STRICT_PACK, v1::PLACEMENT_STRATEGY_STRICT_SPREAD};
  for (int i = 0; i < 1000; ++i) {
    std::vector<v1::Bundle> bundles(1 + i % 3, GpuBundle(i % 4 == 0 ? 0.5 : 1));
    const std::string id = CreateOk(bundles, strategies[i % 4]);
    ASSERT_EQ(WaitReady(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED) << "cycle " << i;
    Remove(id);
  }
  EXPECT_EQ(Available(), idle);
  EXPECT_TRUE(WaitUntil([&] { return AllRayletsIdle(); }, seconds(5)));
}

// The batch calls: 200 groups in one CreatePlacementGroups (their raylet
// calls batched per node), one wait, one removal; a batch with one bad
// request creates nothing; the raylets end idle.
TEST_F(ControlPlaneTest, BatchCallsCreateWaitAndRemoveManyGroups) {
  const Availability idle = Available();
  v1::CreatePlacementGroupsRequest create;
  for (int i = 0; i < 200; ++i) {
    v1::CreatePlacementGroupRequest* r = create.add_requests();
    r->set_request_id("batch-" + std::to_string(i));
    (*r->add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 0.1;
  }
  v1::CreatePlacementGroupsRequest bad = create;
  for (int i = 0; i < bad.requests_size(); ++i)
    bad.mutable_requests(i)->set_request_id("bad-" + std::to_string(i));
  (*bad.mutable_requests(150)->mutable_bundles(0)->mutable_resources()->mutable_amounts())["CPU"] =
      -1;
  v1::CreatePlacementGroupsResponse refused;
  grpc::Status s = cluster_->groups().CreatePlacementGroups(Context().get(), bad, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("requests[150].bundles[0]"));
  v1::ListPlacementGroupsResponse none;
  ASSERT_TRUE(cluster_->groups().ListPlacementGroups(Context().get(), {}, &none).ok());
  EXPECT_EQ(none.placement_groups_size(), 0);

  v1::CreatePlacementGroupsResponse created;
  s = cluster_->groups().CreatePlacementGroups(Context().get(), create, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(created.placement_group_ids_size(), 200);
  v1::WaitPlacementGroupsReadyRequest wait;
  *wait.mutable_placement_group_ids() = created.placement_group_ids();
  wait.set_timeout_ms(20000);
  v1::WaitPlacementGroupsReadyResponse ready;
  s = cluster_->groups().WaitPlacementGroupsReady(Context(seconds(25)).get(), wait, &ready);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(ready.ready());
  ASSERT_EQ(ready.states_size(), 200);
  for (int st : ready.states()) EXPECT_EQ(st, v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_NE(Available(), idle);
  EXPECT_FALSE(AllRayletsIdle());

  v1::RemovePlacementGroupsRequest remove;
  *remove.mutable_placement_group_ids() = created.placement_group_ids();
  remove.add_placement_group_ids("pg-unknown");
  remove.set_request_id("batch-remove");
  v1::RemovePlacementGroupsResponse removed;
  s = cluster_->groups().RemovePlacementGroups(Context().get(), remove, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("placement_group_ids[200]"));
  EXPECT_EQ(Get(created.placement_group_ids(0)).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);  // none removed
  remove.mutable_placement_group_ids()->RemoveLast();
  s = cluster_->groups().RemovePlacementGroups(Context().get(), remove, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Available(), idle);
  EXPECT_TRUE(WaitUntil([&] { return AllRayletsIdle(); }, seconds(5)));
}

TEST_F(ControlPlaneTest, WorkerSeesItsGpusLogsOutputAndItsExitReachesTheHead) {
  const std::string id = CreateOk({GpuBundle(2, "T4")}, v1::PLACEMENT_STRATEGY_PACK);
  v1::PlacementGroupInfo info = WaitReady(id);
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(info.locations(0).node_id(), "t4-0");
  v1::StartWorkerRequest start;
  start.set_request_id("start-w1");
  v1::WorkerSpec* spec = start.mutable_spec();
  spec->set_worker_id("w1");
  spec->set_job_id("job-1");
  spec->set_placement_group_id(id);
  spec->set_bundle_index(0);
  spec->add_argv("/bin/sh");
  spec->add_argv("-c");
  spec->add_argv("echo \"gpus=$CUDA_VISIBLE_DEVICES rank=$RANK\"; echo oops >&2; exit 7");
  (*spec->mutable_env())["RANK"] = "0";
  v1::StartWorkerResponse started;
  grpc::Status s = cluster_->raylet("t4-0").StartWorker(Context().get(), start, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(started.pid(), 0);
  v1::ListWorkerExitsRequest exits_request;
  exits_request.set_job_id("job-1");
  v1::ListWorkerExitsResponse exits;
  ASSERT_TRUE(WaitUntil(
      [&] {
        exits.Clear();
        return cluster_->nodes().ListWorkerExits(Context().get(), exits_request, &exits).ok() &&
               exits.exits_size() == 1;
      },
      seconds(5)));
  EXPECT_EQ(exits.exits(0).node_id(), "t4-0");
  EXPECT_EQ(exits.exits(0).status().worker_id(), "w1");
  EXPECT_EQ(exits.exits(0).status().exit_code(), 7);
  const std::string out = ReadFileOrEmpty(cluster_->log_dir("t4-0") + "/w1.out");
  EXPECT_EQ(out, "gpus=" + std::string(info.locations(0).gpus(0).index() == 0 ? "0,1" : "1,0") +
                     " rank=0\n");
  EXPECT_EQ(ReadFileOrEmpty(cluster_->log_dir("t4-0") + "/w1.err"), "oops\n");
}

TEST_F(ControlPlaneTest, BadInputIsRejectedNamingTheField) {
  auto expect = [&](v1::CreatePlacementGroupRequest request, grpc::StatusCode code,
                    const std::string& field) {
    if (request.request_id().empty())
      request.set_request_id("bad-" + std::to_string(next_request_++));
    v1::CreatePlacementGroupResponse response;
    grpc::Status s = cluster_->groups().CreatePlacementGroup(Context().get(), request, &response);
    EXPECT_EQ(s.error_code(), code) << field << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(field));
  };
  v1::CreatePlacementGroupRequest negative;
  *negative.add_bundles() = GpuBundle(-1);
  expect(negative, grpc::StatusCode::INVALID_ARGUMENT, "bundles[0].resources.amounts[\"GPU\"]");
  v1::CreatePlacementGroupRequest nan;
  *nan.add_bundles() = GpuBundle(std::nan(""));
  expect(nan, grpc::StatusCode::INVALID_ARGUMENT, "bundles[0].resources.amounts[\"GPU\"]");
  v1::CreatePlacementGroupRequest strategy;
  *strategy.add_bundles() = GpuBundle(1);
  strategy.set_strategy(static_cast<v1::PlacementStrategy>(99));
  expect(strategy, grpc::StatusCode::INVALID_ARGUMENT, "strategy");
  expect(v1::CreatePlacementGroupRequest(), grpc::StatusCode::INVALID_ARGUMENT, "bundles");
  v1::CreatePlacementGroupRequest oversize;
  for (int i = 0; i < 5000; ++i) *oversize.add_bundles() = GpuBundle(0.001);
  expect(oversize, grpc::StatusCode::INVALID_ARGUMENT, "bundles: 5000 bundles");
  v1::CreatePlacementGroupRequest long_name;
  *long_name.add_bundles() = GpuBundle(1);
  long_name.set_name(std::string(1000, 'x'));
  expect(long_name, grpc::StatusCode::INVALID_ARGUMENT, "name");

  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id("pg-unknown");
  v1::GetPlacementGroupResponse got;
  grpc::Status s = cluster_->groups().GetPlacementGroup(Context().get(), get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("placement_group_id"));
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id("pg-unknown");
  v1::RemovePlacementGroupResponse removed;
  EXPECT_EQ(cluster_->groups().RemovePlacementGroup(Context().get(), remove, &removed).error_code(),
            grpc::StatusCode::NOT_FOUND);

  v1::RegisterNodeRequest duplicate;
  duplicate.set_node_id("a10g-0");
  duplicate.set_address("127.0.0.1:1");
  duplicate.set_request_id("dup");
  (*duplicate.mutable_total()->mutable_amounts())["CPU"] = 1;
  v1::RegisterNodeResponse registered;
  s = cluster_->nodes().RegisterNode(Context().get(), duplicate, &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("node_id"));
  v1::DrainNodeRequest drain;
  drain.set_node_id(std::string(500, 'n'));
  v1::DrainNodeResponse drained;
  s = cluster_->nodes().DrainNode(Context().get(), drain, &drained);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("node_id"));

  // The head is still serving and nothing was half-applied.
  v1::ListPlacementGroupsResponse all;
  ASSERT_TRUE(cluster_->groups().ListPlacementGroups(Context().get(), {}, &all).ok());
  EXPECT_EQ(all.placement_groups_size(), 0);
  EXPECT_EQ(Available().size(), 3u);
}

// Where each bundle of each group is: (group, bundle) -> (node, GPU ids).
using Locations =
    std::map<std::pair<std::string, uint32_t>, std::pair<std::string, std::vector<uint32_t>>>;

// The default scorer's learned distribution is kept with the head's state:
// after a kill -9, the restarted head counts the 12 tasks it had seen (10 of
// them long removed), not only the 2 groups it restores, and places by it.
TEST_F(ControlPlaneTest, ARestartedHeadKeepsWhatItsScorerLearned) {
  auto scorer = [&] {
    v1::GetClusterStatusResponse status;
    EXPECT_TRUE(cluster_->cluster().GetClusterStatus(Context().get(), {}, &status).ok());
    return status.placement_scorer();
  };
  std::vector<std::string> kept;
  for (int i = 0; i < 12; ++i) {
    const std::string id =
        CreateOk({GpuBundle(i % 2 == 0 ? 0.25 : 1)}, v1::PLACEMENT_STRATEGY_PACK);
    ASSERT_EQ(WaitReady(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
    if (i < 10) {
      Remove(id);
    } else {
      kept.push_back(id);
    }
  }
  const v1::PlacementScorerStatus before = scorer();
  ASSERT_EQ(before.window_tasks(), 12u);
  ASSERT_EQ(before.active(), "fragmentation");

  cluster_->RestartHead(SIGKILL);

  const v1::PlacementScorerStatus after = scorer();
  EXPECT_EQ(after.window_tasks(), 12u);  // not 2 (the restored groups) nor 14
  EXPECT_EQ(after.window_shapes(), 2u);
  EXPECT_EQ(after.active(), "fragmentation");
  for (const std::string& id : kept) EXPECT_EQ(Get(id).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // It goes on learning from there.
  const std::string more = CreateOk({GpuBundle(0.5)}, v1::PLACEMENT_STRATEGY_PACK);
  ASSERT_EQ(WaitReady(more).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(scorer().window_tasks(), 13u);
}

TEST_F(ControlPlaneTest, AKilledHeadRestartsWithItsNodesGroupsAndReservations) {
  const std::string spread =
      CreateOk({GpuBundle(2), GpuBundle(2)}, v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  const std::string packed =
      CreateOk({GpuBundle(1, "T4"), GpuBundle(0.5, "T4")}, v1::PLACEMENT_STRATEGY_STRICT_PACK);
  ASSERT_EQ(WaitReady(spread).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(WaitReady(packed).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  std::string waiting;  // 4 distinct nodes on a 3-node cluster: pending
  ASSERT_TRUE(Create({GpuBundle(1), GpuBundle(1), GpuBundle(1), GpuBundle(1)},
                     v1::PLACEMENT_STRATEGY_STRICT_SPREAD, &waiting, "waits")
                  .ok());
  auto locations = [&] {
    Locations out;
    for (const std::string& id : {spread, packed}) {
      const v1::PlacementGroupInfo info = Get(id);
      for (const v1::BundleLocation& l : info.locations()) {
        std::vector<uint32_t> gpus;
        for (const v1::GpuShare& g : l.gpus()) gpus.push_back(g.index());
        out[{id, l.bundle_index()}] = {l.node_id(), gpus};
      }
    }
    return out;
  };
  const Locations before = locations();
  const Availability available = Available();
  // A worker in the spread group's bundle 0, which must outlive the head.
  const auto& [worker_node, worker_gpus] = before.at({spread, 0});
  v1::StartWorkerRequest start;
  start.set_request_id("start-survivor");
  start.mutable_spec()->set_worker_id("survivor");
  start.mutable_spec()->set_placement_group_id(spread);
  start.mutable_spec()->set_bundle_index(0);
  for (const char* a : {"/bin/sh", "-c", "sleep 60"}) start.mutable_spec()->add_argv(a);
  v1::StartWorkerResponse started;
  ASSERT_TRUE(cluster_->raylet(worker_node).StartWorker(Context().get(), start, &started).ok());
  // A bundle prepared on a raylet that the head never committed (as if the
  // head died mid-commit): the restarted head has it released.
  v1::PrepareBundleResourcesRequest orphan;
  orphan.set_placement_group_id("pg-orphan");
  orphan.set_request_id("orphan-1");
  (*orphan.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 2;
  v1::PrepareBundleResourcesResponse prepared;
  ASSERT_TRUE(
      cluster_->raylet("t4-0").PrepareBundleResources(Context().get(), orphan, &prepared).ok());
  ASSERT_TRUE(prepared.prepared());

  cluster_->RestartHead(SIGKILL);

  v1::ListNodesResponse nodes;
  ASSERT_TRUE(cluster_->nodes().ListNodes(Context().get(), {}, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 3);
  for (const v1::NodeInfo& n : nodes.nodes())
    EXPECT_EQ(n.state(), v1::NODE_STATE_ALIVE) << n.node_id();
  EXPECT_EQ(Get(spread).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Get(packed).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Get(waiting).state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(Get(waiting).name(), "waits");
  EXPECT_EQ(locations(), before);  // same nodes, same GPU instances
  EXPECT_EQ(Available(), available);
  // The nodes stay ALIVE past the liveness timeout: their raylets kept
  // heartbeating to the new head without registering again.
  std::this_thread::sleep_for(cluster_->liveness_timeout() +
                              milliseconds(cluster_->heartbeat_ms() * 3));
  ASSERT_TRUE(cluster_->nodes().ListNodes(Context().get(), {}, &nodes).ok());
  for (const v1::NodeInfo& n : nodes.nodes())
    EXPECT_EQ(n.state(), v1::NODE_STATE_ALIVE) << n.node_id();
  EXPECT_EQ(Get(spread).state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // The worker is still running; the orphan bundle is gone from t4-0.
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster_->raylet(worker_node).ListWorkers(Context().get(), {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).state(), v1::WORKER_STATE_RUNNING);
  EXPECT_TRUE(
      WaitUntil([&] { return RayletIsIdle("t4-0", 0, 6); }, seconds(5)));  // 2 CPUs are the group's

  // The restored reservations are honoured: the remaining GPUs are taken
  // without double booking, and a removal frees exactly what it held.
  const std::string rest =
      CreateOk({GpuBundle(2, "A10G"), GpuBundle(2, "A10G")}, v1::PLACEMENT_STRATEGY_SPREAD);
  v1::PlacementGroupInfo rest_info = WaitReady(rest);
  ASSERT_EQ(rest_info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  std::set<std::pair<std::string, uint32_t>> held;
  for (const auto& [key, where] : before) {
    for (uint32_t gpu : where.second) held.insert({where.first, gpu});
  }
  for (const v1::BundleLocation& l : rest_info.locations()) {
    for (const v1::GpuShare& g : l.gpus()) {
      EXPECT_FALSE(held.count({l.node_id(), g.index()}))
          << l.node_id() << " GPU " << g.index() << " twice";
    }
  }
  Remove(rest);
  Remove(spread);
  Remove(packed);
  Remove(waiting);
  EXPECT_TRUE(WaitUntil([&] { return AllRayletsIdle(); }, seconds(10)));
}
TEST_F(ControlPlaneTest, OversizedRequestsAreRefusedAndTheHeadCarriesOn) {
  v1::CreatePlacementGroupRequest request;
  request.set_request_id("huge");
  request.set_name(std::string(5 << 20, 'x'));  // over the default 4 MiB
  (*request.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  v1::CreatePlacementGroupResponse response;
  grpc::Status s = cluster_->groups().CreatePlacementGroup(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  v1::ListPlacementGroupsResponse listed;
  ASSERT_TRUE(cluster_->groups().ListPlacementGroups(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.placement_groups_size(), 0);
  EXPECT_EQ(WaitReady(CreateOk({GpuBundle(1)}, v1::PLACEMENT_STRATEGY_PACK)).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
}

}  // namespace
}  // namespace berth::testing
