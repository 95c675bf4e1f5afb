// Network faults: a raylet in a network namespace of its own, joined to the
// head by a veth pair, is cut off (link down). The head must declare it
// dead and reschedule its bundles; when the link returns, the stale raylet
// must be told to release what it no longer owns (its worker is stopped),
// with no GPU booked twice. Skipped, with a message, where namespaces
// cannot be created (no CAP_NET_ADMIN).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/etcd_cluster.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using std::chrono::seconds;

int Sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// A namespace and a veth pair: host side `host_ip`, namespace side `ns_ip`.
class Netns {
 public:
  Netns() {
    const int id = getpid() % 200 + 20;
    name_ = "berth-nf-" + std::to_string(getpid());
    host_if_ = "bnf" + std::to_string(getpid()) + "h";
    ns_if_ = "bnf" + std::to_string(getpid()) + "n";
    host_ip = "10.213." + std::to_string(id) + ".1";
    ns_ip = "10.213." + std::to_string(id) + ".2";
    ok_ = Sh("ip netns add " + name_) == 0 &&
          Sh("ip link add " + host_if_ + " type veth peer name " + ns_if_) == 0 &&
          Sh("ip link set " + ns_if_ + " netns " + name_) == 0 &&
          Sh("ip addr add " + host_ip + "/30 dev " + host_if_) == 0 &&
          Sh("ip link set " + host_if_ + " up") == 0 &&
          Sh("ip netns exec " + name_ + " ip addr add " + ns_ip + "/30 dev " + ns_if_) == 0 &&
          Sh("ip netns exec " + name_ + " ip link set " + ns_if_ + " up") == 0 &&
          Sh("ip netns exec " + name_ + " ip link set lo up") == 0;
  }
  ~Netns() {
    Sh("ip link del " + host_if_);
    Sh("ip netns del " + name_);
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  void SetLink(bool up) { Sh("ip link set " + host_if_ + (up ? " up" : " down")); }

  std::string host_ip, ns_ip;

 private:
  std::string name_, host_if_, ns_if_;
  bool ok_ = false;
};

v1::PlacementGroupInfo Group(LocalCluster& cluster, const std::string& id) {
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  v1::GetPlacementGroupResponse response;
  cluster.groups().GetPlacementGroup(Context().get(), get, &response);
  return response.placement_group();
}

v1::NodeState StateOf(LocalCluster& cluster, const std::string& node_id) {
  v1::ListNodesResponse nodes;
  cluster.nodes().ListNodes(Context().get(), {}, &nodes);
  for (const auto& n : nodes.nodes()) {
    if (n.node_id() == node_id) return n.state();
  }
  return v1::NODE_STATE_UNSPECIFIED;
}

// A cluster whose head listens on the host side of the veth pair, with the
// raylet "inside" (2 GPUs) in the namespace.
std::unique_ptr<LocalCluster> ClusterWithANodeInside(const Netns& netns) {
  auto cluster = std::make_unique<LocalCluster>(100, std::vector<std::string>{}, netns.host_ip);
  RayletOptions inside{"inside", 2, "A10G", 8, "32Gi"};
  inside.host = netns.ns_ip;
  inside.netns = netns.name();
  cluster->AddRaylet(inside);
  return cluster;
}

std::string CreateGpuGroup(LocalCluster& cluster, const std::string& request_id) {
  v1::CreatePlacementGroupRequest request;
  request.set_request_id(request_id);
  (*request.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 2;
  v1::CreatePlacementGroupResponse response;
  EXPECT_TRUE(cluster.groups().CreatePlacementGroup(Context().get(), request, &response).ok());
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Group(cluster, response.placement_group_id()).state() ==
               v1::PLACEMENT_GROUP_STATE_CREATED;
      },
      seconds(10)));
  return response.placement_group_id();
}

