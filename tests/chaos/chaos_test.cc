// Chaos: real head and raylets under a churn of placement group creates and
// removes and of train jobs (two long ones, and short ones submitted all
// along), while raylets and the head are killed with SIGKILL and restarted
// and the head is paused (SIGSTOP) past the liveness timeout. Throughout, a
// head pause declares no node DEAD; afterwards the invariants must hold:
//   - no live group lost (every group created and not removed is known,
//     and settles back to CREATED once capacity returns);
//   - no GPU instance held twice;
//   - every node's availability = its total minus the bundles it holds, and
//     the GPU shares its raylet's /metrics report match the head's;
//   - no process of a job runs without the bundle the head holds for it
//     (found in the OS process table, by the env the raylet gave it);
//   - every job ends with the right reason: the short ones SUCCEEDED (they
//     may restart without limit), the long ones STOPPED once stopped; no
//     group is held for a job that ended, and no job process is left.
//   - once everything is removed, every raylet holds nothing (no bundle
//     reserved that the head does not know).
// BERTH_CHAOS_SEED and BERTH_CHAOS_ITERATIONS (`make chaos SEED= ITERATIONS=`)
// set the run; CI runs the defaults. Prints the counts; the test fails on
// any violation.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kNodes = 4;
constexpr int kGpusPerNode = 4;
constexpr int kCpusPerNode = 16;
constexpr int kDefaultOperations = 1200;
constexpr unsigned kDefaultSeed = 20261129;
// A short job every this many operations.
constexpr int kShortJobEvery = 150;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoll(value) : fallback;
}

// The environment of a live process, from /proc.
std::map<std::string, std::string> ProcessEnv(pid_t pid) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string variable;
  while (std::getline(in, variable, '\0')) {
    const size_t eq = variable.find('=');
    if (eq != std::string::npos) env[variable.substr(0, eq)] = variable.substr(eq + 1);
  }
  return env;
}

std::string NodeId(int i) { return "chaos-" + std::to_string(i); }

class ChaosTest : public ::testing::Test {
 protected:
  // Retries through a head restart: every mutating call is idempotent by
  // its request id.
  template <typename Call>
  bool Retry(Call call) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      grpc::Status s = call();
      if (s.ok()) return true;
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
          s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        std::fprintf(stderr, "chaos: call failed: %s\n", s.error_message().c_str());
        return false;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  // Creates a random group; `gpu_indices` gets how many GPUs it can take
  // at most (each bundle's GPUs rounded up: a fraction takes a GPU of its
  // own when it shares with nobody).
  std::string Create(std::mt19937& rng, int n, int* gpu_indices) {
    v1::CreatePlacementGroupRequest request;
    request.set_request_id("chaos-create-" + std::to_string(n));
    const v1::PlacementStrategy strategies[] = {
        v1::PLACEMENT_STRATEGY_PACK, v1::PLACEMENT_STRATEGY_SPREAD,
        v1::PLACEMENT_STRATEGY_STRICT_PACK, v1::PLACEMENT_STRATEGY_STRICT_SPREAD};
    request.set_strategy(strategies[rng() % 4]);
    const double gpus[] = {0, 0.5, 1, 2};
    const int bundles = 1 + static_cast<int>(rng() % 3);
    *gpu_indices = 0;
    for (int b = 0; b < bundles; ++b) {
      auto* amounts = request.add_bundles()->mutable_resources()->mutable_amounts();
      (*amounts)["CPU"] = 1;
      const double g = gpus[rng() % 4];
      if (g > 0) (*amounts)["GPU"] = g;
      *gpu_indices += static_cast<int>(std::ceil(g));
    }
    v1::CreatePlacementGroupResponse response;
    if (!Retry([&] {
          return cluster_.groups().CreatePlacementGroup(Context(milliseconds(2000)).get(), request,
                                                        &response);
        })) {
      return "";
    }
    return response.placement_group_id();
  }

  bool Remove(const std::string& id) {
    v1::RemovePlacementGroupRequest request;
    request.set_placement_group_id(id);
    request.set_request_id("chaos-remove-" + id);
    v1::RemovePlacementGroupResponse response;
    return Retry([&] {
      return cluster_.groups().RemovePlacementGroup(Context(milliseconds(2000)).get(), request,
                                                    &response);
    });
  }

  v1::ListPlacementGroupsResponse Groups() {
    v1::ListPlacementGroupsResponse response;
    Retry([&] {
      response.Clear();
      return cluster_.groups().ListPlacementGroups(Context().get(), {}, &response);
    });
    return response;
  }

