// berth-head: the cluster's scheduler. Serves NodeService,
// PlacementGroupService and ClusterService (plus gRPC health and
// reflection) and runs the scheduling loop. A second head on the same
// state store is its standby and takes over when the first one's process
// ends (docs/operations.md, "Heads").
//
//   berth-head --listen 127.0.0.1:6380 [--state-dir DIR] [--port-file PATH]
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "auth/cluster_token.h"
#include "auth/tls_flags.h"
#include "common/files.h"
#include "common/head_addresses.h"
#include "common/help_json.h"
#include "common/log_flag.h"
#include "common/metrics_server.h"
#include "common/processes.h"
#include "common/version.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/head_server.h"
#include "scheduler/state_store.h"

namespace {

// `name` (berth-worker, berth-relay) beside this binary (an install), or in
// the build tree's worker/ folder, else by name from the raylet's PATH.
std::string DefaultWorkerSideBinary(const std::string& name) {
  return berth::FindBesideBinary({name, "../worker/" + name}).value_or(name);
}

// Whether `state_store` (--state-store) is shared with heads on other
// machines, and so may not answer for a while (a leader election, no
// quorum) without anything being wrong here.
bool SharedStore(const std::string& state_store) {
  return absl::StartsWith(state_store, "etcd://") || absl::StartsWith(state_store, "redis://");
}

struct ServeOptions {
  std::string listen = "127.0.0.1:6380";
  std::string port_file;
  std::string advertise_address;
  std::string heads;
  std::string metrics_listen;
  std::string metrics_port_file;
  std::vector<std::string> command_line;  // to start again as a standby
  std::string state_store;                // --state-store
};

// Serves on `listen`, refusing a port another process listens on (gRPC sets
// SO_REUSEPORT by default: a second head would listen beside the first and
// the kernel would split the connections between them).
std::unique_ptr<grpc::Server> Listen(const std::string& listen, const berth::HeadConfig& config,
                                     berth::HeadServer& head, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Client certificates are verified when presented (raylets'), not
  // required: users and trainers authenticate with the cluster token.
  builder.AddListeningPort(
      listen, config.tls.ServerCredentials(/*require_client_certificate=*/false), port);
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients of several heads ping every kHeadKeepaliveMs, idle or not.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             berth::kHeadKeepaliveMs / 2);
  for (grpc::Service* service : head.services()) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server && *port != 0) return server;
  int listen_port = 0;
  const std::string holder =
      absl::SimpleAtoi(listen.substr(listen.rfind(':') + 1), &listen_port) && listen_port > 0
          ? berth::ListenerOfPort(listen_port)
          : "";
  berth::LogError("--listen: cannot serve on ", listen,
                  holder.empty() ? "" : absl::StrCat(": the port is in use by ", holder));
  return nullptr;
}

