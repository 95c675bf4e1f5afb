// berth-raylet: the node agent. Serves RayletService for the head, registers
// and heartbeats with the head's NodeService, and runs worker processes.
// SIGTERM / SIGINT: stop serving, kill every worker, report, exit 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "auth/cluster_token.h"
#include "auth/tls_flags.h"
#include "berth/v1/head.pb.h"
#include "common/files.h"
#include "common/head_addresses.h"
#include "common/help_json.h"
#include "common/log.h"
#include "common/log_flag.h"
#include "common/metrics_server.h"
#include "common/version.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "placement/label_selector.h"
#include "placement/quantity.h"
#include "placement/resource_set.h"
#include "raylet/bundle_reservations.h"
#include "raylet/gpu_discovery.h"
#include "raylet/head_connection.h"
#include "raylet/head_packages.h"
#include "raylet/leftover_sweeper.h"
#include "raylet/node_confinement.h"
#include "raylet/node_health_watch.h"
#include "raylet/nvml_health.h"
#include "raylet/raylet_flags.h"
#include "raylet/raylet_metrics.h"
#include "raylet/raylet_service.h"
#include "raylet/tcp_port.h"
#include "raylet/worker_processes.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// How long shutdown gives in-flight RPCs, workers (SIGTERM -> SIGKILL) and
// the last exit reports.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

// Reconnects to a restarted head within a second: gRPC's default backoff
// (up to 2 minutes) would outlast the head's liveness timeout, and the
// node would be declared dead although it never stopped.
grpc::ChannelArguments HeadChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

// "a=1,b=2" -> {{a, 1}, {b, 2}}.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParsePairs(
    absl::string_view text, absl::string_view flag) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", item, "\" is not name=value"));
    }
    pairs.push_back(std::move(kv));
  }
  return pairs;
}

absl::StatusOr<ResourceSet> CustomResources(absl::string_view text) {
  absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> amounts =
      ParseResourceList(text, "--resources", "want e.g. \"ssd=2,license=1\"");
  if (!amounts.ok()) return amounts.status();
  ResourceSet resources;
  for (const auto& [name, amount] : *amounts) {
    if (name == kCpu || name == kGpu || name == kMemory || PinnedAcceleratorType(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources[\"", name,
                       "\"]: set CPU, memory and GPUs with --num-cpus, --memory, "
                       "--num-gpus and --accelerator-type"));
    }
    resources.Set(name, amount);
  }
  return resources;
}

absl::StatusOr<Labels> NodeLabels(absl::string_view text) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
      ParsePairs(text, "--labels");
  if (!pairs.ok()) return pairs.status();
  Labels labels;
  for (const auto& [key, value] : *pairs) {
    const std::string field = absl::StrCat("--labels[\"", key, "\"]");
    if (absl::Status s = ValidateLabelKey(key, field); !s.ok()) return s;
    if (absl::Status s = ValidateLabelValue(value, field); !s.ok()) return s;
    if (!NodeMaySetLabel(key) || key == kNodePoolLabel) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": the berth.io/ prefix is reserved (set by the head; --node-pool sets ",
          kNodePoolLabel, "), the topology keys excepted"));
    }
    labels[key] = value;
  }
  return labels;
}

absl::StatusOr<Quantity> CpuCount(const std::string& flag) {
  if (!flag.empty()) return Quantity::Parse(flag, "--num-cpus");
  return Quantity::Whole(std::max(1u, std::thread::hardware_concurrency()));
}

absl::StatusOr<Quantity> MemoryBytes(const std::string& flag) {
  if (!flag.empty()) return Quantity::Parse(flag, "--memory");
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) {
    return absl::UnavailableError("--memory: cannot read the machine's memory size; set it");
  }
  return Quantity::Whole(static_cast<int64_t>(pages) * page_size);
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "node";
  return name;
}

int Fail(const absl::Status& status) {
  LogError(status.message());
  return 1;
}

// SIGTERM and SIGINT.
sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

// One head, or the active head and its standbys (common/head_addresses.h).
absl::Status ValidateHeads(const std::string& flag) {
  const std::vector<std::string> heads = SplitHeadAddresses(flag);
  if (heads.empty()) return absl::InvalidArgumentError("--head: empty");
  for (const std::string& address : heads) {
    if (absl::StatusOr<HostPort> head = ParseHostPort(address, "--head"); !head.ok())
      return head.status();
  }
  return absl::OkStatus();
}