  // Raylet's own view: can it prepare (then cancel) a bundle of its whole
  // capacity? Only if it holds nothing.
  bool RayletHoldsNothing(int node) {
    v1::PrepareBundleResourcesRequest prepare;
    prepare.set_placement_group_id("chaos-probe");
    prepare.set_request_id("probe-" + std::to_string(probes_++));
    v1::BundleReservation* b = prepare.add_bundles();
    (*b->mutable_resources()->mutable_amounts())["CPU"] = kCpusPerNode;
    (*b->mutable_resources()->mutable_amounts())["GPU"] = kGpusPerNode;
    for (int i = 0; i < kGpusPerNode; ++i) {
      v1::GpuShare* g = b->add_gpus();
      g->set_index(i);
      g->set_units(10000);
    }
    v1::PrepareBundleResourcesResponse prepared;
    if (!cluster_.raylet(NodeId(node))
             .PrepareBundleResources(Context().get(), prepare, &prepared)
             .ok())
      return false;
    v1::CancelResourceReserveRequest cancel;
    cancel.set_placement_group_id("chaos-probe");
    cancel.set_request_id(prepare.request_id() + "-cancel");
    cancel.add_bundle_indices(0);
    v1::CancelResourceReserveResponse cancelled;
    cluster_.raylet(NodeId(node)).CancelResourceReserve(Context().get(), cancel, &cancelled);
    return prepared.prepared();
  }