TEST(NetworkFaultTest, ACutOffRayletIsReplacedAndReleasesWhatItNoLongerOwns) {
  Netns netns;
  if (!netns.ok())
    GTEST_SKIP() << "cannot create a network namespace and veth pair here (needs CAP_NET_ADMIN)";
  const std::unique_ptr<LocalCluster> owned = ClusterWithANodeInside(netns);
  LocalCluster& cluster = *owned;
  const std::string moved = CreateGpuGroup(cluster, "moved");  // on `inside`, the only node
  ASSERT_EQ(Group(cluster, moved).locations_size(), 1);
  ASSERT_EQ(Group(cluster, moved).locations(0).node_id(), "inside");
  RayletOptions outside{"outside", 4, "A10G", 8, "32Gi"};
  outside.host = netns.host_ip;
  cluster.AddRaylet(outside);
  const std::string stays = CreateGpuGroup(cluster, "stays");
  ASSERT_EQ(Group(cluster, stays).locations_size(), 1);
  ASSERT_EQ(Group(cluster, stays).locations(0).node_id(), "outside");

  v1::StartWorkerRequest start;
  start.set_request_id("start-stale");
  start.mutable_spec()->set_worker_id("stale");
  start.mutable_spec()->set_placement_group_id(moved);
  start.mutable_spec()->set_bundle_index(0);
  for (const char* a : {"/bin/sh", "-c", "sleep 120"}) start.mutable_spec()->add_argv(a);
  v1::StartWorkerResponse started;
  ASSERT_TRUE(cluster.raylet("inside").StartWorker(Context().get(), start, &started).ok());

  netns.SetLink(false);
  ASSERT_TRUE(
      WaitUntil([&] { return StateOf(cluster, "inside") == v1::NODE_STATE_DEAD; }, seconds(10)));
  // Rescheduled onto the outside node's two free GPUs, not onto `stays`'s.
  ASSERT_TRUE(
      WaitUntil([&] { return Group(cluster, moved).state() == v1::PLACEMENT_GROUP_STATE_CREATED; },
                seconds(10)));
  const v1::PlacementGroupInfo after = Group(cluster, moved);
  ASSERT_EQ(after.locations_size(), 1);
  ASSERT_EQ(after.locations(0).node_id(), "outside");
  std::set<uint32_t> gpus;
  for (const std::string& id : {moved, stays}) {
    const v1::PlacementGroupInfo group = Group(cluster, id);
    ASSERT_EQ(group.locations_size(), 1);
    for (const v1::GpuShare& g : group.locations(0).gpus()) {
      EXPECT_TRUE(gpus.insert(g.index()).second)
          << "GPU " << g.index() << " of outside booked twice";
    }
  }
  EXPECT_EQ(gpus.size(), 4u);

  // The link returns: the stale raylet registers again and drops the bundle
  // the head gave away, stopping its worker.
  netns.SetLink(true);
  ASSERT_TRUE(
      WaitUntil([&] { return StateOf(cluster, "inside") == v1::NODE_STATE_ALIVE; }, seconds(15)));
  v1::ListWorkersResponse workers;
  EXPECT_TRUE(WaitUntil(
      [&] {
        workers.Clear();
        return cluster.raylet("inside").ListWorkers(Context().get(), {}, &workers).ok() &&
               workers.workers_size() == 1 &&
               workers.workers(0).state() != v1::WORKER_STATE_RUNNING;
      },
      seconds(10)));
  // It holds nothing: a bundle of its whole capacity can be prepared.
  v1::PrepareBundleResourcesRequest probe;
  probe.set_placement_group_id("probe");
  probe.set_request_id("probe-1");
  v1::BundleReservation* b = probe.add_bundles();
  (*b->mutable_resources()->mutable_amounts())["GPU"] = 2;
  for (int i = 0; i < 2; ++i) {
    v1::GpuShare* g = b->add_gpus();
    g->set_index(i);
    g->set_units(10000);
  }
  v1::PrepareBundleResourcesResponse prepared;
  ASSERT_TRUE(
      cluster.raylet("inside").PrepareBundleResources(Context().get(), probe, &prepared).ok());
  EXPECT_TRUE(prepared.prepared());
  const v1::PlacementGroupInfo final_group = Group(cluster, moved);
  ASSERT_EQ(final_group.locations_size(), 1);
  EXPECT_EQ(final_group.locations(0).node_id(), "outside");
}

#ifdef BERTH_WORKER_BIN
// A job of `workers` GPU ranks, each running `shell`; its id.
std::string SubmitShellJob(LocalCluster& cluster, const std::string& request_id, int workers,
                           int max_failures, const std::string& shell) {
  v1::SubmitTrainJobRequest submit;
  submit.set_request_id(request_id);
  submit.mutable_spec()->mutable_scaling_config()->set_num_workers(workers);
  submit.mutable_spec()->mutable_scaling_config()->set_use_gpu(true);
  submit.mutable_spec()->mutable_failure_config()->set_max_failures(max_failures);
  for (const std::string& a : {std::string("/bin/sh"), std::string("-c"), shell}) {
    submit.mutable_spec()->mutable_entrypoint()->mutable_command()->add_argv(a);
  }
  v1::SubmitTrainJobResponse submitted;
  EXPECT_TRUE(cluster.jobs().SubmitTrainJob(Context().get(), submit, &submitted).ok());
  return submitted.job_id();
}

v1::TrainJobInfo Job(LocalCluster& cluster, const std::string& id) {
  v1::GetTrainJobRequest get;
  get.set_job_id(id);
  v1::GetTrainJobResponse response;
  cluster.jobs().GetTrainJob(Context().get(), get, &response);
  return response.job();
}

// The job once SUCCEEDED or FAILED (as it is when `timeout` passes first).
v1::TrainJobInfo WaitEnded(LocalCluster& cluster, const std::string& id, seconds timeout) {
  v1::TrainJobInfo done;
  WaitUntil(
      [&] {
        done = Job(cluster, id);
        return done.state() == v1::TRAIN_JOB_STATE_SUCCEEDED ||
               done.state() == v1::TRAIN_JOB_STATE_FAILED;
      },
      timeout);
  return done;
}