// CPUs, memory and the custom resources; GPUs are discovered.
absl::StatusOr<ResourceSet> ConfiguredResources(const Flags& flags) {
  absl::StatusOr<Quantity> cpus = CpuCount(flags.num_cpus);
  if (!cpus.ok()) return cpus.status();
  absl::StatusOr<Quantity> memory = MemoryBytes(flags.memory);
  if (!memory.ok()) return memory.status();
  absl::StatusOr<ResourceSet> resources = CustomResources(flags.resources);
  if (!resources.ok()) return resources.status();
  resources->Set(kCpu, *cpus);
  resources->Set(kMemory, *memory);
  return resources;
}

// --labels and the node pool's label.
absl::StatusOr<Labels> ConfiguredLabels(const Flags& flags) {
  absl::StatusOr<Labels> labels = NodeLabels(flags.labels);
  if (!labels.ok()) return labels.status();
  if (!flags.node_pool.empty()) {
    if (absl::Status s = ValidateLabelValue(flags.node_pool, "--node-pool"); !s.ok()) return s;
    (*labels)[std::string(kNodePoolLabel)] = flags.node_pool;
  }
  return labels;
}

// What this node is and how it talks, from the flags: all checked before
// anything starts.
struct NodeConfig {
  HostPort listen;  // with the reserved port
  std::string node_id;
  std::string node_dir;  // --state-dir: work folders, packages, default logs
  std::string log_dir;
  ResourceSet total;  // what the head is told
  // `total`, plus accelerator_type:<T>: bundles asking for it reserve from
  // it here as on the head, though only the head announces it.
  ResourceSet reservable;
  Labels labels;
  DiscoveredGpus gpus;
  std::string accelerator_type;  // of the GPUs; empty without
  std::string cluster_token;     // empty = none
  TlsConfig tls;
  NodeConfinement confinement;
};

absl::StatusOr<NodeConfig> LoadNodeConfig(const Flags& flags, const HostPort& listen) {
  NodeConfig config;
  config.listen = listen;
  config.node_id =
      flags.node_id.empty() ? absl::StrCat(HostName(), "-", listen.port) : flags.node_id;
  if (absl::Status s = ValidateString(config.node_id, "--node-id", 256, true); !s.ok()) return s;
  config.node_dir =
      flags.state_dir.empty() ? absl::StrCat("/tmp/berth/", config.node_id) : flags.state_dir;
  if (flags.log_retention_s < 0) {
    return absl::InvalidArgumentError("--log-retention-s: must be >= 0");
  }
  config.log_dir = flags.log_dir.empty() ? config.node_dir + "/logs" : flags.log_dir;
  absl::StatusOr<ResourceSet> resources = ConfiguredResources(flags);
  if (!resources.ok()) return resources.status();
  absl::StatusOr<Labels> labels = ConfiguredLabels(flags);
  if (!labels.ok()) return labels.status();
  config.labels = *std::move(labels);
  if (!flags.accelerator_type.empty()) {
    if (absl::Status s = ValidateLabelValue(flags.accelerator_type, "--accelerator-type"); !s.ok())
      return s;
  }

  config.gpus = DiscoverGpus({flags.num_gpus, flags.accelerator_type, config.node_id});
  if (!config.gpus.devices.empty()) {
    config.accelerator_type = config.gpus.devices.front().accelerator_type;
  }
  config.total = *std::move(resources);
  config.total.Set(kGpu, Quantity::Whole(static_cast<int64_t>(config.gpus.devices.size())));
  config.reservable = config.total;
  if (!config.accelerator_type.empty()) {
    config.reservable.Set(AcceleratorResourceName(config.accelerator_type), Quantity::Whole(1));
  }
  LogInfo("node ", config.node_id, ": ", config.total.ToString(), ", GPUs ", config.gpus.source,
          config.accelerator_type.empty()
              ? ""
              : absl::StrCat(", accelerator type ", config.accelerator_type),
          ", logs in ", config.log_dir);

  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClusterToken(flags.token_file, "--token-file");
    if (!token.ok()) return token.status();
    config.cluster_token = *token;
  }
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(flags.tls, /*need_certificate=*/true);
  if (!tls.ok()) return tls.status();
  config.tls = *std::move(tls);
  return config;
}