// /metrics of an active head, on `serve.metrics_listen` (none when empty).
absl::StatusOr<std::unique_ptr<berth::MetricsServer>> StartMetrics(
    const ServeOptions& serve, berth::HeadServer& head,
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  if (serve.metrics_listen.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<berth::MetricsServer>> metrics =
      berth::MetricsServer::Start(serve.metrics_listen);
  if (!metrics.ok()) return metrics.status();
  for (const auto& c : collectables) (*metrics)->Register(c);
  const std::string& address = serve.advertise_address;
  head.SetMetricsAddress(
      absl::StrCat(address.substr(0, address.rfind(':')), ":", (*metrics)->port()));
  if (!serve.metrics_port_file.empty()) {
    if (absl::Status s = berth::WritePortFile(serve.metrics_port_file, (*metrics)->port());
        !s.ok()) {
      return s;
    }
  }
  berth::LogInfo("metrics on port ", (*metrics)->port());
  return metrics;
}

// A standby's wait: polls `claim` (a lock released by a kill -9, a lapsed
// lease, is taken within the interval), then `become_active`. False when
// stopped first or when taking over failed (logged).
bool TakeOver(const std::function<absl::Status()>& claim,
              const std::function<absl::Status()>& become_active,
              const std::atomic<bool>& stopping) {
  for (int tries = 0; !stopping.load(); ++tries) {
    const absl::Status s = claim();
    if (s.ok()) break;
    // A store that does not answer is logged now and then, not every try.
    if (!absl::IsFailedPrecondition(s) && tries % 100 == 0) berth::LogWarning(s.message());
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (stopping.load()) return false;
  berth::LogInfo("the active head let go of the state store: taking over");
  if (absl::Status s = become_active(); !s.ok()) {
    berth::LogError(s.message());
    return false;
  }
  return true;
}

// `command_line` with its --listen port set to `port`, the one bound now:
// started again, the head serves where its clients know it (not on
// another free port when it was given port 0).
std::vector<std::string> ListeningAgainOn(std::vector<std::string> command_line, int port) {
  for (size_t i = 1; i < command_line.size(); ++i) {
    std::string& arg = command_line[i];
    std::string* address = nullptr;
    if ((arg == "--listen") && i + 1 < command_line.size()) {
      address = &command_line[i + 1];
    } else if (absl::StartsWith(arg, "--listen=")) {
      address = &arg;
    }
    if (address != nullptr) {
      *address = absl::StrCat(address->substr(0, address->rfind(':')), ":", port);
      return command_line;
    }
  }
  command_line.push_back(absl::StrCat("--listen=127.0.0.1:", port));  // the default host
  return command_line;
}

// An active head's claim, renewed until `stopping`. Once it is lost,
// another head may be active: this one must not act. It starts again, the
// same command, and stands by (its raylets already refuse its epoch, its
// writes are fenced).
void KeepClaim(berth::StateStore& store, const std::atomic<bool>& stopping,
               const std::vector<std::string>& command_line) {
  while (!stopping.load()) {
    if (absl::Status s = store.Keep(); !s.ok()) {
      berth::LogError(s.message(), "; stepping down: this head starts again as a standby");
      berth::ExecAgain(command_line);
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// Runs the head until SIGINT or SIGTERM: active if it can claim `store`
// (StateStore::Claim), else a standby that answers every call UNAVAILABLE
// naming the active head, reports NOT_SERVING to gRPC health checks (so
// clients given every head's address reach the active one), and takes over
// (restores the state, a new epoch) once the active head lets go of the
// store: its lock ends with its process, kill -9 included.
int Serve(ServeOptions serve, berth::HeadConfig config, std::unique_ptr<berth::StateStore> store,
          const sigset_t& signals) {
  berth::StateStore* const claimed = store.get();
  auto claim = [&](const std::string& what) {
    return claimed == nullptr
               ? absl::OkStatus()
               : claimed->Claim(absl::StrCat("berth-head pid ", getpid(), " ", what));
  };
  const absl::Status first_claim = claim(absl::StrCat("starting on ", serve.listen));
  // A shared store that does not answer now (etcd without a quorum) is
  // waited for as a standby; a local one that cannot be locked is an error.
  const bool wait_for_store = absl::IsUnavailable(first_claim) && SharedStore(serve.state_store);
  if (!first_claim.ok() && !absl::IsFailedPrecondition(first_claim) && !wait_for_store) {
    berth::LogError(first_claim.message());
    return 1;
  }
  const bool standby = !first_claim.ok();
  berth::HeadServer head(config, std::move(store));
  head.StandBy(standby ? absl::StrCat(berth::kStandbyHeadAnswer, ": ", first_claim.message())
                       : "this head is starting (restoring its state)");
  int port = 0;
  std::unique_ptr<grpc::Server> server = Listen(serve.listen, config, head, &port);
  if (!server) return 1;
  if (serve.advertise_address.empty()) {
    serve.advertise_address =
        absl::StrCat(serve.listen.substr(0, serve.listen.rfind(':')), ":", port);
  }
  // SERVING once active: clients given every head's address pick it by that.
  server->GetHealthCheckService()->SetServingStatus(false);

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables = head.MetricsCollectables();
  std::unique_ptr<berth::MetricsServer> metrics;
  auto become_active = [&]() -> absl::Status {
    if (absl::Status s = claim(absl::StrCat("serving ", serve.advertise_address)); !s.ok())
      return s;
    if (absl::Status s = head.Restore(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot restore state: ", s.message()));
    }
    head.Start(serve.advertise_address, serve.heads);
    absl::StatusOr<std::unique_ptr<berth::MetricsServer>> started =
        StartMetrics(serve, head, collectables);
    if (!started.ok()) return started.status();
    metrics = *std::move(started);
    server->GetHealthCheckService()->SetServingStatus(true);
    return absl::OkStatus();
  };
  if (!standby) {
    if (absl::Status s = become_active(); !s.ok()) {
      berth::LogError(s.message());
      return 1;
    }
  }
  if (!serve.port_file.empty()) {
    if (absl::Status s = berth::WritePortFile(serve.port_file, port); !s.ok()) {
      berth::LogError(s.message());
      return 1;
    }
  }
  berth::LogInfo("serving on port ", port, standby ? " as a standby: " : "",
                 standby ? first_claim.message() : "");

  std::atomic<bool> stopping{false};
  std::atomic<bool> failed{false};
  std::thread claim_keeper;
  if (claimed != nullptr) {
    claim_keeper = std::thread([&] {
      const bool active =
          !standby ||
          TakeOver([&] { return claim(absl::StrCat("serving ", serve.advertise_address)); },
                   become_active, stopping);
      if (!active && !stopping.load()) {
        failed.store(true);
        kill(getpid(), SIGTERM);
      }
      if (active) KeepClaim(*claimed, stopping, ListeningAgainOn(serve.command_line, port));
    });
  }

  int signal = 0;
  sigwait(&signals, &signal);
  berth::LogInfo("signal ", signal, ", shutting down");
  stopping.store(true);
  if (claim_keeper.joinable()) claim_keeper.join();
  // No new RPCs first (handlers use the job controller), then stop the jobs
  // and loops.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics.reset();  // its collectables read the head
  collectables.clear();
  head.Stop();
  return failed.load() ? 1 : 0;
}

// The store of --state-dir or --state-store; none (in memory only) when
// both are empty. A shared store (etcd, Redis) that does not answer is
// tried again every second until it does or a signal comes: a head that
// stepped down, or started while the store was out, waits for it instead
// of leaving the cluster one head short.
absl::StatusOr<std::unique_ptr<berth::StateStore>> OpenStore(const std::string& state_dir,
                                                             const std::string& state_store,
                                                             const sigset_t& signals) {
  if (state_dir.empty() && state_store.empty()) return std::unique_ptr<berth::StateStore>();
  const bool shared = SharedStore(state_store);
  for (int tries = 0;; ++tries) {
    absl::StatusOr<std::unique_ptr<berth::StateStore>> opened =
        state_store.empty() ? berth::OpenStateStore(state_dir, "--state-dir")
                            : berth::OpenStateStore(state_store, "--state-store");
    if (opened.ok() || !shared || !absl::IsUnavailable(opened.status())) return opened;
    if (tries % 10 == 0) berth::LogWarning(opened.status().message(), "; trying again");
    const timespec second{1, 0};
    if (sigtimedwait(&signals, nullptr, &second) > 0) return opened.status();
  }
}

// What the command line sets: how the head serves (ServeOptions), its
// HeadConfig, and the flags that HeadConfigOf checks and turns into config.
struct HeadFlags {
  ServeOptions serve;
  berth::HeadConfig config;
  int64_t rpc_timeout_ms = 2000;
  std::string state_dir;
  std::string token_file;
  berth::TlsFiles tls_files;
  size_t max_name_length = 128;
  std::string placement_scorer;
  uint64_t package_limit_mb = berth::kDefaultPackageLimitBytes >> 20;
  int64_t stop_grace_s = 30;
  int64_t max_stop_grace_s = 600;
};

// Where this head serves.
void AddListenFlags(CLI::App& app, ServeOptions& serve) {
  app.add_option("--listen", serve.listen, "host:port to serve on (port 0 picks a free port)");
  app.add_option("--port-file", serve.port_file, "write the bound port here once serving");
}

// Node liveness and the head's calls to raylets.
void AddRayletFlags(CLI::App& app, HeadFlags& flags) {
  app.add_option("--heartbeat-period-ms", flags.config.liveness.heartbeat_period_ms,
                 "how often raylets heartbeat")
      ->check(CLI::Range(10, 600000));
  app.add_option("--heartbeat-misses", flags.config.liveness.misses,
                 "missed heartbeat periods before a node is DEAD")
      ->check(CLI::Range(1, 1000));
  app.add_option("--raylet-rpc-timeout-ms", flags.rpc_timeout_ms,
                 "deadline of each call to a raylet")
      ->check(CLI::Range(10, 600000));
  app.add_option("--max-unhealthy-gpus", flags.config.max_unhealthy_gpus,
                 "a node with more unhealthy GPUs than this is drained (its healthy ones "
                 "are suspect too)")
      ->capture_default_str();
}

// Where raylets, trainers and clients reach this head and its standbys.
void AddAdvertiseFlags(CLI::App& app, ServeOptions& serve) {
  app.add_option("--advertise-address", serve.advertise_address,
                 "host:port raylets and trainers reach the head at (default: the listen "
                 "host and the bound port)");
  app.add_option("--heads", serve.heads,
                 "every head of the cluster, this one included, HOST:PORT,HOST:PORT: "
                 "trainers get the list to follow whichever head is active (default: this "
                 "head's address)");
}

// What the raylets run for a train job, and where its checkpoints go.
void AddTrainJobFlags(CLI::App& app, berth::TrainControllerConfig& train) {
  app.add_option("--worker-binary", train.job.worker_binary,
                 "berth-worker as the raylets run it (default: beside berth-head, else PATH)");
  app.add_option("--relay-binary", train.job.relay_binary,
                 "berth-relay, a command job's driver, as the raylets run it (default: beside "
                 "berth-head, else PATH)");
  app.add_option("--checkpoint-root", train.job.checkpoint_root,
                 "where trainers write checkpoints when a job names no storage_path");
}

// The cluster token and TLS.
void AddAuthFlags(CLI::App& app, HeadFlags& flags) {
  app.add_option("--token-file", flags.token_file,
                 "require this cluster token (authorization: Bearer) on every RPC; mode 0600");
  berth::AddTlsFlags(app, flags.tls_files, "berth-head");
}

// Where the head keeps its state across restarts.
void AddStateStoreFlags(CLI::App& app, HeadFlags& flags) {
  app.add_option(
      "--state-dir", flags.state_dir,
      "keep nodes and placement groups in DIR/head.sqlite, so a restarted head continues");
  app.add_option("--state-store", flags.serve.state_store,
                 "where to keep state instead: redis://HOST:PORT[/DB] (HA), sqlite:PATH, or "
                 "memory: (nothing kept: lost on exit)")
      ->excludes("--state-dir");
}

// Where Prometheus /metrics is served.
void AddMetricsFlags(CLI::App& app, ServeOptions& serve) {
  app.add_option("--metrics-listen", serve.metrics_listen,
                 "serve Prometheus /metrics on HOST:PORT (port 0 picks one); empty = off");
  app.add_option("--metrics-port-file", serve.metrics_port_file,
                 "write the bound metrics port here");
}

// How many groups wait, how big they are, and how their nodes are chosen.
void AddPlacementFlags(CLI::App& app, HeadFlags& flags) {
  berth::SchedulerConfig& scheduler = flags.config.scheduler;
  app.add_option("--max-bundles-per-group", scheduler.max_bundles_per_group,
                 "bundles in one placement group")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-pending-groups", scheduler.max_pending_groups,
                 "placement groups waiting to be placed at once")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  flags.placement_scorer = std::string(berth::ScorerKindName(scheduler.placement_scorer));
  app.add_option("--placement-scorer", flags.placement_scorer,
                 "how to rank the nodes a bundle fits: fragmentation (learns the GPU task "
                 "distribution from the groups created; the built-in ranking until 5 GPU "
                 "tasks), builtin (best fit by the scarcest resource), first-fit, best-fit, "
                 "worst-fit (Ray's default), random")
      ->capture_default_str();
}

// How many train jobs, how many threads step them, and how long their
// processes get to stop.
void AddTrainLimitFlags(CLI::App& app, HeadFlags& flags) {
  berth::TrainControllerConfig& train = flags.config.train;
  app.add_option("--max-active-jobs", train.max_active_jobs, "train jobs not yet finished")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--train-threads", train.worker_threads,
                 "threads that step the train jobs and make their raylet calls (a fixed pool, "
                 "however many jobs there are)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--stop-grace-period-s", flags.stop_grace_s,
                 "seconds a job's processes get from SIGTERM to SIGKILL when it sets no "
                 "stop_grace_period")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--max-stop-grace-period-s", flags.max_stop_grace_s,
                 "the longest stop_grace_period a job may ask for, seconds")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
}

// What one request may carry, and how many commits run at once.
void AddRequestLimitFlags(CLI::App& app, HeadFlags& flags) {
  app.add_option("--max-name-length", flags.max_name_length, "characters in a group or job name")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-message-bytes", flags.config.max_message_bytes,
                 "largest request accepted, bytes")
      ->check(CLI::Range(64 << 10, 256 << 20))
      ->capture_default_str();
  app.add_option("--package-limit-mb", flags.package_limit_mb,
                 "largest working-directory package accepted (runtime_env working_dir), MiB")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--committer-threads", flags.config.committer_threads,
                 "threads that call raylets: reservation batches and train jobs' process starts "
                 "in flight at once")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
}

// Every flag, one concern at a time, in the order --help lists them.
void AddHeadFlags(CLI::App& app, HeadFlags& flags) {
  AddListenFlags(app, flags.serve);
  AddRayletFlags(app, flags);
  AddAdvertiseFlags(app, flags.serve);
  AddTrainJobFlags(app, flags.config.train);
  AddAuthFlags(app, flags);
  AddStateStoreFlags(app, flags);
  AddMetricsFlags(app, flags.serve);
  AddPlacementFlags(app, flags);
  AddTrainLimitFlags(app, flags);
  AddRequestLimitFlags(app, flags);
}

// The HeadConfig the flags describe: the scorer named, the token and TLS
// files read, the worker-side binaries found.
absl::StatusOr<berth::HeadConfig> HeadConfigOf(const HeadFlags& flags) {
  berth::HeadConfig config = flags.config;
  config.scheduler.max_name_length = flags.max_name_length;
  config.package_limit_bytes = flags.package_limit_mb << 20;
  absl::StatusOr<berth::ScorerKind> scorer_kind =
      berth::ParseScorerKind(flags.placement_scorer, "--placement-scorer");
  if (!scorer_kind.ok()) return scorer_kind.status();
  config.scheduler.placement_scorer = *scorer_kind;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = berth::LoadClusterToken(flags.token_file, "--token-file");
    if (!token.ok()) return token.status();
    config.cluster_token = *token;
  }
  absl::StatusOr<berth::TlsConfig> tls =
      berth::LoadTlsConfig(flags.tls_files, /*need_certificate=*/true);
  if (!tls.ok()) return tls.status();
  config.tls = *tls;
  config.train.max_name_length = flags.max_name_length;
  if (flags.stop_grace_s > flags.max_stop_grace_s) {
    return absl::InvalidArgumentError(absl::StrCat("--stop-grace-period-s: ", flags.stop_grace_s,
                                                   " is above --max-stop-grace-period-s (",
                                                   flags.max_stop_grace_s, ")"));
  }
  config.train.job.default_stop_grace = absl::Seconds(flags.stop_grace_s);
  config.train.max_stop_grace = absl::Seconds(flags.max_stop_grace_s);
  config.raylet_rpc_timeout = absl::Milliseconds(flags.rpc_timeout_ms);
  std::string& worker = config.train.job.worker_binary;
  if (worker.empty() || worker == "berth-worker") worker = DefaultWorkerSideBinary("berth-worker");
  std::string& relay = config.train.job.relay_binary;
  if (relay.empty() || relay == "berth-relay") relay = DefaultWorkerSideBinary("berth-relay");
  return config;
}

int Fail(const absl::Status& status) {
  berth::LogError(status.message());
  return 1;
}

// The config checked, the signals blocked, the store opened, then Serve.
int Run(HeadFlags flags) {
  absl::StatusOr<berth::HeadConfig> config = HeadConfigOf(flags);
  if (!config.ok()) return Fail(config.status());
  // Signals are taken by sigwait in Serve, not by whichever thread they hit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<std::unique_ptr<berth::StateStore>> store =
      OpenStore(flags.state_dir, flags.serve.state_store, signals);
  if (!store.ok()) return Fail(store.status());
  return Serve(std::move(flags.serve), *std::move(config), *std::move(store), signals);
}

}  // namespace

int main(int argc, char** argv) {
  // Lock-order cycle detection is a debugging aid (TSan runs cover it);
  // Debian's Abseil leaves it on, at a cost on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"berth-head: the berth cluster scheduler"};
  HeadFlags flags;
  AddHeadFlags(app, flags);
  const berth::LogFlag log_flag(app);
  berth::AddVersionFlag(app, "berth-head");
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-head");
  flags.serve.command_line.assign(argv, argv + argc);
  return Run(std::move(flags));
}
