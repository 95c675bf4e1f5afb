// berth-raylet: the node agent. Serves RayletService for the head, registers
// and heartbeats with the head's NodeService, and runs worker processes.
// SIGTERM / SIGINT: stop serving, kill every worker, report, exit 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
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

// berth's worker-side Python package for this binary: lib/berth/python of
// an install (bin/berth-raylet), else the build tree's python/ (the build
// copies it there); "" when neither has it.
std::string DefaultWorkerPythonPath() {
  return FindBesideBinary({"../lib/berth/python", "../python"}, "berth/train/__init__.py")
      .value_or("");
}

struct Flags {
  std::string head;
  std::string listen = "127.0.0.1:0";
  std::string advertise_host = "127.0.0.1";
  std::string port_file;
  std::string node_id;
  std::string num_cpus;
  std::string memory;
  std::optional<uint32_t> num_gpus;
  std::string accelerator_type;
  std::string resources;
  std::string labels;
  std::string log_dir;
  std::string refuse_prepare_file;
  std::string hold_starts_file;
  std::string hold_commits_file;
  std::string worker_pythonpath = DefaultWorkerPythonPath();
  std::string node_pool;
  std::string token_file;
  TlsFiles tls;
  std::string metrics_listen;
  std::string metrics_port_file;
};

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
    if (name == kCpu || name == kGpu || name == kMemory ||
        absl::StartsWith(name, kAcceleratorResourcePrefix)) {
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

int Run(const Flags& flags) {
  // One head, or the active head and its standbys (common/head_addresses.h).
  const std::vector<std::string> heads = SplitHeadAddresses(flags.head);
  if (heads.empty()) return Fail(absl::InvalidArgumentError("--head: empty"));
  for (const std::string& address : heads) {
    if (absl::StatusOr<HostPort> head = ParseHostPort(address, "--head"); !head.ok())
      return Fail(head.status());
  }
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

  const std::string node_id =
      flags.node_id.empty() ? absl::StrCat(HostName(), "-", listen->port) : flags.node_id;
  if (absl::Status s = ValidateString(node_id, "--node-id", 256, true); !s.ok()) return Fail(s);
  const std::string node_dir = absl::StrCat("/tmp/berth/", node_id);
  const std::string log_dir = flags.log_dir.empty() ? node_dir + "/logs" : flags.log_dir;

  absl::StatusOr<Quantity> cpus = CpuCount(flags.num_cpus);
  if (!cpus.ok()) return Fail(cpus.status());
  absl::StatusOr<Quantity> memory = MemoryBytes(flags.memory);
  if (!memory.ok()) return Fail(memory.status());
  absl::StatusOr<ResourceSet> custom = CustomResources(flags.resources);
  if (!custom.ok()) return Fail(custom.status());
  absl::StatusOr<Labels> labels = NodeLabels(flags.labels);
  if (!labels.ok()) return Fail(labels.status());
  if (!flags.node_pool.empty()) {
    if (absl::Status s = ValidateLabelValue(flags.node_pool, "--node-pool"); !s.ok())
      return Fail(s);
    (*labels)[std::string(kNodePoolLabel)] = flags.node_pool;
  }
  if (!flags.accelerator_type.empty()) {
    if (absl::Status s = ValidateLabelValue(flags.accelerator_type, "--accelerator-type");
        !s.ok()) {
      return Fail(s);
    }
  }

  const DiscoveredGpus gpus = DiscoverGpus({flags.num_gpus, flags.accelerator_type, node_id});
  const std::string accelerator_type =
      gpus.devices.empty() ? "" : gpus.devices.front().accelerator_type;
  ResourceSet total = *custom;
  total.Set(kCpu, *cpus);
  total.Set(kMemory, *memory);
  total.Set(kGpu, Quantity::Whole(static_cast<int64_t>(gpus.devices.size())));
  // Bundles asking for accelerator_type:<T> reserve from it here as on the
  // head, though only the head announces it.
  ResourceSet reservable = total;
  if (!accelerator_type.empty())
    reservable.Set(AcceleratorResourceName(accelerator_type), Quantity::Whole(1));
  LogInfo("node ", node_id, ": ", total.ToString(), ", GPUs ", gpus.source,
          accelerator_type.empty() ? "" : absl::StrCat(", accelerator type ", accelerator_type),
          ", logs in ", log_dir);

  std::string cluster_token;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClusterToken(flags.token_file, "--token-file");
    if (!token.ok()) return Fail(token.status());
    cluster_token = *token;
  }
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(flags.tls, /*need_certificate=*/true);
  if (!tls.ok()) return Fail(tls.status());
  RayletMetrics metrics(node_id);
  HeadConnection::Options connection_options;
  connection_options.node_id = node_id;
  connection_options.cluster_token = cluster_token;
  HeadEpochFence fence;
  connection_options.fence = &fence;
  const std::shared_ptr<grpc::Channel> head_channel =
      tls->MakeChannel(flags.head, TlsRole::kHead, HeadChannelArguments());
  HeadConnection head_connection(head_channel, connection_options);
  WorkerProcessManager workers(
      {log_dir, node_dir + "/work", [&](const WorkerRecord& record) {
         v1::WorkerStatus status;
         WorkerRecordToProto(record, &status);
         LogInfo("worker ", record.worker_id, " ended: ", v1::WorkerState_Name(status.state()),
                 ", exit code ", record.exit_code, ", signal ", record.signal);
         metrics.OnWorkerExit(record);
         head_connection.ReportWorkerExit(status);
       }});
  PackageCache packages(node_dir + "/packages", DownloadFromHead(head_channel, cluster_token), [&] {
    std::set<std::string> folders;
    for (const WorkerRecord& w : workers.List()) {
      if (w.state == WorkerState::kRunning) folders.insert(w.cwd);
    }
    return folders;
  });
  RayletService::Options service_options;
  service_options.packages = &packages;
  service_options.advertise_host = flags.advertise_host;
  service_options.refuse_prepare_file = flags.refuse_prepare_file;
  service_options.hold_starts_file = flags.hold_starts_file;
  service_options.hold_commits_file = flags.hold_commits_file;
  service_options.worker_pythonpath = flags.worker_pythonpath;
  service_options.cluster_token = cluster_token;
  service_options.tls = *tls;
  service_options.fence = &fence;
  RayletService service(service_options,
                        BundleReservations(reservable, static_cast<uint32_t>(gpus.devices.size())),
                        &workers);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(
      listen->ToString(), tls->ServerCredentials(/*require_client_certificate=*/true), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return Fail(
        absl::UnavailableError(absl::StrCat("--listen: cannot serve on ", listen->ToString())));
  }
  reservation.reset();  // the server holds the port now
  std::unique_ptr<MetricsServer> metrics_server;
  auto state_metrics = std::make_shared<CallbackCollectable>([&] {
    return RayletStateFamilies({node_id, accelerator_type,
                                static_cast<uint32_t>(gpus.devices.size()), service.Bundles(),
                                workers.List()});
  });
  if (!flags.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(flags.metrics_listen);
    if (!started.ok()) {
      server->Shutdown();
      return Fail(started.status());
    }
    metrics_server = *std::move(started);
    metrics_server->Register(metrics.registry());
    metrics_server->Register(state_metrics);
    LogInfo("serving metrics on port ", metrics_server->port());
    if (!flags.metrics_port_file.empty()) {
      if (absl::Status s = WritePortFile(flags.metrics_port_file, metrics_server->port());
          !s.ok()) {
        server->Shutdown();
        return Fail(s);
      }
    }
  }
  const std::string address = HostPort{flags.advertise_host, listen->port}.ToString();
  LogInfo("serving RayletService on ", listen->ToString(), ", advertised as ", address);
  if (!flags.port_file.empty()) {
    if (absl::Status s = WritePortFile(flags.port_file, bound_port); !s.ok()) {
      server->Shutdown();
      return Fail(s);
    }
  }

  v1::RegisterNodeRequest registration;
  registration.set_node_id(node_id);
  registration.set_address(address);
  if (metrics_server) {
    registration.set_metrics_address(
        HostPort{flags.advertise_host, static_cast<uint16_t>(metrics_server->port())}.ToString());
  }
  ResourceSetToProto(total, registration.mutable_total());
  registration.mutable_labels()->insert(labels->begin(), labels->end());
  for (const GpuDevice& gpu : gpus.devices) {
    v1::GpuInstance* out = registration.add_gpus();
    out->set_index(gpu.index);
    out->set_uuid(gpu.uuid);
    out->set_accelerator_type(gpu.accelerator_type);
    out->set_memory_bytes(gpu.memory_bytes);
  }
  head_connection.Start({
      [&registration, &service] {
        service.BeginRegistration();
        return registration;
      },
      [&service] { return service.Available(); },
      [&workers] { return static_cast<uint32_t>(workers.RunningCount()); },
      [&service](const v1::RegisterNodeResponse& response) {
        // Logged by the service; what it could not restore goes to the head.
        service.SyncHeldBundles(response.held_bundles()).IgnoreError();
      },
      [&service] { return service.Unrestored(); },
      [&service](const std::vector<v1::BundleKey>& keys) { service.AcknowledgeUnrestored(keys); },
  });

  // SIGTERM / SIGINT were blocked in main() before any thread existed.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  int received = 0;
  sigwait(&stop_signals, &received);
  LogInfo("received ", strsignal(received), ": shutting down");
  metrics_server.reset();  // its collectables read the service and the workers
  server->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
  workers.StopAll(kShutdownGrace);
  head_connection.Shutdown(kShutdownGrace);
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
  // in Run; workers unblock them before exec.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  berth::Flags flags;
  CLI::App app{"berth-raylet: the berth node agent"};
  app.add_option("--head", flags.head,
                 "head address, HOST:PORT, or the active head and its standbys, "
                 "HOST:PORT,HOST:PORT (the node follows whichever is active)")
      ->required();
  app.add_option("--listen", flags.listen, "address to serve RayletService on")
      ->capture_default_str();
  app.add_option("--advertise-host", flags.advertise_host,
                 "host the head and other nodes reach this node at")
      ->capture_default_str();
  app.add_option("--port-file", flags.port_file, "write the bound port here once serving");
  app.add_option("--node-id", flags.node_id, "node id (default: <hostname>-<port>)");
  app.add_option("--num-cpus", flags.num_cpus, "logical CPUs (default: hardware concurrency)");
  app.add_option("--memory", flags.memory, "memory in bytes, e.g. 16Gi (default: physical memory)");
  app.add_option("--num-gpus", flags.num_gpus, "simulate this many GPUs instead of asking NVML");
  app.add_option("--accelerator-type", flags.accelerator_type,
                 "accelerator type of the GPUs, e.g. A10G (overrides NVML's)");
  app.add_option("--resources", flags.resources, "custom resources, name=qty,name=qty");
  app.add_option("--labels", flags.labels, "node labels, k=v,k=v");
  app.add_option("--log-dir", flags.log_dir, "worker logs (default: /tmp/berth/<node-id>/logs)");
  AddTlsFlags(app, flags.tls, "berth-node");
  app.add_option(
      "--token-file", flags.token_file,
      "cluster token: required on every RPC to this raylet, sent on every call to the head");
  app.add_option("--node-pool", flags.node_pool,
                 "autoscaler node pool of this node (label berth.io/node-pool)");
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "serve Prometheus /metrics on HOST:PORT (port 0 picks one); empty = off");
  app.add_option("--metrics-port-file", flags.metrics_port_file,
                 "write the bound metrics port here");
  app.add_option("--refuse-prepare-file", flags.refuse_prepare_file,
                 "test hook: refuse every prepare while this file exists");
  app.add_option("--hold-starts-file", flags.hold_starts_file,
                 "test hook: StartWorker waits while this file exists");
  app.add_option("--worker-pythonpath", flags.worker_pythonpath,
                 "folder of berth's worker-side Python package (berth.train), added to every "
                 "worker's PYTHONPATH (default: lib/berth/python of an install, or the build's "
                 "python/); empty = none");
  app.add_option("--hold-commits-file", flags.hold_commits_file,
                 "test hook: commits wait while this file exists (30 s at most)");
  const berth::LogFlag log_flag(app);
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-raylet");
  return berth::Run(flags);
}