// The running node: RayletService over the node's bundles and workers, the
// head connection, and the metrics. Each member outlives those declared
// after it, which use it: workers that end while stopping are still
// reported to the head connection.
class NodeAgent {
 public:
  NodeAgent(const Flags& flags, const NodeConfig& config);
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Starts the watch over the node's health (node_health_watch.h), first.
  absl::Status WatchHealth();
  // Serves RayletService on the reserved port (given up once the server
  // holds it) and the metrics, and writes the port files. On an error
  // nothing is served.
  absl::Status Serve(std::optional<TcpPortReservation>* reservation);
  // Registers with the head and heartbeats, in the background.
  void ConnectToHead();
  // Until SIGTERM or SIGINT; then stops serving, kills every worker and
  // reports, each within kShutdownGrace.
  void RunUntilStopped();

 private:
  HeadConnection::Options HeadConnectionOptions();
  WorkerProcessManager::Options WorkerOptions();
  RayletService::Options ServiceOptions();
  uint32_t GpuCount() const { return static_cast<uint32_t>(config_.gpus.devices.size()); }
  absl::Status StartServer();
  absl::Status StartMetrics();
  v1::RegisterNodeRequest Registration() const;

  const Flags& flags_;
  const NodeConfig& config_;
  RayletMetrics metrics_;
  HeadEpochFence fence_;
  const std::shared_ptr<grpc::Channel> head_channel_;
  HeadConnection head_connection_;
  WorkerProcessManager workers_;
  PackageCache packages_;
  RayletService service_;
  int bound_port_ = 0;
  LeftoverSweeper sweeper_;
  std::unique_ptr<NvmlHealth> nvml_;         // WatchHealth's; null without NVML
  std::unique_ptr<NodeHealthWatch> health_;  // WatchHealth's
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::shared_ptr<CallbackCollectable> state_metrics_;
};

NodeAgent::NodeAgent(const Flags& flags, const NodeConfig& config)
    : flags_(flags),
      config_(config),
      metrics_(config.node_id),
      head_channel_(config.tls.MakeChannel(flags.head, TlsRole::kHead, HeadChannelArguments())),
      head_connection_(head_channel_, HeadConnectionOptions()),
      workers_(WorkerOptions()),
      packages_(config.node_dir + "/packages",
                DownloadFromHead(head_channel_, config.cluster_token),
                [this] {
                  std::set<std::string> folders;
                  for (const WorkerRecord& w : workers_.List()) {
                    if (w.state == WorkerState::kRunning) folders.insert(w.cwd);
                  }
                  return folders;
                }),
      service_(ServiceOptions(), BundleReservations(config.reservable, GpuCount()), &workers_),
      sweeper_({config.node_dir + "/work", absl::Seconds(flags.log_retention_s), absl::Seconds(10),
                [this] {
                  std::set<std::string> groups;
                  for (const ReservedBundle& b : service_.Bundles())
                    groups.insert(b.key.placement_group_id);
                  return groups;
                }},
               &workers_) {}

absl::Status NodeAgent::WatchHealth() {
  // NVML only for the GPUs it found (not simulated ones).
  std::string no_nvml = "simulated GPUs";
  if (!flags_.num_gpus) nvml_ = NvmlHealth::Open(&no_nvml);
  NvmlHealth* nvml = nvml_.get();
  LogInfo("GPU health from NVML: ", nvml ? nvml->Describe() : absl::StrCat("none (", no_nvml, ")"),
          "; health file: ", flags_.gpu_health_file.empty() ? "none" : flags_.gpu_health_file,
          "; health check: ",
          flags_.health_check_command.empty() ? "none" : flags_.health_check_command);
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> health = NodeHealthWatch::Start(
      {GpuCount(), flags_.gpu_health_file, config_.node_dir + "/gpu-health.textproto",
       absl::Seconds(1),
       nvml ? std::function<std::vector<GpuFault>()>([nvml] { return nvml->Poll(); }) : nullptr,
       flags_.health_check_command, absl::Seconds(flags_.health_check_interval_s),
       absl::Seconds(flags_.health_check_timeout_s),
       [this](const GpuFault& fault) { metrics_.OnGpuFault(fault); },
       [this] { head_connection_.HeartbeatNow(); }});
  if (!health.ok()) return health.status();
  health_ = *std::move(health);
  return absl::OkStatus();
}

