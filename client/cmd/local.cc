// berth up, down, start: a cluster's processes on this machine, started
// and stopped without a head to ask.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "auth/cluster_token.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "client/local_cluster.h"
#include "client/local_etcd.h"
#include "common/files.h"
#include "common/head_addresses.h"
#include "common/processes.h"

namespace berth {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kStopGrace = absl::Seconds(5);

int LocalError(const absl::Status& status) {
  std::cerr << "berth: " << status.message() << "\n";
  return kExitHeadError;
}

// The processes and files of this machine's cluster, and where the
// binaries that run them are.
struct Local {
  std::string dir = StateDir();
  std::string state_file = StateFilePath(dir);
  std::string log_dir = (std::filesystem::path(dir) / "logs").string();

  absl::StatusOr<std::string> Binary(const std::string& name, const std::string& build_subdir) {
    std::error_code error;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
    const char* path = std::getenv("PATH");
    return FindBinary(name, build_subdir, self, path == nullptr ? "" : path);
  }

  // Starts `name` (role `role`) in the background and records it in `state`
  // and the state file, so that `berth down` stops it even if the rest fails.
  absl::StatusOr<LocalProcess> Spawn(LocalState& state, const std::string& role,
                                     const std::string& name, const std::string& binary,
                                     const std::vector<std::string>& args) {
    LocalProcess process{role, name, 0, binary, absl::StrCat(log_dir, "/", name, ".log")};
    absl::StatusOr<pid_t> pid = SpawnDaemon(binary, args, process.log);
    if (!pid.ok()) return pid.status();
    process.pid = *pid;
    process.start_ticks = ProcessStartTicks(*pid).value_or(0);
    state.processes.push_back(process);
    if (absl::Status written = WriteStateFile(state_file, state); !written.ok()) return written;
    return process;
  }
};

// Why `process` is no longer running, with the end of its log.
absl::Status Exited(const LocalProcess& process) {
  return absl::FailedPreconditionError(absl::StrCat(process.name, " (pid ", process.pid,
                                                    ") exited; the end of ", process.log, ":\n",
                                                    LogTail(process.log, 10)));
}

// Waits until `process` wrote its port to `port_file` (it serves then).
absl::StatusOr<std::string> WaitForPort(const LocalProcess& process, const std::string& port_file) {
  const absl::Time deadline = absl::Now() + kStartTimeout;
  for (;;) {
    std::ifstream in(port_file);
    std::string port;
    if (in >> port) return port;
    if (!IsRunning(process)) return Exited(process);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(process.name, " is not serving after ",
                                                      absl::FormatDuration(kStartTimeout), "; see ",
                                                      process.log));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// Where the local head keeps its state: a head started again after a crash
// (`berth start --head`) continues the cluster; `up` and `down` clear it.
std::string HeadStateDir(const Local& local) { return absl::StrCat(local.dir, "/head-state"); }

// Starts a head named `name` listening on host:port (port 0 = any free
// one) and returns its address once it serves (as the active head, or as a
// standby of the head that holds the state). `heads` is every head of the
// cluster, for the trainers; empty = this one. `store`: the heads'
// --state-store; empty = the local state folder.
absl::StatusOr<std::string> StartHead(Local& local, LocalState& state, const std::string& host,
                                      int port, const std::string& name = "head",
                                      const std::string& heads = "",
                                      const std::string& store = "") {
  absl::StatusOr<std::string> head = local.Binary("berth-head", "scheduler");
  if (!head.ok()) return head.status();
  absl::StatusOr<std::string> worker = local.Binary("berth-worker", "worker");
  if (!worker.ok()) return worker.status();
  absl::StatusOr<std::string> relay = local.Binary("berth-relay", "worker");
  if (!relay.ok()) return relay.status();
  const std::string port_file = absl::StrCat(local.dir, "/", name, ".port");
  std::filesystem::remove(port_file);
  // Secure by default: every RPC of the local cluster carries this token.
  if (access(LocalTokenPath().c_str(), F_OK) != 0) {
    std::error_code ignored;
    std::filesystem::create_directories(local.dir, ignored);
    if (absl::StatusOr<std::string> token = CreateClusterToken(LocalTokenPath()); !token.ok())
      return token.status();
  }
  // And TLS: a CA of its own and certificates for the head, the nodes and
  // clients (mutual TLS between the head and the raylets).
  const TlsFiles head_tls = ClusterTlsFiles(LocalTlsDir(), TlsRole::kHead);
  if (access(head_tls.ca_file.c_str(), F_OK) != 0) {
    std::vector<std::string> hosts;
    if (host != "127.0.0.1" && host != "localhost") hosts.push_back(host);
    if (absl::Status s = CreateClusterCertificates(LocalTlsDir(), hosts); !s.ok()) return s;
  }
  std::vector<std::string> flags = {"--listen",
                                    absl::StrCat(host, ":", port),
                                    "--port-file",
                                    port_file,
                                    "--worker-binary",
                                    *worker,
                                    "--relay-binary",
                                    *relay,
                                    "--checkpoint-root",
                                    absl::StrCat(local.dir, "/checkpoints"),
                                    "--metrics-listen",
                                    absl::StrCat(host, ":0"),
                                    store.empty() ? "--state-dir" : "--state-store",
                                    store.empty() ? HeadStateDir(local) : store,
                                    "--token-file",
                                    LocalTokenPath(),
                                    "--tls-ca-file",
                                    head_tls.ca_file,
                                    "--tls-cert-file",
                                    head_tls.cert_file,
                                    "--tls-key-file",
                                    head_tls.key_file};
  if (!heads.empty()) flags.insert(flags.end(), {"--heads", heads});
  absl::StatusOr<LocalProcess> process = local.Spawn(state, "head", name, *head, flags);
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> bound = WaitForPort(*process, port_file);
  if (!bound.ok()) return bound.status();
  const std::string address = absl::StrCat(host, ":", *bound);
  state.head_address = heads.empty() ? address : absl::StrJoin(SplitHeadAddresses(heads), ",");
  if (absl::Status written = WriteStateFile(local.state_file, state); !written.ok()) return written;
  return address;
}

absl::StatusOr<LocalProcess> StartRaylet(Local& local, LocalState& state,
                                         const std::string& head_address, const std::string& name,
                                         std::vector<std::string> flags,
                                         const std::string& metrics_listen = "127.0.0.1:0") {
  absl::StatusOr<std::string> raylet = local.Binary("berth-raylet", "raylet");
  if (!raylet.ok()) return raylet.status();
  if (access(LocalTokenPath().c_str(), F_OK) == 0)
    flags.insert(flags.end(), {"--token-file", LocalTokenPath()});
  const TlsFiles tls = ClusterTlsFiles(LocalTlsDir(), TlsRole::kNode);
  if (access(tls.ca_file.c_str(), F_OK) == 0) {
    flags.insert(flags.end(), {"--tls-ca-file", tls.ca_file, "--tls-cert-file", tls.cert_file,
                               "--tls-key-file", tls.key_file});
  }
  // The node's work folders and packages stay in this cluster's folder.
  flags.insert(
      flags.end(),
      {"--head", head_address, "--state-dir", absl::StrCat(local.dir, "/nodes/", name), "--log-dir",
       absl::StrCat(local.log_dir, "/workers/", name), "--metrics-listen", metrics_listen});
  return local.Spawn(state, "raylet", name, *raylet, flags);
}

// The local state, or an error when any of its processes still runs.
absl::StatusOr<LocalState> NotRunning(const Local& local, absl::string_view what) {
  absl::StatusOr<std::optional<LocalState>> state = ReadStateFile(local.state_file);
  if (!state.ok()) return state.status();
  if (!state->has_value()) return LocalState{};
  for (const LocalProcess& p : (*state)->processes) {
    if (IsRunning(p) && (what.empty() || p.role == what)) {
      return absl::FailedPreconditionError(
          absl::StrCat("a local cluster is already running (", p.name, ", pid ", p.pid,
                       (*state)->head_address.empty() ? "" : ", head at " + (*state)->head_address,
                       "; state in ", local.state_file, "); `berth down` stops it"));
    }
  }
  // Left over from a cluster that is gone: start afresh, keep the address
  // of a head still recorded for `start --address`.
  return **state;
}

// Waits until the head at `address` lists every node of `ids` ALIVE.
absl::StatusOr<v1::ListNodesResponse> WaitForNodes(const LocalState& state,
                                                   const std::vector<std::string>& ids) {
  absl::StatusOr<HeadClientOptions> options = ResolveClientOptions("", {});
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<HeadClient>> client =
      HeadClient::Create(state.head_address, *options);
  if (!client.ok()) return client.status();
  const absl::Time deadline = absl::Now() + kStartTimeout;
  for (;;) {
    for (const LocalProcess& p : state.processes) {
      if (!IsRunning(p)) return Exited(p);
    }
    absl::StatusOr<v1::ListNodesResponse> nodes = (*client)->ListNodes();
    std::vector<std::string> missing = ids;
    if (nodes.ok()) {
      for (const v1::NodeInfo& node : nodes->nodes()) {
        if (node.state() == v1::NODE_STATE_ALIVE) {
          missing.erase(std::remove(missing.begin(), missing.end(), node.node_id()), missing.end());
        }
      }
      if (missing.empty()) return nodes;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("nodes not ALIVE after ", absl::FormatDuration(kStartTimeout), ": ",
                       absl::StrJoin(missing, ", "), "; logs in ", state.log_dir));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// Where `berth up --state-store etcd` keeps its members' data.
std::string EtcdDataDir(const Local& local) { return absl::StrCat(local.dir, "/etcd"); }

// Stops every process of `state`, raylets first so that they can still
// report to the head, then the heads, then the etcd members that keep the
// heads' state, and removes the state file.
void StopLocal(const Local& local, const LocalState& state) {
  std::vector<LocalProcess> raylets, heads, etcd;
  for (const LocalProcess& p : state.processes) {
    (p.role == "head" ? heads : p.role == "etcd" ? etcd : raylets).push_back(p);
  }
  StopProcesses(raylets, kStopGrace);
  StopProcesses(heads, kStopGrace);
  StopProcesses(etcd, kStopGrace);
  std::filesystem::remove(local.state_file);
  std::error_code ignored;
  std::filesystem::remove_all(HeadStateDir(local), ignored);
  std::filesystem::remove_all(EtcdDataDir(local), ignored);
  std::filesystem::remove(LocalTokenPath(), ignored);
  std::filesystem::remove_all(LocalTlsDir(), ignored);
}

struct UpFlags {
  int nodes = 2;
  int gpus_per_node = 4;
  std::string accelerator_type = "A10G";
  std::string cpus_per_node = "8";
  std::string memory_per_node = "32Gi";
  std::string node_spec;
  int port = 6380;
  int heads = 1;
  std::string state_store;
  std::string cgroups;
};

// Starts a 3-member etcd on loopback for the heads (`up --state-store
// etcd`); the --state-store they are given.
absl::StatusOr<std::string> StartLocalEtcd(Local& local, LocalState& state) {
  const char* path = std::getenv("PATH");
  absl::StatusOr<std::string> etcd = FindBinary("etcd", "", "", path == nullptr ? "" : path);
  if (!etcd.ok()) {
    return absl::FailedPreconditionError(
        "--state-store etcd: needs etcd on PATH (Debian: apt install etcd-server)");
  }
  absl::StatusOr<std::vector<EtcdMember>> members = PlanLocalEtcd(EtcdDataDir(local), 3);
  if (!members.ok()) return members.status();
  std::vector<LocalProcess> started;
  for (const EtcdMember& member : *members) {
    absl::StatusOr<LocalProcess> process =
        local.Spawn(state, "etcd", member.name, *etcd, member.flags);
    if (!process.ok()) return process.status();
    started.push_back(*process);
  }
  absl::Status healthy = WaitForEtcd(
      *members,
      [&](size_t i) { return IsRunning(started[i]) ? absl::OkStatus() : Exited(started[i]); },
      kStartTimeout);
  if (!healthy.ok()) return healthy;
  return EtcdStoreUrl(*members);
}

int RunUp(const Globals& globals, const UpFlags& flags) {
  std::vector<NodeSpec> specs;
  if (!flags.node_spec.empty()) {
    absl::StatusOr<std::vector<NodeSpec>> loaded = LoadNodeSpecFile(flags.node_spec);
    if (!loaded.ok()) {
      return UsageError(
          absl::InvalidArgumentError(absl::StrCat("--node-spec: ", loaded.status().message())));
    }
    specs = *std::move(loaded);
  } else {
    specs.push_back({"node",
                     flags.gpus_per_node,
                     flags.accelerator_type,
                     flags.cpus_per_node,
                     flags.memory_per_node,
                     {},
                     flags.nodes});
  }
  Local local;
  absl::StatusOr<LocalState> state = NotRunning(local, "");
  if (!state.ok()) return LocalError(state.status());
  *state = LocalState{};
  state->log_dir = local.log_dir;
  std::error_code ignored;
  std::filesystem::remove_all(HeadStateDir(local), ignored);  // a new cluster
  std::filesystem::remove_all(EtcdDataDir(local), ignored);

  // On any failure nothing is left running.
  auto fail = [&](const absl::Status& status) {
    StopLocal(local, *state);
    return LocalError(status);
  };
  if (flags.heads > 1 && flags.port == 0) {
    return UsageError(absl::InvalidArgumentError(
        "--heads: needs a fixed --port (the heads take PORT, PORT+1, ...)"));
  }
  std::string store = flags.state_store;
  if (store == "etcd") {
    absl::StatusOr<std::string> etcd = StartLocalEtcd(local, *state);
    if (!etcd.ok()) return fail(etcd.status());
    store = *etcd;
  }
  // The first head is active; the others stand by on the same state and
  // take over when it is gone.
  std::vector<std::string> head_addresses;
  for (int i = 0; i < flags.heads; ++i)
    head_addresses.push_back(absl::StrCat("127.0.0.1:", flags.port + i));
  const std::string heads = flags.heads > 1 ? absl::StrJoin(head_addresses, ",") : "";
  for (int i = 0; i < flags.heads; ++i) {
    absl::StatusOr<std::string> started =
        StartHead(local, *state, "127.0.0.1", flags.port == 0 ? 0 : flags.port + i,
                  i == 0 ? "head" : absl::StrCat("head-", i + 1), heads, store);
    if (!started.ok()) return fail(started.status());
  }
  const std::string address = state->head_address;
  std::vector<std::string> ids;
  for (const auto& [id, spec] : ExpandNodes(specs)) {
    std::vector<std::string> raylet_flags = RayletFlags(id, spec);
    if (!flags.cgroups.empty())
      raylet_flags.insert(raylet_flags.end(), {"--cgroups", flags.cgroups});
    absl::StatusOr<LocalProcess> raylet = StartRaylet(local, *state, address, id, raylet_flags);
    if (!raylet.ok()) return fail(raylet.status());
    ids.push_back(id);
  }
  absl::StatusOr<v1::ListNodesResponse> nodes = WaitForNodes(*state, ids);
  if (!nodes.ok()) return fail(nodes.status());
  if (globals.json) return PrintJson(*nodes);
  std::cout << (flags.heads > 1 ? "heads: " : "head:  ") << address << "\nlogs:  " << local.log_dir
            << "\n\n"
            << FormatNodes(*nodes) << "\nstop with `berth down`\n";
  return kExitOk;
}

int RunDown(const Globals&, const NoFlags&) {
  Local local;
  absl::StatusOr<std::optional<LocalState>> state = ReadStateFile(local.state_file);
  if (!state.ok()) return LocalError(state.status());
  if (!state->has_value()) {
    std::cout << "no local cluster (no " << local.state_file << ")\n";
    return kExitOk;
  }
  StopLocal(local, **state);
  for (const LocalProcess& p : (*state)->processes) {
    std::cout << "stopped " << p.role << " " << p.name << " (pid " << p.pid << ")\n";
  }
  return kExitOk;
}

struct StartFlags {
  CLI::Option* head = nullptr;  // count() > 0: start a head
  int port = 6380;
  std::string listen = "127.0.0.1";
  std::string address;  // start a raylet of this head
  CLI::Option* num_gpus = nullptr;
  int num_gpus_value = 0;
  std::string accelerator_type;
  std::string resources;
  std::string labels;
  std::string node_id;
  std::string node_pool;
  std::string metrics_listen = "127.0.0.1:0";
  std::string gpu_health_file;
  std::string health_check_command;
  std::string cgroups;
};

int RunStart(const Globals&, const StartFlags& flags) {
  const bool head = flags.head->count() > 0;
  if (head == !flags.address.empty()) {
    return UsageError(absl::InvalidArgumentError("start: give either --head or --address"));
  }
  Local local;
  absl::StatusOr<LocalState> state = NotRunning(local, head ? "head" : "");
  // Raylets join a running cluster; only a second head is refused.
  if (!state.ok() && head) return LocalError(state.status());
  if (!state.ok()) {
    absl::StatusOr<std::optional<LocalState>> read = ReadStateFile(local.state_file);
    if (!read.ok()) return LocalError(read.status());
    state = read->value_or(LocalState{});
  }
  // A head started where a cluster's raylets still run continues it from
  // the head's state; otherwise it starts afresh.
  if (head && std::none_of(state->processes.begin(), state->processes.end(), IsRunning)) {
    std::error_code ignored;
    std::filesystem::remove_all(HeadStateDir(local), ignored);
  }
  state->log_dir = local.log_dir;
  if (head) {
    absl::StatusOr<std::string> address = StartHead(local, *state, flags.listen, flags.port);
    if (!address.ok()) return LocalError(address.status());
    std::cout << "head listening at " << *address << " (log " << state->processes.back().log
              << ")\njoin with `berth start --address " << *address << "`\n";
    return kExitOk;
  }
  std::vector<std::string> raylet_flags;
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) raylet_flags.insert(raylet_flags.end(), {flag, value});
  };
  add("--node-id", flags.node_id);
  if (flags.num_gpus->count() > 0) add("--num-gpus", absl::StrCat(flags.num_gpus_value));
  add("--accelerator-type", flags.accelerator_type);
  add("--resources", flags.resources);
  add("--labels", flags.labels);
  add("--node-pool", flags.node_pool);
  // The raylet runs elsewhere than the caller's directory.
  if (!flags.gpu_health_file.empty())
    add("--gpu-health-file", std::filesystem::absolute(flags.gpu_health_file).string());
  add("--health-check-command", flags.health_check_command);
  add("--cgroups", flags.cgroups);
  const std::string name =
      flags.node_id.empty() ? absl::StrCat("raylet-", state->processes.size()) : flags.node_id;
  absl::StatusOr<LocalProcess> raylet =
      StartRaylet(local, *state, flags.address, name, raylet_flags, flags.metrics_listen);
  if (!raylet.ok()) return LocalError(raylet.status());
  std::cout << "raylet " << name << " (pid " << raylet->pid << ") joining " << flags.address
            << " (log " << raylet->log << ")\n";
  return kExitOk;
}

}  // namespace

void AddLocalCommands(CLI::App& app, Action* action) {
  auto up = std::make_shared<UpFlags>();
  CLI::App* up_cmd = app.add_subcommand(
      "up", "Start a head and raylets with simulated GPUs on this machine; stop with `berth down`");
  up_cmd->add_option("--nodes", up->nodes, "Number of raylets")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  up_cmd->add_option("--gpus-per-node", up->gpus_per_node, "Simulated GPUs of each node")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  up_cmd->add_option("--accelerator-type", up->accelerator_type, "GPU model of every node")
      ->capture_default_str();
  up_cmd->add_option("--cpus-per-node", up->cpus_per_node, "Logical CPUs of each node")
      ->capture_default_str();
  up_cmd->add_option("--memory-per-node", up->memory_per_node, "Memory of each node, e.g. 32Gi")
      ->capture_default_str();
  up_cmd->add_option("--node-spec", up->node_spec,
                     "YAML list of nodes (name, gpus, accelerator_type, cpus, memory, labels, "
                     "count) instead of --nodes and the per-node flags");
  up_cmd->add_option("--port", up->port, "Head port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  up_cmd
      ->add_option("--heads", up->heads,
                   "Heads on one state: the first active, the others standbys on PORT+1, ... "
                   "that take over within a second when it dies")
      ->check(CLI::Range(1, 5))
      ->capture_default_str();
  up_cmd
      ->add_option("--cgroups", up->cgroups,
                   "Confine each worker to its bundle with cgroups (auto: where the node allows "
                   "it, as root) or not (off, the raylets' default)")
      ->check(CLI::IsMember({"auto", "off"}));
  up_cmd->add_option("--state-store", up->state_store,
                     "Where the heads keep their state: etcd (a 3-member etcd started here, as "
                     "heads on several machines would use one), etcd://HOST:PORT,..., "
                     "redis://HOST:PORT (default: a folder under BERTH_HOME)");
  OnChosenLocal(up_cmd, action, up, RunUp);

  OnChosenLocal(app.add_subcommand(
                    "down", "Stop the head and raylets that `berth up` and `berth start` started"),
                action, std::make_shared<NoFlags>(), RunDown);

  auto start = std::make_shared<StartFlags>();
  CLI::App* start_cmd = app.add_subcommand(
      "start", "Start one head (--head) or one raylet (--address) in the background here");
  start->head = start_cmd->add_flag("--head", "Start a head");
  start_cmd->add_option("--port", start->port, "With --head: port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  start_cmd->add_option("--listen", start->listen, "With --head: host to listen on")
      ->capture_default_str();
  start_cmd->add_option("--address", start->address, "Start a raylet of the head at HOST:PORT");
  start->num_gpus = start_cmd->add_option("--num-gpus", start->num_gpus_value,
                                          "Simulate N GPUs (default: the GPUs NVML finds)");
  start_cmd->add_option("--accelerator-type", start->accelerator_type,
                        "GPU model, e.g. A10G (default: NVML's)");
  start_cmd->add_option("--resources", start->resources, "Custom resources, name=qty,name=qty");
  start_cmd->add_option("--labels", start->labels, "Node labels, k=v,k=v");
  start_cmd->add_option("--node-id", start->node_id, "Node id (default: <hostname>-<port>)");
  start_cmd->add_option("--node-pool", start->node_pool, "Autoscaler node pool of the raylet");
  start_cmd->add_option("--gpu-health-file", start->gpu_health_file,
                        "With --address: GPU faults an external checker appends (berth-raylet's "
                        "--gpu-health-file)");
  start_cmd->add_option("--health-check-command", start->health_check_command,
                        "With --address: the node's health check (berth-raylet's "
                        "--health-check-command)");
  start_cmd
      ->add_option("--cgroups", start->cgroups,
                   "With --address: confine each worker to its bundle with cgroups (auto: where "
                   "the node allows it, as root) or not (off, the raylet's default)")
      ->check(CLI::IsMember({"auto", "off"}));
  start_cmd
      ->add_option("--metrics-listen", start->metrics_listen,
                   "With --address: the raylet's /metrics address (0.0.0.0:9465 to be scraped from "
                   "elsewhere)")
      ->capture_default_str();
  OnChosenLocal(start_cmd, action, start, RunStart);
}

}  // namespace berth
