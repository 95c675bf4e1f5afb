// LocalCluster: a real berth cluster for integration tests: one berth-head
// and any number of berth-raylet processes on 127.0.0.1, on ephemeral
// ports, with stubs to talk to them. Every process is killed when the
// cluster goes out of scope.
#ifndef BERTH_TESTS_INTEGRATION_LOCAL_CLUSTER_H_
#define BERTH_TESTS_INTEGRATION_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "berth/v1/head.grpc.pb.h"
#include "berth/v1/raylet.grpc.pb.h"

namespace berth::testing {

// A child process with its output in a log file.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits for the process to exit; returns its wait status.
  int Wait();
  // Waits up to `timeout`; its wait status, or nullopt if it still runs.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

struct RayletOptions {
  std::string node_id;
  int num_gpus = 0;
  std::string accelerator_type;
  int num_cpus = 8;
  std::string memory = "32Gi";
  std::string labels;                    // "k=v,k=v"
  std::vector<std::string> extra_flags;  // e.g. --refuse-prepare-file
  std::string host = "127.0.0.1";        // listens and is reached here
  std::string netns;                     // run inside this network namespace
};

class LocalCluster {
 public:
  // 2 s at the default period. With 5 (500 ms), a CI machine loaded by
  // parallel tests importing torch stalled a live node past the timeout and
  // a running job lost its bundles.
  static constexpr int kHeartbeatMisses = 20;

  // Heartbeats every `heartbeat_ms`; a node is DEAD after kHeartbeatMisses
  // missed periods.
  // The head listens on `head_host` (another address than loopback when
  // raylets run in network namespaces).
  // With `with_token`, the head and raylets require a cluster token on
  // every RPC (context() attaches it). With `with_tls`, a CA and
  // certificates in dir()/tls (auth/cluster_tls.h): the head and raylets
  // speak mutual TLS; the stubs here use the client certificate for the
  // head and, standing in for the head, the head's for raylets.
  // With `head_netns`, the first head runs in that network namespace.
  explicit LocalCluster(int heartbeat_ms = 100, std::vector<std::string> extra_head_flags = {},
                        std::string head_host = "127.0.0.1", bool with_token = false,
                        bool with_tls = false, std::string head_netns = "");
  ~LocalCluster();

  // Starts a raylet and waits until the head lists it ALIVE.
  void AddRaylet(const RayletOptions& options);
  void KillRaylet(const std::string& node_id, int signal);
  // Stops the head with `signal` (e.g. SIGKILL) and, `down_for` later,
  // starts a new one on the same address with the same state directory.
  void RestartHead(int signal, std::chrono::milliseconds down_for = std::chrono::milliseconds(0));
  // Starts a second head on the same state: a standby that takes over when
  // the first one dies, listening on `host` (default: the first head's).
  // Before AddRaylet: the raylets, and the stubs here, are given both
  // addresses and follow whichever head is active.
  void AddStandbyHead(const std::string& host = "");
  pid_t standby_pid() const { return standby_ ? standby_->pid() : -1; }
  // Stops the first head with `signal` for good (the standby takes over).
  void KillHead(int signal);
  // The head's own command line (a second head started beside it gets the
  // same flags).
  std::vector<std::string> HeadCommand(const std::string& listen,
                                       const std::string& port_file) const;
  // Starts a stopped raylet again with its old options (a new process).
  void RestartRaylet(const std::string& node_id);

  v1::NodeService::Stub& nodes() { return *nodes_; }
  v1::PlacementGroupService::Stub& groups() { return *groups_; }
  v1::ClusterService::Stub& cluster() { return *cluster_; }
  v1::TrainJobService::Stub& jobs() { return *jobs_; }
  v1::QueueService::Stub& queues() { return *queues_; }
  v1::RayletService::Stub& raylet(const std::string& node_id);
  std::string raylet_address(const std::string& node_id) const;
  // The head's address, or both heads' (AddStandbyHead).
  const std::string& head_address() const { return head_address_; }
  pid_t head_pid() const { return head_ ? head_->pid() : -1; }
  const std::string& dir() const { return dir_; }
  std::string log_dir(const std::string& node_id) const;
  // The raylet's --state-dir (its jobs' work folders are under work/).
  std::string state_dir(const std::string& node_id) const;
  int heartbeat_ms() const { return heartbeat_ms_; }
  // How long after its last heartbeat the head declares a node DEAD.
  std::chrono::milliseconds liveness_timeout() const {
    return std::chrono::milliseconds(heartbeat_ms_ * kHeartbeatMisses);
  }
  const std::string& token() const { return token_; }
  const std::string& token_file() const { return token_file_; }
  std::string tls_dir() const { return dir_ + "/tls"; }
  // A client context with a deadline and the cluster token (if any).
  std::unique_ptr<grpc::ClientContext> context(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const;

 private:
  struct Raylet {
    RayletOptions options;
    std::unique_ptr<ChildProcess> process;
    std::string address;
    std::unique_ptr<v1::RayletService::Stub> stub;
  };
  void StartRaylet(Raylet& r);
  void StartHead(const std::string& listen);
  void ConnectStubs();  // to head_address_

  int heartbeat_ms_;
  std::vector<std::string> extra_head_flags_;
  std::string head_host_;
  std::string head_netns_;
  std::string token_, token_file_;
  bool with_tls_;
  std::string dir_;
  std::unique_ptr<ChildProcess> head_;
  std::unique_ptr<ChildProcess> standby_;
  std::string head_address_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
  std::unique_ptr<v1::PlacementGroupService::Stub> groups_;
  std::unique_ptr<v1::ClusterService::Stub> cluster_;
  std::unique_ptr<v1::TrainJobService::Stub> jobs_;
  std::unique_ptr<v1::QueueService::Stub> queues_;
  std::vector<std::unique_ptr<Raylet>> raylets_;
  // Every node a raylet ran as: their cgroups go with the cluster, also
  // those of raylets a test killed (kill -9 leaves them behind).
  std::set<std::string> raylet_nodes_;
};

// The port a daemon wrote to its --port-file, once it is there whole; ""
// after `timeout`.
std::string ReadPortFile(const std::string& path, std::chrono::milliseconds timeout);

// A client context with a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> Context(
    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
// The body of http://`host_port``path` (HTTP/1.0 GET on a plain socket), or
// "" when the request fails or the status is not 200.
std::string HttpGet(const std::string& host_port, const std::string& path);

// The live processes (not zombies) whose environment has `name` set to a
// value starting with `value_prefix`, from /proc. Every process a raylet
// starts, and every child of it, has TORCHELASTIC_ERROR_FILE=
// <log_dir(node)>/<worker id>.error.json, and worker ids start with the job
// id: that finds a job's processes on a node, whatever became of their
// parents.
std::vector<pid_t> ProcessesWithEnv(const std::string& name, const std::string& value_prefix);

// One sample of a Prometheus text exposition.
using MetricLabels = std::map<std::string, std::string>;
struct Series {
  std::string name;
  MetricLabels labels;
  double value = 0;
};
// The samples of a /metrics body.
std::vector<Series> ParseMetrics(const std::string& text);
// Sum of the samples of `name` whose labels include `match`.
double SumSeries(const std::vector<Series>& all, const std::string& name,
                 const MetricLabels& match = {});

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace berth::testing

#endif  // BERTH_TESTS_INTEGRATION_LOCAL_CLUSTER_H_