HeadConnection::Options NodeAgent::HeadConnectionOptions() {
  HeadConnection::Options options;
  options.node_id = config_.node_id;
  options.cluster_token = config_.cluster_token;
  options.fence = &fence_;
  return options;
}

WorkerProcessManager::Options NodeAgent::WorkerOptions() {
  WorkerProcessManager::Options options;
  options.log_dir = config_.log_dir;
  options.work_dir_root = config_.node_dir + "/work";
  options.on_exit = [this](const WorkerRecord& record) {
    v1::WorkerStatus status;
    WorkerRecordToProto(record, &status);
    LogInfo("worker ", record.worker_id, " ended: ", v1::WorkerState_Name(status.state()),
            ", exit code ", record.exit_code, ", signal ", record.signal);
    metrics_.OnWorkerExit(record);
    head_connection_.ReportWorkerExit(status);
  };
  options.cgroups = config_.confinement.cgroups.get();
  options.pids_max = flags_.worker_pids_max;
  options.gpu_devices = config_.confinement.gpu_devices;
  return options;
}

RayletService::Options NodeAgent::ServiceOptions() {
  RayletService::Options options;
  options.packages = &packages_;
  options.advertise_host = flags_.advertise_host;
  options.refuse_prepare_file = flags_.refuse_prepare_file;
  options.hold_starts_file = flags_.hold_starts_file;
  options.hold_commits_file = flags_.hold_commits_file;
  options.worker_pythonpath = flags_.worker_pythonpath;
  options.cluster_token = config_.cluster_token;
  options.tls = config_.tls;
  options.fence = &fence_;
  options.return_gpu = [this](uint32_t gpu) { return health_->ReturnGpu(gpu); };
  return options;
}

absl::Status NodeAgent::Serve(std::optional<TcpPortReservation>* reservation) {
  if (absl::Status s = StartServer(); !s.ok()) return s;
  reservation->reset();  // the server holds the port now
  absl::Status status = StartMetrics();
  if (status.ok()) {
    LogInfo("serving RayletService on ", config_.listen.ToString(), ", advertised as ",
            HostPort{flags_.advertise_host, config_.listen.port}.ToString());
    if (!flags_.port_file.empty()) status = WritePortFile(flags_.port_file, bound_port_);
  }
  if (!status.ok()) server_->Shutdown();
  return status;
}

absl::Status NodeAgent::StartServer() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen.ToString(),
                           config_.tls.ServerCredentials(/*require_client_certificate=*/true),
                           &bound_port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot serve on ", config_.listen.ToString()));
  }
  return absl::OkStatus();
}

