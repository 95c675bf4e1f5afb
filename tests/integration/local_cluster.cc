#include "tests/integration/local_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "auth/cluster_tls.h"
#include "auth/cluster_token.h"
#include "common/files.h"
#include "grpcpp/grpcpp.h"
#include "raylet/worker_cgroups.h"

namespace berth::testing {

std::string ReadPortFile(const std::string& path, std::chrono::milliseconds timeout) {
  std::string port;
  WaitUntil(
      [&] {
        port = ReadFileOrEmpty(path);
        return !port.empty() && port.back() == '\n';
      },
      timeout);
  if (!port.empty() && port.back() == '\n') port.pop_back();
  return port;
}

namespace {

// A channel to a server of `role`; over TLS with our certificate of
// `as` when the cluster has TLS (`tls_dir` not empty).
std::shared_ptr<grpc::Channel> Channel(const std::string& address, const std::string& tls_dir,
                                       TlsRole role, TlsRole as) {
  // MakeChannel: an address list reaches whichever head is active.
  if (tls_dir.empty()) return TlsConfig{}.MakeChannel(address, role);
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(ClusterTlsFiles(tls_dir, as), true);
  if (!tls.ok()) throw std::runtime_error(std::string(tls.status().message()));
  return tls->MakeChannel(address, role);
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, const std::string& log_path) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t test = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // A test that crashes (no destructors) must not leave its cluster
    // running; tests fork from their main thread, which lives as long as
    // the test does.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != test) _exit(127);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(args[0], args.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    Signal(SIGKILL);
    Wait();
  }
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

std::optional<int> ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;  // reaped: never signalled again
      return status;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

int ChildProcess::Wait() {
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

std::unique_ptr<grpc::ClientContext> LocalCluster::context(
    std::chrono::milliseconds timeout) const {
  std::unique_ptr<grpc::ClientContext> c = Context(timeout);
  AttachClusterToken(c.get(), token_);
  return c;
}

std::unique_ptr<grpc::ClientContext> Context(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

std::vector<pid_t> ProcessesWithEnv(const std::string& name, const std::string& value_prefix) {
  const std::string wanted = name + "=" + value_prefix;
  std::vector<pid_t> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    // A zombie's environ reads empty: it holds nothing any more.
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    std::string variable;
    while (std::getline(environ, variable, '\0')) {
      if (variable.compare(0, wanted.size(), wanted) == 0) {
        found.push_back(static_cast<pid_t>(std::stol(pid_text)));
        break;
      }
    }
  }
  return found;
}

std::vector<Series> ParseMetrics(const std::string& text) {
  std::vector<Series> out;
  std::istringstream in(text);
  std::string line;
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.empty() || line[0] == '#' || !std::regex_match(line, m, sample)) continue;
    Series s{m[1], {}, std::stod(m[4])};
    const std::string labels = m[3];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label);
         it != std::sregex_iterator(); ++it) {
      s.labels[(*it)[1]] = (*it)[2];
    }
    out.push_back(std::move(s));
  }
  return out;
}

double SumSeries(const std::vector<Series>& all, const std::string& name,
                 const MetricLabels& match) {
  double sum = 0;
  for (const Series& s : all) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && s.labels.count(k) && s.labels.at(k) == v;
    if (ok) sum += s.value;
  }
  return sum;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