// A job whose ranks are on a node that is cut off: the attempt ends for the
// node's death and the job finishes elsewhere; the ranks left running on the
// cut-off node (its raylet cannot be told) are stopped once it is back.
TEST(NetworkFaultTest, ACutOffNodesRanksRestartElsewhereAndAreStoppedWhenItReturns) {
  Netns netns;
  if (!netns.ok())
    GTEST_SKIP() << "cannot create a network namespace and veth pair here (needs CAP_NET_ADMIN)";
  const std::unique_ptr<LocalCluster> owned = ClusterWithANodeInside(netns);
  LocalCluster& cluster = *owned;
  const std::string id = SubmitShellJob(cluster, "cut-off-job", 2, 1,
                                        "if [ \"$BERTH_ATTEMPT\" = 0 ]; then sleep 120; fi");
  auto job = [&] { return Job(cluster, id); };
  auto processes_inside = [&] {
    return ProcessesWithEnv("TORCHELASTIC_ERROR_FILE", cluster.log_dir("inside") + "/" + id + "-");
  };
  ASSERT_TRUE(WaitUntil([&] { return job().state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return processes_inside().size() >= 2; }, seconds(5)));
  RayletOptions outside{"outside", 4, "A10G", 8, "32Gi"};
  outside.host = netns.host_ip;
  cluster.AddRaylet(outside);

  netns.SetLink(false);
  const v1::TrainJobInfo done = WaitEnded(cluster, id, seconds(30));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  ASSERT_GE(done.failure_causes_size(), 1);
  EXPECT_THAT(done.failure_causes(0), ::testing::HasSubstr("node inside died (missed heartbeats)"));
  for (const v1::WorkerRank& w : done.workers()) EXPECT_EQ(w.node_id(), "outside");
  // Cut off, the node's raylet cannot be told: its ranks still run.
  EXPECT_FALSE(processes_inside().empty());

  netns.SetLink(true);
  EXPECT_TRUE(WaitUntil([&] { return processes_inside().empty(); }, seconds(20)))
      << processes_inside().size()
      << " stale processes of the job still run on the node that came back";
}

// The active head cut off from everything (etcd, the raylets, the standby,
// the clients): its lease lapses, the standby takes over, and the job goes
// on; when the link is back, the old head finds its lease gone and stands
// by. Heads on a 3-member etcd on the host side of the veth pair; the active
// head alone in the namespace.
TEST(NetworkFaultTest, AnActiveHeadCutOffFromEverythingIsReplacedAndStandsByWhenBack) {
  Netns netns;
  if (!netns.ok())
    GTEST_SKIP() << "cannot create a network namespace and veth pair here (needs CAP_NET_ADMIN)";
  char dir[] = "/tmp/berth-nf-etcd-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto etcd = std::make_unique<EtcdCluster>(dir, netns.host_ip);
  auto cluster =
      std::make_unique<LocalCluster>(100, std::vector<std::string>{"--state-store", etcd->url()},
                                     netns.ns_ip, false, false, netns.name());
  cluster->AddStandbyHead(netns.host_ip);
  for (const char* node : {"n0", "n1"}) {
    RayletOptions options{node, 2, "A10G", 8, "32Gi"};
    options.host = netns.host_ip;
    cluster->AddRaylet(options);
  }
  const std::string id = SubmitShellJob(*cluster, "partitioned-head-job", 4, 0, "sleep 25");
  auto job = [&] { return Job(*cluster, id); };
  auto active_epoch = [&] {
    v1::GetClusterStatusResponse status;
    grpc::Status s = cluster->cluster().GetClusterStatus(
        Context(std::chrono::milliseconds(500)).get(), {}, &status);
    return s.ok() ? status.head().epoch() : uint64_t{0};
  };
  ASSERT_TRUE(WaitUntil([&] { return job().state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
  ASSERT_EQ(active_epoch(), 1u);

  netns.SetLink(false);
  ASSERT_TRUE(WaitUntil([&] { return active_epoch() == 2; }, seconds(20)))
      << "the standby did not take over";
  EXPECT_EQ(job().state(), v1::TRAIN_JOB_STATE_RUNNING);

  netns.SetLink(true);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ReadFileOrEmpty(cluster->dir() + "/head.log").find("stepping down") !=
               std::string::npos;
      },
      seconds(15)));
  const auto watch_until = std::chrono::steady_clock::now() + seconds(3);
  while (std::chrono::steady_clock::now() < watch_until) {
    const uint64_t epoch = active_epoch();
    if (epoch != 0) EXPECT_EQ(epoch, 2u) << "the head that was cut off must not act";
  }
  const v1::TrainJobInfo done = WaitEnded(*cluster, id, seconds(60));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.attempt(), 0u);
  EXPECT_EQ(done.failures(), 0u);
  cluster.reset();
  etcd.reset();
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace berth::testing
