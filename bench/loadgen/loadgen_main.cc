// berth-loadgen: drives a live berth-head over gRPC with placement group
// workloads and reports throughput and latency percentiles.
//
// Clusters: `--mode real` starts a head and K berth-raylet processes on
// 127.0.0.1; `--mode simulated` starts a head and registers N nodes served
// by one in-process RayletService (real gRPC between head and "raylets");
// `--head HOST:PORT` uses a running cluster instead.
//
// Workloads (each client loops create -> wait CREATED -> remove):
//   one      1 bundle {CPU: 1}
//   pack3    3 bundles {CPU: 1} under PACK (Ray's many_pgs shape)
//   spread8  8 bundles {GPU: 1} under STRICT_SPREAD (a gang over 8 nodes)
//   mixed    one of the three, drawn per group
//
// `--batch B` (B > 1): each client creates B groups in one
// CreatePlacementGroups call, waits for all with WaitPlacementGroupsReady and
// removes them with RemovePlacementGroups; latencies are then per batch.
//
// Scale (`--hold B`, simulated mode): the head's resident memory with the
// nodes registered and again with B one-bundle groups placed and held, per
// node and per bundle, and the core's decision time from the head's
// berth_placement_decision_seconds histogram.
//
// Pending train jobs (`--pending-jobs J`, simulated mode): J train jobs that
// cannot be placed yet (each asks for an accelerator type no node has) wait
// in the head at once; reports the head's threads (its train controller is
// a fixed pool, not a thread per job), resident memory and CPU while they
// wait, and how long stopping them all takes.
//
//   berth-loadgen --mode real --raylets 8 --workloads one,pack3 --concurrency 1,16
//   berth-loadgen --mode simulated --nodes 10000 --state memory --hold 100000
//   berth-loadgen --mode simulated --nodes 100 --state memory --pending-jobs 10000

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "auth/cluster_token.h"
#include "bench/loadgen/pending_jobs.h"
#include "bench/loadgen/proc_stats.h"
#include "bench/loadgen/simulated_raylets.h"
#include "berth/v1/head.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/integration/local_cluster.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string mode = "real";
  std::string head;
  std::string token_file;
  int raylets = 8;
  int nodes = 1000;
  int gpus_per_node = 8;
  std::string workloads = "one,pack3,spread8,mixed";
  std::string concurrency = "1,16";
  std::string batch = "1";
  std::string state = "sqlite";
  double duration_s = 5;
  std::string json;
  int hold = 0;
  int pending_jobs = 0;
};

enum class Workload { kOne, kPack3, kSpread8, kMixed };

absl::StatusOr<Workload> ParseWorkload(const std::string& name) {
  if (name == "one") return Workload::kOne;
  if (name == "pack3") return Workload::kPack3;
  if (name == "spread8") return Workload::kSpread8;
  if (name == "mixed") return Workload::kMixed;
  return absl::InvalidArgumentError(absl::StrCat("--workloads: unknown workload '", name, "'"));
}

v1::CreatePlacementGroupRequest MakeGroup(Workload w, std::mt19937& rng) {
  if (w == Workload::kMixed) w = static_cast<Workload>(rng() % 3);
  v1::CreatePlacementGroupRequest request;
  const int bundles = w == Workload::kOne ? 1 : w == Workload::kPack3 ? 3 : 8;
  request.set_strategy(w == Workload::kSpread8 ? v1::PLACEMENT_STRATEGY_STRICT_SPREAD
                                               : v1::PLACEMENT_STRATEGY_PACK);
  for (int b = 0; b < bundles; ++b) {
    (*request.add_bundles()
          ->mutable_resources()
          ->mutable_amounts())[w == Workload::kSpread8 ? "GPU" : "CPU"] = 1;
  }
  return request;
}

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i =
      std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[i];
}

struct Result {
  std::string workload;
  int concurrency = 0;
  int batch = 1;
  uint64_t groups = 0;
  uint64_t failures = 0;
  double seconds = 0;
  std::vector<double> created_ms;  // create call start -> CREATED seen (per batch)
  std::vector<double> cycle_ms;    // create -> CREATED -> removed (per batch)
};

