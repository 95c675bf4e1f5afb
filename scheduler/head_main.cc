// berth-head: the cluster's scheduler. Serves NodeService,
// PlacementGroupService and ClusterService (plus gRPC health and
// reflection) and runs the scheduling loop.
//
//   berth-head --listen 127.0.0.1:6380 [--port-file PATH]
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "auth/cluster_token.h"
#include "auth/tls_flags.h"
#include "common/files.h"
#include "common/help_json.h"
#include "common/log_flag.h"
#include "common/metrics_server.h"
#include "common/processes.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/head_server.h"
#include "scheduler/state_store.h"

namespace {

// berth-worker beside this binary (an install), or in the build tree's
// worker/ folder, else by name from the raylet's PATH.
std::string DefaultWorkerBinary() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (const auto& candidate : {self.parent_path() / "berth-worker",
                                  self.parent_path().parent_path() / "worker" / "berth-worker"}) {
      if (std::filesystem::exists(candidate, error)) return candidate.string();
    }
  }
  return "berth-worker";
}

}  // namespace

int main(int argc, char** argv) {
  // Lock-order cycle detection is a debugging aid (TSan runs cover it);
  // Debian's Abseil leaves it on, at a cost on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"berth-head: the berth cluster scheduler"};
  std::string listen = "127.0.0.1:6380";
  std::string port_file;
  berth::HeadConfig config;
  int64_t rpc_timeout_ms = 2000;
  app.add_option("--listen", listen, "host:port to serve on (port 0 picks a free port)");
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  app.add_option("--heartbeat-period-ms", config.liveness.heartbeat_period_ms,
                 "how often raylets heartbeat")
      ->check(CLI::Range(10, 600000));
  app.add_option("--heartbeat-misses", config.liveness.misses,
                 "missed heartbeat periods before a node is DEAD")
      ->check(CLI::Range(1, 1000));
  app.add_option("--raylet-rpc-timeout-ms", rpc_timeout_ms, "deadline of each call to a raylet")
      ->check(CLI::Range(10, 600000));
  std::string advertise_address;
  app.add_option("--advertise-address", advertise_address,
                 "host:port raylets and trainers reach the head at (default: the listen "
                 "host and the bound port)");
  app.add_option("--worker-binary", config.train.job.worker_binary,
                 "berth-worker as the raylets run it (default: beside berth-head, else PATH)");
  app.add_option("--checkpoint-root", config.train.job.checkpoint_root,
                 "where trainers write checkpoints when a job names no storage_path");
  std::string metrics_listen;
  std::string metrics_port_file;
  std::string state_dir;
  std::string state_store;
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "require this cluster token (authorization: Bearer) on every RPC; mode 0600");
  berth::TlsFiles tls_files;
  berth::AddTlsFlags(app, tls_files, "berth-head");
  size_t max_name_length = 128;
  app.add_option(
      "--state-dir", state_dir,
      "keep nodes and placement groups in DIR/head.sqlite, so a restarted head continues");
  app.add_option("--state-store", state_store,
                 "where to keep state instead: redis://HOST:PORT[/DB] (HA), sqlite:PATH, or "
                 "memory: (lost on exit)")
      ->excludes("--state-dir");
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus /metrics on HOST:PORT (port 0 picks one); empty = off");
  app.add_option("--metrics-port-file", metrics_port_file, "write the bound metrics port here");
  app.add_option("--max-bundles-per-group", config.scheduler.max_bundles_per_group,
                 "bundles in one placement group")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-pending-groups", config.scheduler.max_pending_groups,
                 "placement groups waiting to be placed at once")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  std::string placement_scorer(berth::ScorerKindName(config.scheduler.placement_scorer));
  app.add_option("--placement-scorer", placement_scorer,
                 "how to rank the nodes a bundle fits: fragmentation (learns the GPU task "
                 "distribution from the groups created; the built-in ranking until 100 GPU "
                 "tasks), builtin (best fit by the scarcest resource), first-fit, best-fit, "
                 "worst-fit (Ray's default), random")
      ->capture_default_str();
  app.add_option("--max-active-jobs", config.train.max_active_jobs, "train jobs not yet finished")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--train-threads", config.train.worker_threads,
                 "threads that step the train jobs and make their raylet calls (a fixed pool, "
                 "however many jobs there are)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-name-length", max_name_length, "characters in a group or job name")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-message-bytes", config.max_message_bytes, "largest request accepted, bytes")
      ->check(CLI::Range(64 << 10, 256 << 20))
      ->capture_default_str();
  app.add_option("--committer-threads", config.committer_threads, "two-phase commits run at once")
      ->check(CLI::Range(1, 256));
  const berth::LogFlag log_flag(app);
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-head");
  config.scheduler.max_name_length = max_name_length;
  absl::StatusOr<berth::ScorerKind> scorer_kind =
      berth::ParseScorerKind(placement_scorer, "--placement-scorer");
  if (!scorer_kind.ok()) {
    berth::LogError(scorer_kind.status().message());
    return 1;
  }
  config.scheduler.placement_scorer = *scorer_kind;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = berth::LoadClusterToken(token_file, "--token-file");
    if (!token.ok()) {
      berth::LogError(token.status().message());
      return 1;
    }
    config.cluster_token = *token;
  }
  absl::StatusOr<berth::TlsConfig> tls = berth::LoadTlsConfig(tls_files, /*need_certificate=*/true);
  if (!tls.ok()) {
    berth::LogError(tls.status().message());
    return 1;
  }
  config.tls = *tls;
  config.train.max_name_length = max_name_length;
  config.raylet_rpc_timeout = absl::Milliseconds(rpc_timeout_ms);
  if (config.train.job.worker_binary.empty() || config.train.job.worker_binary == "berth-worker") {
    config.train.job.worker_binary = DefaultWorkerBinary();
  }

  // Signals are taken by sigwait below, not by whichever thread they hit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<berth::StateStore> store;
  berth::StateStore* claimed_store = nullptr;  // owned by the head once it runs
  if (!state_dir.empty() || !state_store.empty()) {
    absl::StatusOr<std::unique_ptr<berth::StateStore>> opened =
        state_store.empty() ? berth::OpenStateStore(state_dir, "--state-dir")
                            : berth::OpenStateStore(state_store, "--state-store");
    if (!opened.ok()) {
      berth::LogError(opened.status().message());
      return 1;
    }
    store = *std::move(opened);
    // Before anything is read: a second head on a held store stops here.
    if (absl::Status s = store->Claim(absl::StrCat("berth-head pid ", getpid(), ", --listen ", listen));
        !s.ok()) {
      berth::LogError(s.message());
      return 1;
    }
    claimed_store = store.get();
  }
  berth::HeadServer head(config, std::move(store));
  if (absl::Status restored = head.Restore(); !restored.ok()) {
    berth::LogError("cannot restore state: ", restored.message());
    return 1;
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  // Client certificates are verified when presented (raylets'), not
  // required: users and trainers authenticate with the cluster token.
  builder.AddListeningPort(
      listen, config.tls.ServerCredentials(/*require_client_certificate=*/false), &port);
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default: a second head on a taken port would
  // listen beside the first and the kernel would split the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* service : head.services()) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    int listen_port = 0;
    const std::string holder =
        absl::SimpleAtoi(listen.substr(listen.rfind(':') + 1), &listen_port) && listen_port > 0
            ? berth::ListenerOfPort(listen_port)
            : "";
    berth::LogError("--listen: cannot serve on ", listen,
                    holder.empty() ? "" : absl::StrCat(": the port is in use by ", holder));
    return 1;
  }
  if (advertise_address.empty()) {
    advertise_address = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  }
  if (claimed_store != nullptr) {
    claimed_store->Claim(absl::StrCat("berth-head pid ", getpid(), " serving ", advertise_address))
        .IgnoreError();  // only the description; the claim holds
  }
  head.Start(advertise_address);
  std::unique_ptr<berth::MetricsServer> metrics;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables = head.MetricsCollectables();
  if (!metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<berth::MetricsServer>> started =
        berth::MetricsServer::Start(metrics_listen);
    if (!started.ok()) {
      berth::LogError(started.status().message());
      return 1;
    }
    metrics = *std::move(started);
    for (const auto& c : collectables) metrics->Register(c);
    head.SetMetricsAddress(absl::StrCat(advertise_address.substr(0, advertise_address.rfind(':')),
                                        ":", metrics->port()));
    if (!metrics_port_file.empty()) {
      if (absl::Status s = berth::WritePortFile(metrics_port_file, metrics->port()); !s.ok()) {
        berth::LogError(s.message());
        return 1;
      }
    }
    berth::LogInfo("metrics on port ", metrics->port());
  }
  if (!port_file.empty()) {
    if (absl::Status s = berth::WritePortFile(port_file, port); !s.ok()) {
      berth::LogError(s.message());
      return 1;
    }
  }
  berth::LogInfo("serving on port ", port);

  int signal = 0;
  sigwait(&signals, &signal);
  berth::LogInfo("signal ", signal, ", shutting down");
  // No new RPCs first (handlers use the job controller), then stop the jobs
  // and loops.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics.reset();  // its collectables read the head
  collectables.clear();
  head.Stop();
  return 0;
}