  // Checks the head's books against themselves; returns the violations,
  // printing them when `report` (not while waiting for things to settle).
  int CheckBooks(const std::set<std::string>& live, bool expect_all_created, bool report = true) {
    int violations = 0;
    const v1::ListPlacementGroupsResponse groups = Groups();
    std::map<std::string, const v1::PlacementGroupInfo*> by_id;
    for (const auto& g : groups.placement_groups()) by_id[g.placement_group_id()] = &g;
    std::map<std::pair<std::string, uint32_t>, double> gpu_share;  // (node, gpu) -> held
    std::map<std::string, std::map<std::string, double>> held;     // node -> resource -> amount
    std::map<std::string, std::string> holders;                    // node -> "group (state), ..."
    for (const std::string& id : live) {
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        if (report) std::fprintf(stderr, "chaos: VIOLATION: live group %s is gone\n", id.c_str());
        ++violations;
        continue;
      }
      const v1::PlacementGroupInfo& g = *it->second;
      if (expect_all_created && g.state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
        if (report)
          std::fprintf(stderr, "chaos: VIOLATION: group %s is %s: %s\n", id.c_str(),
                       v1::PlacementGroupState_Name(g.state()).c_str(), g.pending_reason().c_str());
        ++violations;
      }
    }
    for (const auto& g : groups.placement_groups()) {
      for (const v1::BundleLocation& l : g.locations()) {
        for (const auto& [name, amount] : g.bundles(l.bundle_index()).resources().amounts()) {
          held[l.node_id()][name] += amount;
        }
        for (const v1::GpuShare& s : l.gpus())
          gpu_share[{l.node_id(), s.index()}] += s.units() / 10000.0;
        holders[l.node_id()] +=
            g.placement_group_id() + " (" + v1::PlacementGroupState_Name(g.state()) + ") ";
      }
    }
    for (const auto& [gpu, share] : gpu_share) {
      if (share > 1.0 + 1e-9) {
        if (report)
          std::fprintf(stderr, "chaos: VIOLATION: GPU %u of %s held %.2f times\n", gpu.second,
                       gpu.first.c_str(), share);
        ++violations;
      }
    }
    v1::ListNodesResponse nodes;
    Retry([&] {
      nodes.Clear();
      return cluster_.nodes().ListNodes(Context().get(), {}, &nodes);
    });
    for (const v1::NodeInfo& n : nodes.nodes()) {
      if (n.state() != v1::NODE_STATE_ALIVE) continue;
      // What the raylet tells Prometheus about each GPU it has.
      const std::vector<Series> metrics = ParseMetrics(HttpGet(n.metrics_address(), "/metrics"));
      for (int gpu = 0; gpu < kGpusPerNode; ++gpu) {
        const double reported =
            SumSeries(metrics, "berth_gpu_instance_allocated",
                      {{"node", n.node_id()}, {"gpu_index", std::to_string(gpu)}});
        const double head = gpu_share[{n.node_id(), static_cast<uint32_t>(gpu)}];
        if (std::abs(reported - head) > 1e-6) {
          if (report)
            std::fprintf(
                stderr,
                "chaos: VIOLATION: %s's /metrics has GPU %d %.2f allocated, the head %.2f\n",
                n.node_id().c_str(), gpu, reported, head);
          ++violations;
        }
      }
      for (const char* r : {"CPU", "GPU"}) {
        auto total = n.total().amounts().find(r);
        auto available = n.available().amounts().find(r);
        const double used = (total == n.total().amounts().end() ? 0 : total->second) -
                            (available == n.available().amounts().end() ? 0 : available->second);
        if (std::abs(used - held[n.node_id()][r]) > 1e-6) {
          if (report)
            std::fprintf(
                stderr, "chaos: VIOLATION: %s uses %.4f %s but its bundles hold %.4f: %s\n",
                n.node_id().c_str(), used, r, held[n.node_id()][r], holders[n.node_id()].c_str());
          ++violations;
        }
      }
    }
    return violations;
  }

  // Processes of the cluster's jobs that run without the bundle the head
  // holds for them: their group is not CREATED, or its bundle is elsewhere.
  // `checked` counts the processes looked at.
  int CheckProcesses(bool report, int* checked) {
    int violations = 0;
    const v1::ListPlacementGroupsResponse groups = Groups();
    std::map<std::string, const v1::PlacementGroupInfo*> by_id;
    for (const auto& g : groups.placement_groups()) by_id[g.placement_group_id()] = &g;
    for (pid_t pid : ProcessesWithEnv("TORCHELASTIC_ERROR_FILE", cluster_.dir())) {
      std::map<std::string, std::string> env = ProcessEnv(pid);
      if (env.empty()) continue;  // gone meanwhile
      ++*checked;
      const std::string& group = env["BERTH_PLACEMENT_GROUP_ID"];
      const std::string& node = env["BERTH_NODE_ID"];
      const uint32_t bundle = static_cast<uint32_t>(std::atol(env["BERTH_BUNDLE_INDEX"].c_str()));
      auto it = by_id.find(group);
      bool held = false;
      if (it != by_id.end() && it->second->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
        for (const v1::BundleLocation& l : it->second->locations()) {
          held = held || (l.bundle_index() == bundle && l.node_id() == node);
        }
      }
      if (!held) {
        if (report)
          std::fprintf(stderr,
                       "chaos: VIOLATION: pid %d of job %s runs on %s without bundle %u of %s\n",
                       pid, env["BERTH_JOB_ID"].c_str(), node.c_str(), bundle, group.c_str());
        ++violations;
      }
    }
    return violations;
  }

  std::string SubmitJob(const std::string& request_id, const std::string& command) {
    v1::SubmitTrainJobRequest submit;
    submit.set_request_id(request_id);
    submit.mutable_spec()->mutable_scaling_config()->set_num_workers(2);
    submit.mutable_spec()->mutable_scaling_config()->set_use_gpu(true);
    submit.mutable_spec()->mutable_failure_config()->set_max_failures(-1);
    for (const char* a : {"/bin/sh", "-c"})
      submit.mutable_spec()->mutable_entrypoint()->mutable_command()->add_argv(a);
    submit.mutable_spec()->mutable_entrypoint()->mutable_command()->add_argv(command);
    v1::SubmitTrainJobResponse submitted;
    if (!Retry([&] { return cluster_.jobs().SubmitTrainJob(Context().get(), submit, &submitted); }))
      return "";
    return submitted.job_id();
  }

  v1::TrainJobInfo Job(const std::string& id) {
    v1::GetTrainJobRequest get;
    get.set_job_id(id);
    v1::GetTrainJobResponse info;
    Retry([&] { return cluster_.jobs().GetTrainJob(Context().get(), get, &info); });
    return info.job();
  }

  // Once every node is ALIVE, stops the head (SIGSTOP) for one and a half
  // liveness timeouts (BERTH_CHAOS_HEAD_PAUSE_MS sets another length), then
  // watches for two more: a node declared DEAD then was blamed for the
  // head's absence. Returns the violations.
  int PauseHead() {
    auto all_alive = [&] {
      v1::ListNodesResponse nodes;
      if (!cluster_.nodes().ListNodes(Context().get(), {}, &nodes).ok()) return false;
      int alive = 0;
      for (const v1::NodeInfo& n : nodes.nodes()) alive += n.state() == v1::NODE_STATE_ALIVE;
      return alive == kNodes;
    };
    if (!WaitUntil(all_alive, seconds(30))) return 0;  // the books check catches a node for good
    const milliseconds pause(
        EnvOr("BERTH_CHAOS_HEAD_PAUSE_MS", (cluster_.liveness_timeout() * 3 / 2).count()));
    kill(cluster_.head_pid(), SIGSTOP);
    std::this_thread::sleep_for(pause);
    kill(cluster_.head_pid(), SIGCONT);
    const auto until = std::chrono::steady_clock::now() + 2 * cluster_.liveness_timeout();
    while (std::chrono::steady_clock::now() < until) {
      v1::ListNodesResponse nodes;
      if (cluster_.nodes().ListNodes(Context().get(), {}, &nodes).ok()) {
        for (const v1::NodeInfo& n : nodes.nodes()) {
          if (n.state() == v1::NODE_STATE_ALIVE) continue;
          std::fprintf(stderr, "chaos: VIOLATION: node %s is %s after a head pause\n",
                       n.node_id().c_str(), v1::NodeState_Name(n.state()).c_str());
          return 1;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return 0;
  }

  // Live groups by the operation that created them (ids are random:
  // ordered by id, the same seed would churn differently): id and the GPUs
  // it can take.
  using LiveGroups = std::map<int, std::pair<std::string, int>>;

  // Removes all but at most 4 groups of at most 2 GPUs each, the oldest
  // first; returns how many it removed. With the long jobs' 4 GPUs, when
  // the last of them is placed at most 10 of the 16 GPUs are taken, so some
  // node has 2 free and two nodes have 1: any such group fits, whatever
  // its strategy.
  int ShrinkToWhatSurelyFits(LiveGroups* live) {
    int kept = 0, removed = 0;
    for (auto it = live->begin(); it != live->end();) {
      if (it->second.second <= 2 && kept < 4) {
        ++kept;
        ++it;
        continue;
      }
      EXPECT_TRUE(Remove(it->second.first));
      it = live->erase(it);
      ++removed;
    }
    return removed;
  }

  bool AllEnded(const std::vector<std::string>& jobs) {
    for (const std::string& job : jobs) {
      const v1::TrainJobState s = Job(job).state();
      if (s != v1::TRAIN_JOB_STATE_SUCCEEDED && s != v1::TRAIN_JOB_STATE_FAILED &&
          s != v1::TRAIN_JOB_STATE_STOPPED) {
        return false;
      }
    }
    return true;
  }

  LocalCluster cluster_{100};
  int probes_ = 0;
};

TEST_F(ChaosTest, ChurnWithKilledRayletsAndHeadsKeepsTheBooksExact) {
  for (int i = 0; i < kNodes; ++i) {
    cluster_.AddRaylet({NodeId(i), kGpusPerNode, "A10G", kCpusPerNode, "64Gi"});
  }
  const unsigned seed = static_cast<unsigned>(EnvOr("BERTH_CHAOS_SEED", kDefaultSeed));
  const int operations = static_cast<int>(EnvOr("BERTH_CHAOS_ITERATIONS", kDefaultOperations));
  std::mt19937 rng(seed);
  // Two long train jobs (a command that sleeps), one GPU per rank; stopped
  // at the end.
  std::vector<std::string> long_jobs, short_jobs;
  for (int j = 0; j < 2; ++j) {
    long_jobs.push_back(SubmitJob("chaos-job-" + std::to_string(j), "sleep 300"));
    ASSERT_FALSE(long_jobs.back().empty());
  }

  LiveGroups live;
  auto live_ids = [&] {
    std::set<std::string> ids;
    for (const auto& [op, group] : live) ids.insert(group.first);
    return ids;
  };
  int created = 0, removed = 0, head_kills = 0, raylet_kills = 0, head_pauses = 0;
  int violations = 0;
  for (int op = 0; op < operations; ++op) {
    if (op % kShortJobEvery == 50) {
      short_jobs.push_back(SubmitJob("chaos-short-" + std::to_string(op), "sleep 2"));
      ASSERT_FALSE(short_jobs.back().empty());
    }
    if (op % 200 == 100) {
      cluster_.RestartHead(SIGKILL);
      ++head_kills;
    } else if (op % 200 == 150) {
      violations += PauseHead();
      ++head_pauses;
    } else if (op % 200 == 0 && op > 0) {
      const int node = static_cast<int>(rng() % kNodes);
      cluster_.KillRaylet(NodeId(node), SIGKILL);
      cluster_.RestartRaylet(NodeId(node));
      ++raylet_kills;
    }
    if (live.size() < 24 && rng() % 2 == 0) {
      int gpu_indices = 0;
      const std::string id = Create(rng, op, &gpu_indices);
      ASSERT_FALSE(id.empty()) << "create " << op;
      live[op] = {id, gpu_indices};
      ++created;
    } else if (!live.empty()) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(Remove(it->second.first)) << "remove " << it->second.first;
      live.erase(it);
      ++removed;
    }
  }
  // The short jobs end first (a 2-second command each), so they take no
  // GPU; then everything live must settle CREATED with exact books.
  removed += ShrinkToWhatSurelyFits(&live);
  WaitUntil([&] { return AllEnded(short_jobs); }, seconds(120));
  bool settled = WaitUntil([&] { return CheckBooks(live_ids(), true, false) == 0; }, seconds(30));
  violations += CheckBooks(live_ids(), true);
  int processes_checked = 0;
  int ignored = 0;
  WaitUntil([&] { return CheckProcesses(false, &ignored) == 0; }, seconds(30));
  violations += CheckProcesses(true, &processes_checked);
  // Every short job ends SUCCEEDED (restarts are unlimited), every long job
  // STOPPED once stopped.
  for (const std::string& job : long_jobs) {
    v1::StopTrainJobRequest stop;
    stop.set_job_id(job);
    stop.set_request_id("chaos-stop-" + job);
    v1::StopTrainJobResponse stopped;
    ASSERT_TRUE(
        Retry([&] { return cluster_.jobs().StopTrainJob(Context().get(), stop, &stopped); }));
  }
  std::vector<std::string> all_jobs = long_jobs;
  all_jobs.insert(all_jobs.end(), short_jobs.begin(), short_jobs.end());
  WaitUntil([&] { return AllEnded(all_jobs); }, seconds(120));
  int succeeded = 0, stopped_jobs = 0, restarts = 0;
  std::set<std::string> job_groups;
  for (const std::string& job : all_jobs) {
    const v1::TrainJobInfo info = Job(job);
    const bool is_long = std::count(long_jobs.begin(), long_jobs.end(), job) > 0;
    const v1::TrainJobState want =
        is_long ? v1::TRAIN_JOB_STATE_STOPPED : v1::TRAIN_JOB_STATE_SUCCEEDED;
    restarts += info.failure_causes_size();
    job_groups.insert(info.placement_group_id());
    if (info.state() == want) {
      (is_long ? stopped_jobs : succeeded) += 1;
      continue;
    }
    std::fprintf(stderr, "chaos: VIOLATION: job %s is %s (want %s): %s\n", job.c_str(),
                 v1::TrainJobState_Name(info.state()).c_str(), v1::TrainJobState_Name(want).c_str(),
                 info.message().c_str());
    ++violations;
  }
  // An ended job holds no group, and nothing of it runs.
  const v1::ListPlacementGroupsResponse groups_after = Groups();
  for (const auto& g : groups_after.placement_groups()) {
    if (job_groups.count(g.placement_group_id()) > 0 &&
        g.state() != v1::PLACEMENT_GROUP_STATE_REMOVED) {
      std::fprintf(stderr, "chaos: VIOLATION: group %s of an ended job is %s\n",
                   g.placement_group_id().c_str(), v1::PlacementGroupState_Name(g.state()).c_str());
      ++violations;
    }
  }
  std::vector<pid_t> left;
  WaitUntil(
      [&] { return (left = ProcessesWithEnv("TORCHELASTIC_ERROR_FILE", cluster_.dir())).empty(); },
      seconds(10));
  for (pid_t pid : left) {
    std::fprintf(stderr, "chaos: VIOLATION: pid %d of job %s outlived its job\n", pid,
                 ProcessEnv(pid)["BERTH_JOB_ID"].c_str());
    ++violations;
  }
  for (const auto& [op, group] : live) ASSERT_TRUE(Remove(group.first));
  removed += static_cast<int>(live.size());
  live.clear();
  // Nothing held anywhere, as the raylets themselves see it.
  bool idle = WaitUntil(
      [&] {
        for (int i = 0; i < kNodes; ++i) {
          if (!RayletHoldsNothing(i)) return false;
        }
        return true;
      },
      seconds(30));
  if (!idle) {
    std::fprintf(stderr,
                 "chaos: VIOLATION: a raylet still holds bundles after everything was removed\n");
    ++violations;
  }
  violations += CheckBooks({}, false);
  std::printf(
      "chaos: seed %u, %d operations, %d groups created, %d removed, %d head kills, %d head "
      "pauses, %d raylet kills, "
      "%zu train jobs (%d succeeded, %d stopped, %d restarts), %d job processes checked, "
      "settled=%s, "
      "violations=%d\n",
      seed, operations, created, removed, head_kills, head_pauses, raylet_kills, all_jobs.size(),
      succeeded, stopped_jobs, restarts, processes_checked, settled ? "yes" : "no", violations);
  EXPECT_EQ(violations, 0);
}

}  // namespace
}  // namespace berth::testing