// Counts a failure; prints the first few, so a run that fails says why.
void Failed(uint64_t* failures, const std::string& why) {
  static std::atomic<int> printed{0};
  ++*failures;
  if (printed++ < 5) std::fprintf(stderr, "berth-loadgen: failed: %s\n", why.c_str());
}

// One client: loops until `end`, recording its latencies.
void Client(const std::string& head, const std::string& token, Workload w, int batch, int id,
            const std::string& run, Clock::time_point end, Result* out, std::mutex* mu) {
  grpc::ChannelArguments args;
  args.SetInt("berth.loadgen.client", id);  // a connection of its own
  auto channel = grpc::CreateCustomChannel(head, grpc::InsecureChannelCredentials(), args);
  auto groups = v1::PlacementGroupService::NewStub(channel);
  std::mt19937 rng(static_cast<uint32_t>(id));
  std::vector<double> created, cycle;
  uint64_t failures = 0, placed = 0;
  auto context = [&] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    AttachClusterToken(c.get(), token);
    return c;
  };
  for (uint64_t n = 0; batch > 1 && Clock::now() < end; ++n) {
    v1::CreatePlacementGroupsRequest request;
    for (int i = 0; i < batch; ++i) {
      v1::CreatePlacementGroupRequest* group = request.add_requests();
      *group = MakeGroup(w, rng);
      group->set_request_id(absl::StrCat("loadgen-", run, "-", id, "-", n, "-", i));
    }
    const Clock::time_point t0 = Clock::now();
    v1::CreatePlacementGroupsResponse response;
    if (grpc::Status s = groups->CreatePlacementGroups(context().get(), request, &response);
        !s.ok()) {
      Failed(&failures, absl::StrCat("create: ", s.error_message()));
      continue;
    }
    v1::WaitPlacementGroupsReadyRequest wait;
    *wait.mutable_placement_group_ids() = response.placement_group_ids();
    wait.set_timeout_ms(20000);
    v1::WaitPlacementGroupsReadyResponse ready;
    grpc::Status waited = groups->WaitPlacementGroupsReady(context().get(), wait, &ready);
    const Clock::time_point t1 = Clock::now();
    std::string why;  // what the batch was waiting on, and why
    if (!ready.ready()) {
      std::map<std::string, int> states;
      v1::GetPlacementGroupRequest get;
      for (int i = 0; i < ready.states_size(); ++i) {
        ++states[v1::PlacementGroupState_Name(ready.states(i))];
        if (ready.states(i) != v1::PLACEMENT_GROUP_STATE_CREATED) {
          get.set_placement_group_id(response.placement_group_ids(i));
        }
      }
      v1::GetPlacementGroupResponse waiting;
      if (!get.placement_group_id().empty())
        groups->GetPlacementGroup(context().get(), get, &waiting).ok();
      why = absl::StrCat(absl::StrJoin(states, ", ", absl::PairFormatter("=")), " (",
                         waiting.placement_group().pending_reason(), ")");
    }
    v1::RemovePlacementGroupsRequest remove;
    *remove.mutable_placement_group_ids() = response.placement_group_ids();
    remove.set_request_id(absl::StrCat("loadgen-", run, "-", id, "-", n, "-remove"));
    v1::RemovePlacementGroupsResponse removed;
    grpc::Status gone = groups->RemovePlacementGroups(context().get(), remove, &removed);
    if (!waited.ok() || !ready.ready() || !gone.ok()) {
      Failed(&failures, absl::StrCat("wait: ", waited.error_message(), " ready=", ready.ready(),
                                     " ", why, "; remove: ", gone.error_message()));
      continue;
    }
    placed += batch;
    created.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cycle.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  for (uint64_t n = 0; batch == 1 && Clock::now() < end; ++n) {
    v1::CreatePlacementGroupRequest request = MakeGroup(w, rng);
    request.set_request_id(absl::StrCat("loadgen-", run, "-", id, "-", n));
    const Clock::time_point t0 = Clock::now();
    v1::CreatePlacementGroupResponse response;
    if (grpc::Status s = groups->CreatePlacementGroup(context().get(), request, &response);
        !s.ok()) {
      Failed(&failures, absl::StrCat("create: ", s.error_message()));
      continue;
    }
    v1::WaitPlacementGroupReadyRequest wait;
    wait.set_placement_group_id(response.placement_group_id());
    wait.set_timeout_ms(20000);
    v1::WaitPlacementGroupReadyResponse ready;
    grpc::Status waited = groups->WaitPlacementGroupReady(context().get(), wait, &ready);
    const Clock::time_point t1 = Clock::now();
    v1::RemovePlacementGroupRequest remove;
    remove.set_placement_group_id(response.placement_group_id());
    remove.set_request_id(request.request_id() + "-remove");
    v1::RemovePlacementGroupResponse removed;
    grpc::Status gone = groups->RemovePlacementGroup(context().get(), remove, &removed);
    if (!waited.ok() || !ready.ready() || !gone.ok()) {
      Failed(&failures, absl::StrCat("wait: ", waited.error_message(), " ready=", ready.ready(),
                                     " ", ready.placement_group().pending_reason(),
                                     "; remove: ", gone.error_message()));
      continue;
    }
    ++placed;
    created.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cycle.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::lock_guard<std::mutex> lock(*mu);
  out->groups += placed;
  out->created_ms.insert(out->created_ms.end(), created.begin(), created.end());
  out->cycle_ms.insert(out->cycle_ms.end(), cycle.begin(), cycle.end());
  out->failures += failures;
}

Result Run(const std::string& head, const std::string& token, const std::string& name, Workload w,
           int concurrency, int batch, double duration_s) {
  Result result;
  result.workload = name;
  result.concurrency = concurrency;
  result.batch = batch;
  std::mutex mu;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::milliseconds(static_cast<int64_t>(duration_s * 1000));
  // Request ids are idempotency keys: unique to this run.
  const std::string run =
      absl::StrCat(name, "-", concurrency, "-", batch, "-", start.time_since_epoch().count());
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back(Client, head, token, w, batch, c, run, end, &result, &mu);
  }
  for (std::thread& t : clients) t.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(result.created_ms.begin(), result.created_ms.end());
  std::sort(result.cycle_ms.begin(), result.cycle_ms.end());
  return result;
}