absl::Status NodeAgent::StartMetrics() {
  state_metrics_ = std::make_shared<CallbackCollectable>([this] {
    std::set<uint32_t> unhealthy;
    for (const v1::UnhealthyGpu& gpu : health_->UnhealthyGpus()) unhealthy.insert(gpu.index());
    return RayletStateFamilies({config_.node_id, config_.accelerator_type, GpuCount(),
                                service_.Bundles(), workers_.List(), std::move(unhealthy),
                                workers_.Usage()});
  });
  if (flags_.metrics_listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<MetricsServer>> started =
      MetricsServer::Start(flags_.metrics_listen);
  if (!started.ok()) return started.status();
  metrics_server_ = *std::move(started);
  metrics_server_->Register(metrics_.registry());
  metrics_server_->Register(state_metrics_);
  LogInfo("serving metrics on port ", metrics_server_->port());
  if (flags_.metrics_port_file.empty()) return absl::OkStatus();
  return WritePortFile(flags_.metrics_port_file, metrics_server_->port());
}

v1::RegisterNodeRequest NodeAgent::Registration() const {
  v1::RegisterNodeRequest registration;
  registration.set_node_id(config_.node_id);
  registration.set_address(HostPort{flags_.advertise_host, config_.listen.port}.ToString());
  if (metrics_server_) {
    registration.set_metrics_address(
        HostPort{flags_.advertise_host, static_cast<uint16_t>(metrics_server_->port())}.ToString());
  }
  ResourceSetToProto(config_.total, registration.mutable_total());
  registration.mutable_labels()->insert(config_.labels.begin(), config_.labels.end());
  for (const GpuDevice& gpu : config_.gpus.devices) {
    v1::GpuInstance* out = registration.add_gpus();
    out->set_index(gpu.index);
    out->set_uuid(gpu.uuid);
    out->set_accelerator_type(gpu.accelerator_type);
    out->set_memory_bytes(gpu.memory_bytes);
  }
  return registration;
}

void NodeAgent::ConnectToHead() {
  head_connection_.Start({
      [this, registration = Registration()] {
        service_.BeginRegistration();
        v1::RegisterNodeRequest now = registration;
        for (v1::UnhealthyGpu& gpu : health_->UnhealthyGpus())
          *now.add_unhealthy_gpus() = std::move(gpu);
        return now;
      },
      [this] { return service_.Available(); },
      [this] { return static_cast<uint32_t>(workers_.RunningCount()); },
      [this](const v1::RegisterNodeResponse& response) {
        // Logged by the service; what it could not restore goes to the head.
        service_.SyncHeldBundles(response.held_bundles()).IgnoreError();
      },
      [this] { return service_.Unrestored(); },
      [this](const std::vector<v1::BundleKey>& keys) { service_.AcknowledgeUnrestored(keys); },
      [this](v1::HeartbeatRequest* heartbeat) {
        for (v1::UnhealthyGpu& gpu : health_->UnhealthyGpus())
          *heartbeat->add_unhealthy_gpus() = std::move(gpu);
        heartbeat->set_health_check_failure(health_->HealthCheckFailure());
      },
  });
}

void NodeAgent::RunUntilStopped() {
  // Blocked in main() before any thread existed.
  const sigset_t stop_signals = StopSignals();
  int received = 0;
  sigwait(&stop_signals, &received);
  LogInfo("received ", strsignal(received), ": shutting down");
  metrics_server_.reset();  // its collectables read the service and the workers
  server_->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
  workers_.StopAll(kShutdownGrace);
  head_connection_.Shutdown(kShutdownGrace);
}

int Run(const Flags& flags) {
  if (absl::Status s = ValidateHeads(flags.head); !s.ok()) return Fail(s);
  absl::StatusOr<HostPort> listen = ParseHostPort(flags.listen, "--listen");
  if (!listen.ok()) return Fail(listen.status());
  // Known before the server starts: the default node id and log dir need it.
  std::optional<TcpPortReservation> reservation;
  {
    absl::StatusOr<TcpPortReservation> reserved =
        TcpPortReservation::Reserve(listen->host, listen->port);
    if (!reserved.ok()) return Fail(reserved.status());
    reservation.emplace(*std::move(reserved));
  }
  listen->port = reservation->port();
  absl::StatusOr<NodeConfig> config = LoadNodeConfig(flags, *listen);
  if (!config.ok()) return Fail(config.status());
  config->confinement = ConfineWorkers({flags.cgroups, config->node_id, config->node_dir,
                                        &config->gpus.devices, flags.num_gpus.has_value()});
  config->labels[std::string(kConfinementLabel)] = config->confinement.label;

  NodeAgent node(flags, *config);
  if (absl::Status s = node.WatchHealth(); !s.ok()) return Fail(s);
  if (absl::Status s = node.Serve(&reservation); !s.ok()) return Fail(s);
  node.ConnectToHead();
  node.RunUntilStopped();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  // Lock-order cycle detection is a debugging aid (TSan runs cover it);
  // Debian's Abseil leaves it on, at a cost on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Blocked in every thread (threads inherit the mask) and taken by sigwait
  // in NodeAgent::RunUntilStopped; workers unblock them before exec.
  const sigset_t stop_signals = berth::StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  berth::Flags flags;
  CLI::App app{"berth-raylet: the berth node agent"};
  berth::AddRayletFlags(app, &flags);
  const berth::LogFlag log_flag(app);
  berth::AddVersionFlag(app, "berth-raylet");
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-raylet");
  return berth::Run(flags);
}