LocalCluster::LocalCluster(int heartbeat_ms, std::vector<std::string> extra_head_flags,
                           std::string head_host, bool with_token, bool with_tls,
                           std::string head_netns)
    : heartbeat_ms_(heartbeat_ms),
      extra_head_flags_(std::move(extra_head_flags)),
      head_host_(std::move(head_host)),
      head_netns_(std::move(head_netns)),
      with_tls_(with_tls) {
  char dir[] = "/tmp/berth-it-XXXXXX";
  if (mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = dir;
  if (with_token) {
    token_file_ = dir_ + "/token";
    absl::StatusOr<std::string> token = CreateClusterToken(token_file_);
    if (!token.ok()) throw std::runtime_error(std::string(token.status().message()));
    token_ = *token;
    extra_head_flags_.insert(extra_head_flags_.end(), {"--token-file", token_file_});
  }
  if (with_tls) {
    if (absl::Status s = CreateClusterCertificates(tls_dir()); !s.ok())
      throw std::runtime_error(std::string(s.message()));
    const TlsFiles files = ClusterTlsFiles(tls_dir(), TlsRole::kHead);
    extra_head_flags_.insert(extra_head_flags_.end(),
                             {"--tls-ca-file", files.ca_file, "--tls-cert-file", files.cert_file,
                              "--tls-key-file", files.key_file});
  }
  StartHead(head_host_ + ":0");
}

void LocalCluster::StartHead(const std::string& listen) {
  const std::string port_file = dir_ + "/head.port";
  std::remove(port_file.c_str());
  std::vector<std::string> argv = HeadCommand(listen, port_file);
  if (!head_netns_.empty())
    argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", head_netns_});
  head_ = std::make_unique<ChildProcess>(argv, dir_ + "/head.log");
  const std::string port = ReadPortFile(port_file, std::chrono::seconds(10));
  if (port.empty()) throw std::runtime_error("berth-head did not start; see " + dir_ + "/head.log");
  head_address_ = head_host_ + ":" + port;
  ConnectStubs();
}

void LocalCluster::ConnectStubs() {
  auto channel =
      Channel(head_address_, with_tls_ ? tls_dir() : "", TlsRole::kHead, TlsRole::kClient);
  nodes_ = v1::NodeService::NewStub(channel);
  groups_ = v1::PlacementGroupService::NewStub(channel);
  cluster_ = v1::ClusterService::NewStub(channel);
  jobs_ = v1::TrainJobService::NewStub(channel);
  queues_ = v1::QueueService::NewStub(channel);
}

void LocalCluster::AddStandbyHead(const std::string& host) {
  const std::string port_file = dir_ + "/standby.port";
  const std::string standby_host = host.empty() ? head_host_ : host;
  standby_ = std::make_unique<ChildProcess>(HeadCommand(standby_host + ":0", port_file),
                                            dir_ + "/standby.log");
  const std::string port = ReadPortFile(port_file, std::chrono::seconds(10));
  if (port.empty())
    throw std::runtime_error("the standby did not start; see " + dir_ + "/standby.log");
  head_address_ += "," + standby_host + ":" + port;
  ConnectStubs();
}

void LocalCluster::KillHead(int signal) {
  head_->Signal(signal);
  head_->Wait();
  head_.reset();
}

std::vector<std::string> LocalCluster::HeadCommand(const std::string& listen,
                                                   const std::string& port_file) const {
  // The head keeps its state in the cluster's directory, so a restarted
  // head continues where the killed one stopped (unless the extra flags
  // name a --state-store).
  std::vector<std::string> argv = {BERTH_HEAD_BIN,
                                   "--listen",
                                   listen,
                                   "--port-file",
                                   port_file,
                                   "--heartbeat-period-ms",
                                   std::to_string(heartbeat_ms_),
                                   "--heartbeat-misses",
                                   std::to_string(kHeartbeatMisses),
                                   "--raylet-rpc-timeout-ms",
                                   "1000",
                                   "--checkpoint-root",
                                   dir_ + "/jobs",
                                   "--metrics-listen",
                                   "127.0.0.1:0"};
  if (std::find(extra_head_flags_.begin(), extra_head_flags_.end(), "--state-store") ==
      extra_head_flags_.end()) {
    argv.insert(argv.end(), {"--state-dir", dir_ + "/head-state"});
  }
#ifdef BERTH_WORKER_BIN
  argv.push_back("--worker-binary");
  argv.push_back(BERTH_WORKER_BIN);
#endif
  argv.insert(argv.end(), extra_head_flags_.begin(), extra_head_flags_.end());
  return argv;
}

void LocalCluster::RestartHead(int signal, std::chrono::milliseconds down_for) {
  head_->Signal(signal);
  head_->Wait();
  head_.reset();
  std::this_thread::sleep_for(down_for);
  StartHead(head_address_);  // same port: the raylets know it
}

LocalCluster::~LocalCluster() {
  // Raylets first (they kill their workers on SIGTERM), then the head. Our
  // channels to the raylets go first: an open connection holds up a gRPC
  // server's shutdown until its grace period ends.
  for (auto& r : raylets_) r->stub.reset();
  for (auto& r : raylets_) {
    if (r->process && r->process->running()) {
      r->process->Signal(SIGTERM);
      r->process->Wait();
    }
  }
  raylets_.clear();
  head_.reset();
  standby_.reset();
  for (const std::string& node : raylet_nodes_) {
    // Removed with the WorkerCgroups object, once emptied.
    absl::StatusOr<std::unique_ptr<WorkerCgroups>> cgroups =
        WorkerCgroups::Open({node, state_dir(node)});
    if (cgroups.ok()) (*cgroups)->RemoveLeftovers();
  }
  if (getenv("BERTH_KEEP_TEST_DIRS") == nullptr) {
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
}

std::string LocalCluster::log_dir(const std::string& node_id) const {
  return dir_ + "/" + node_id + "-logs";
}

std::string LocalCluster::state_dir(const std::string& node_id) const {
  return dir_ + "/" + node_id + "-state";
}

void LocalCluster::StartRaylet(Raylet& r) {
  const RayletOptions& o = r.options;
  raylet_nodes_.insert(o.node_id);
  const std::string port_file = dir_ + "/" + o.node_id + ".port";
  std::remove(port_file.c_str());
  std::vector<std::string> argv;
  if (!o.netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", o.netns};
  argv.insert(argv.end(), {BERTH_RAYLET_BIN,
                           "--head",
                           head_address_,
                           "--listen",
                           o.host + ":0",
                           "--advertise-host",
                           o.host,
                           "--port-file",
                           port_file,
                           "--node-id",
                           o.node_id,
                           "--num-cpus",
                           std::to_string(o.num_cpus),
                           "--memory",
                           o.memory,
                           "--num-gpus",
                           std::to_string(o.num_gpus),
                           "--metrics-listen",
                           o.host + ":0",
                           "--state-dir",
                           state_dir(o.node_id),
                           "--log-dir",
                           log_dir(o.node_id)});
  if (!o.accelerator_type.empty()) {
    argv.push_back("--accelerator-type");
    argv.push_back(o.accelerator_type);
  }
  if (!o.labels.empty()) {
    argv.push_back("--labels");
    argv.push_back(o.labels);
  }
  argv.insert(argv.end(), o.extra_flags.begin(), o.extra_flags.end());
  if (!token_file_.empty()) argv.insert(argv.end(), {"--token-file", token_file_});
  if (with_tls_) {
    const TlsFiles files = ClusterTlsFiles(tls_dir(), TlsRole::kNode);
    argv.insert(argv.end(), {"--tls-ca-file", files.ca_file, "--tls-cert-file", files.cert_file,
                             "--tls-key-file", files.key_file});
  }
  r.process = std::make_unique<ChildProcess>(argv, dir_ + "/" + o.node_id + ".log");
  const std::string port = ReadPortFile(port_file, std::chrono::seconds(10));
  if (port.empty()) throw std::runtime_error("berth-raylet " + o.node_id + " did not start");
  r.address = o.host + ":" + port;
  r.stub = v1::RayletService::NewStub(
      Channel(r.address, with_tls_ ? tls_dir() : "", TlsRole::kNode, TlsRole::kHead));
  const bool alive = WaitUntil(
      [&] {
        v1::ListNodesRequest request;
        request.add_states(v1::NODE_STATE_ALIVE);
        v1::ListNodesResponse response;
        if (!nodes_->ListNodes(context().get(), request, &response).ok()) return false;
        for (const auto& n : response.nodes()) {
          if (n.node_id() == o.node_id && n.address() == r.address) return true;
        }
        return false;
      },
      std::chrono::seconds(15));
  if (!alive) throw std::runtime_error("berth-raylet " + o.node_id + " did not register");
}

void LocalCluster::AddRaylet(const RayletOptions& options) {
  auto r = std::make_unique<Raylet>();
  r->options = options;
  StartRaylet(*r);
  raylets_.push_back(std::move(r));
}

void LocalCluster::KillRaylet(const std::string& node_id, int signal) {
  for (auto& r : raylets_) {
    if (r->options.node_id == node_id && r->process) {
      r->process->Signal(signal);
      r->process->Wait();
    }
  }
}

void LocalCluster::RestartRaylet(const std::string& node_id) {
  for (auto& r : raylets_) {
    if (r->options.node_id == node_id) StartRaylet(*r);
  }
}

v1::RayletService::Stub& LocalCluster::raylet(const std::string& node_id) {
  for (auto& r : raylets_) {
    if (r->options.node_id == node_id) return *r->stub;
  }
  throw std::runtime_error("no raylet " + node_id);
}

std::string LocalCluster::raylet_address(const std::string& node_id) const {
  for (const auto& r : raylets_) {
    if (r->options.node_id == node_id) return r->address;
  }
  return "";
}

std::string HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) return "";
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host_port + "\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || response.rfind("HTTP/1.1 200", 0) != 0) {
    if (body == std::string::npos || response.rfind("HTTP/1.0 200", 0) != 0) return "";
  }
  return response.substr(body + 4);
}

}  // namespace berth::testing