std::string Row(Result& r) {
  return absl::StrFormat("%-8s %5d %5d %8u %8u %8.1f %9.0f %8.2f %8.2f %8.2f %8.2f %8.2f",
                         r.workload, r.concurrency, r.batch, r.groups, r.failures, r.seconds,
                         static_cast<double>(r.groups) / r.seconds, Percentile(r.created_ms, 0.5),
                         Percentile(r.created_ms, 0.99), Percentile(r.created_ms, 0.999),
                         Percentile(r.cycle_ms, 0.5), Percentile(r.cycle_ms, 0.99));
}

std::string Json(Result& r) {
  return absl::StrFormat(
      "{\"workload\": \"%s\", \"concurrency\": %d, \"batch\": %d, \"groups\": %u, \"failures\": "
      "%u, \"seconds\": %.3f, "
      "\"groups_per_second\": %.1f, \"created_p50_ms\": %.3f, \"created_p99_ms\": %.3f, "
      "\"created_p999_ms\": %.3f, "
      "\"cycle_p50_ms\": %.3f, \"cycle_p99_ms\": %.3f}",
      r.workload, r.concurrency, r.batch, r.groups, r.failures, r.seconds,
      static_cast<double>(r.groups) / r.seconds, Percentile(r.created_ms, 0.5),
      Percentile(r.created_ms, 0.99), Percentile(r.created_ms, 0.999), Percentile(r.cycle_ms, 0.5),
      Percentile(r.cycle_ms, 0.99));
}

// sqlite: durable, fsync per group commit (berth up's default); memory:
// nothing kept (Ray's GCS default).
std::vector<std::string> StateFlags(const Flags& flags) {
  if (flags.state == "memory") return {"--state-store", "memory:"};
  return {};
}

// Sum and count of a histogram in a Prometheus text scrape.
std::pair<double, double> HistogramSumCount(const std::string& scrape, const std::string& name) {
  double sum = 0, count = 0;
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() < 2) continue;
    if (parts[0] == name + "_sum") absl::SimpleAtod(parts[1], &sum);
    if (parts[0] == name + "_count") absl::SimpleAtod(parts[1], &count);
  }
  return {sum, count};
}

// Places `groups` one-bundle groups with `clients` threads and keeps them.
uint64_t Hold(const std::string& head, int groups, int clients) {
  std::atomic<int> next{0};
  std::atomic<uint64_t> placed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("berth.loadgen.client", c);
      auto stub = v1::PlacementGroupService::NewStub(
          grpc::CreateCustomChannel(head, grpc::InsecureChannelCredentials(), args));
      for (int n; (n = next++) < groups;) {
        v1::CreatePlacementGroupRequest request;
        request.set_request_id(absl::StrCat("hold-", n));
        (*request.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 0.1;
        // Over --max-pending-groups the head refuses (RESOURCE_EXHAUSTED)
        // until placement catches up, and a call can time out while the
        // head is busy: retry for up to 5 minutes, as a client should (the
        // request id makes a retried create idempotent).
        const auto give_up = Clock::now() + std::chrono::minutes(5);
        for (;;) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::CreatePlacementGroupResponse response;
          const grpc::Status s = stub->CreatePlacementGroup(&context, request, &response);
          if (s.ok()) {
            ++placed;
            break;
          }
          const bool retry = s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                             s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                             s.error_code() == grpc::StatusCode::UNAVAILABLE;
          if (!retry || Clock::now() > give_up) {
            std::fprintf(stderr, "berth-loadgen: hold-%d: %s\n", n, s.error_message().c_str());
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return placed;
}

int Scale(const Flags& flags) {
  // No heartbeats: the run ends well within the liveness timeout.
  testing::LocalCluster cluster(60000, StateFlags(flags));
  const int64_t empty = ResidentBytes(cluster.head_pid());
  SimulatedRaylets simulated;
  SimulatedNodeShape shape;
  shape.gpus = flags.gpus_per_node;
  const Clock::time_point start = Clock::now();
  if (absl::Status s = simulated.Start(cluster.head_address(), "", flags.nodes, shape, false);
      !s.ok()) {
    std::fprintf(stderr, "berth-loadgen: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double register_s = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t with_nodes = ResidentBytes(cluster.head_pid());
  const Clock::time_point hold_start = Clock::now();
  const uint64_t created = Hold(cluster.head_address(), flags.hold, 16);
  // Wait until every group is CREATED.
  uint64_t ready = 0;
  for (int i = 0; i < 6000; ++i) {
    v1::GetClusterStatusResponse status;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (cluster.cluster().GetClusterStatus(&context, {}, &status).ok()) {
      ready = 0;
      for (const auto& c : status.placement_groups()) {
        if (c.state() == v1::PLACEMENT_GROUP_STATE_CREATED) ready = c.count();
      }
      if (ready >= created) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double hold_s = std::chrono::duration<double>(Clock::now() - hold_start).count();
  const int64_t with_bundles = ResidentBytes(cluster.head_pid());
  v1::GetClusterStatusResponse status;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  cluster.cluster().GetClusterStatus(&context, {}, &status);
  const auto [sum, count] = HistogramSumCount(
      testing::HttpGet(status.metrics_address(), "/metrics"), "berth_placement_decision_seconds");
  std::printf("berth-loadgen scale: %d simulated nodes x %d GPUs, state in %s\n", flags.nodes,
              flags.gpus_per_node, flags.state.c_str());
  std::printf(
      "  registered in %.1f s; head RSS %.1f MiB empty, %.1f MiB with nodes: %.0f bytes/node\n",
      register_s, empty / 1048576.0, with_nodes / 1048576.0,
      static_cast<double>(with_nodes - empty) / flags.nodes);
  std::printf(
      "  %llu of %d groups CREATED in %.1f s; head RSS %.1f MiB: %.0f bytes/placed bundle\n",
      static_cast<unsigned long long>(ready), flags.hold, hold_s, with_bundles / 1048576.0,
      ready > 0 ? static_cast<double>(with_bundles - with_nodes) / static_cast<double>(ready)
                : 0.0);
  std::printf("  placement decisions: %.0f, mean %.1f us\n", count,
              count > 0 ? sum / count * 1e6 : 0.0);
  if (!flags.json.empty()) {
    std::ofstream(flags.json) << absl::StrFormat(
        "{\"nodes\": %d, \"bundles\": %u, \"bytes_per_node\": %.0f, \"bytes_per_bundle\": %.0f, "
        "\"decision_mean_us\": %.2f}\n",
        flags.nodes, ready, static_cast<double>(with_nodes - empty) / flags.nodes,
        ready > 0 ? static_cast<double>(with_bundles - with_nodes) / static_cast<double>(ready)
                  : 0.0,
        count > 0 ? sum / count * 1e6 : 0.0);
  }
  return ready >= static_cast<uint64_t>(flags.hold) ? 0 : 1;
}

int Main(const Flags& flags) {
  if (flags.state != "sqlite" && flags.state != "memory") {
    std::fprintf(stderr, "berth-loadgen: --state: 'sqlite' or 'memory'\n");
    return 2;
  }
  if (flags.hold > 0) return Scale(flags);
  if (flags.pending_jobs > 0) {
    return PendingJobs({StateFlags(flags), flags.state, flags.nodes, flags.gpus_per_node,
                        flags.pending_jobs, flags.json});
  }
  std::vector<std::pair<std::string, Workload>> workloads;
  for (const std::string& name :
       std::vector<std::string>(absl::StrSplit(flags.workloads, ',', absl::SkipEmpty()))) {
    absl::StatusOr<Workload> w = ParseWorkload(name);
    if (!w.ok()) {
      std::fprintf(stderr, "berth-loadgen: %s\n", std::string(w.status().message()).c_str());
      return 2;
    }
    workloads.emplace_back(name, *w);
  }
  std::vector<int> levels;
  for (absl::string_view c : absl::StrSplit(flags.concurrency, ',', absl::SkipEmpty())) {
    int level = 0;
    if (!absl::SimpleAtoi(c, &level) || level < 1 || level > 1024) {
      std::fprintf(stderr, "berth-loadgen: --concurrency: '%s' is not 1..1024\n",
                   std::string(c).c_str());
      return 2;
    }
    levels.push_back(level);
  }
  std::vector<int> batches;
  for (absl::string_view b : absl::StrSplit(flags.batch, ',', absl::SkipEmpty())) {
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1 || batch > 10000) {
      std::fprintf(stderr, "berth-loadgen: --batch: '%s' is not 1..10000\n",
                   std::string(b).c_str());
      return 2;
    }
    batches.push_back(batch);
  }

  std::unique_ptr<testing::LocalCluster> cluster;
  SimulatedRaylets simulated;
  std::string head = flags.head;
  std::string token;
  std::string setup;
  if (!head.empty()) {
    if (!flags.token_file.empty()) {
      absl::StatusOr<std::string> t = LoadClusterToken(flags.token_file, "--token-file");
      if (!t.ok()) {
        std::fprintf(stderr, "berth-loadgen: %s\n", std::string(t.status().message()).c_str());
        return 2;
      }
      token = *t;
    }
    setup = absl::StrCat("running cluster at ", head);
  } else if (flags.mode == "real") {
    cluster = std::make_unique<testing::LocalCluster>(500, StateFlags(flags));
    // CPUs enough that 16 clients' batches of 100 pack3 groups fit at once:
    // measured is the control plane, not a full cluster's queue.
    for (int i = 0; i < flags.raylets; ++i) {
      cluster->AddRaylet({absl::StrCat("node-", i), flags.gpus_per_node, "A10G", 1024, "4096Gi"});
    }
    head = cluster->head_address();
    setup = absl::StrCat("head + ", flags.raylets, " berth-raylet processes x 1024 CPUs x ",
                         flags.gpus_per_node, " GPUs, state in ", flags.state);
  } else if (flags.mode == "simulated") {
    // Heartbeats of thousands of nodes would be the load: a long period.
    cluster = std::make_unique<testing::LocalCluster>(20000, StateFlags(flags));
    head = cluster->head_address();
    SimulatedNodeShape shape;
    shape.gpus = flags.gpus_per_node;
    if (absl::Status s = simulated.Start(head, "", flags.nodes, shape); !s.ok()) {
      std::fprintf(stderr, "berth-loadgen: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    setup = absl::StrCat("head + ", flags.nodes, " simulated nodes x ", flags.gpus_per_node,
                         " GPUs behind one in-process RayletService, state in ", flags.state);
  } else {
    std::fprintf(stderr, "berth-loadgen: --mode: 'real' or 'simulated'\n");
    return 2;
  }
  std::printf("berth-loadgen: %s; %.1f s per run\n", setup.c_str(), flags.duration_s);
  std::printf("%-8s %5s %5s %8s %8s %8s %9s %8s %8s %8s %8s %8s\n", "workload", "conc", "batch",
              "groups", "failed", "seconds", "groups/s", "crt_p50", "crt_p99", "crt_p999",
              "cyc_p50", "cyc_p99");
  std::vector<std::string> json;
  for (auto& [name, w] : workloads) {
    for (int level : levels) {
      for (int batch : batches) {
        const uint64_t calls_before = simulated.calls();
        Result r = Run(head, token, name, w, level, batch, flags.duration_s);
        std::printf("%s", Row(r).c_str());
        if (flags.mode == "simulated" && flags.head.empty() && r.groups > 0) {
          std::printf("  (%.1f raylet calls/group)",
                      static_cast<double>(simulated.calls() - calls_before) /
                          static_cast<double>(r.groups));
        }
        std::printf("\n");
        std::fflush(stdout);
        json.push_back(Json(r));
      }
    }
  }
  std::printf(
      "latencies in ms: crt = create call -> CREATED seen by the client; cyc = create -> CREATED "
      "-> removed"
      " (per call, or per batch of `batch` groups)\n");
  if (!flags.json.empty()) {
    std::ofstream out(flags.json);
    out << "{\"setup\": \"" << setup << "\", \"runs\": [\n";
    for (size_t i = 0; i < json.size(); ++i)
      out << "  " << json[i] << (i + 1 < json.size() ? ",\n" : "\n");
    out << "]}\n";
  }
  simulated.Stop();
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  berth::Flags flags;
  CLI::App app{"berth-loadgen: placement group throughput and latency against a live berth-head"};
  app.add_option("--mode", flags.mode,
                 "real (berth-raylet processes) or simulated (in-process nodes)")
      ->capture_default_str();
  app.add_option("--head", flags.head, "use the running head at HOST:PORT instead of starting one");
  app.add_option("--token-file", flags.token_file, "with --head: the cluster token");
  app.add_option("--raylets", flags.raylets, "real mode: raylet processes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--nodes", flags.nodes, "simulated mode: nodes")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--gpus-per-node", flags.gpus_per_node, "GPUs of each node")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--workloads", flags.workloads, "comma-separated: one, pack3, spread8, mixed")
      ->capture_default_str();
  app.add_option("--concurrency", flags.concurrency, "comma-separated client counts")
      ->capture_default_str();
  app.add_option("--batch", flags.batch,
                 "comma-separated groups per batch call (1 = one call per group)")
      ->capture_default_str();
  app.add_option("--duration-s", flags.duration_s, "seconds per run")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--state", flags.state, "head state: sqlite (durable, fsync) or memory")
      ->capture_default_str();
  app.add_option("--json", flags.json, "also write the results here");
  app.add_option("--hold", flags.hold,
                 "scale: place and hold this many one-bundle groups on --nodes simulated nodes")
      ->check(CLI::Range(0, 10'000'000));
  app.add_option(
         "--pending-jobs", flags.pending_jobs,
         "pending train jobs: this many unplaceable jobs wait at once on --nodes simulated nodes")
      ->check(CLI::Range(0, 1'000'000));
  CLI11_PARSE(app, argc, argv);
  return berth::Main(flags);
}
