#include "autoscaler/node_provider.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/http_client.h"

extern char** environ;

namespace berth {
namespace {

// The last `n` bytes of `text`, for error messages.
std::string Tail(const std::string& text, size_t n = 600) {
  return std::string(
      absl::StripAsciiWhitespace(text.size() <= n ? text : text.substr(text.size() - n)));
}

}  // namespace

CommandProvider::CommandProvider(std::vector<std::string> command, std::string head_address,
                                 absl::Duration timeout)
    : command_(std::move(command)), head_address_(std::move(head_address)), timeout_(timeout) {}

absl::Status CommandProvider::Scale(const NodePool& pool, uint32_t target) {
  return Run(pool, {"scale", pool.name, absl::StrCat(target)});
}

absl::Status CommandProvider::Remove(const NodePool& pool, uint32_t target,
                                     const std::vector<std::string>& node_ids) {
  std::vector<std::string> args = {"remove", pool.name, absl::StrCat(target)};
  args.insert(args.end(), node_ids.begin(), node_ids.end());
  return Run(pool, std::move(args));
}

absl::Status CommandProvider::Run(const NodePool& pool, std::vector<std::string> args) {
  std::vector<std::string> argv = command_;
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<std::string> labels;
  for (const auto& [k, v] : pool.labels) labels.push_back(absl::StrCat(k, "=", v));
  env.push_back("BERTH_POOL=" + pool.name);
  env.push_back(absl::StrCat("BERTH_POOL_GPUS=", pool.gpus));
  env.push_back("BERTH_POOL_ACCELERATOR_TYPE=" + pool.accelerator_type);
  env.push_back("BERTH_POOL_CPUS=" + pool.resources.Get(kCpu).ToString());
  env.push_back(absl::StrCat("BERTH_POOL_MEMORY=",
                             pool.resources.Get(kMemory).units() / Quantity::kUnitsPerWhole));
  env.push_back("BERTH_POOL_LABELS=" + absl::StrJoin(labels, ","));
  env.push_back("BERTH_HEAD_ADDRESS=" + head_address_);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a timeout kills what it started too
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    std::vector<char*> cargv, cenv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (std::string& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    execvpe(cargv[0], cargv.data(), cenv.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", cargv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  std::string output;
  const absl::Time deadline = absl::Now() + timeout_;
  bool timed_out = false;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: every writer closed its end
    output.append(buffer, n);
  }
  close(out[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string what = absl::StrJoin(argv, " ");
  if (timed_out)
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": no answer within ", absl::FormatDuration(timeout_)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(what, ": ",
                                               WIFEXITED(status)
                                                   ? absl::StrCat("exit ", WEXITSTATUS(status))
                                                   : absl::StrCat("signal ", WTERMSIG(status)),
                                               output.empty() ? "" : ": ", Tail(output)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KubernetesProvider>> KubernetesProvider::Create(
    const ProviderConfig& config, absl::Duration timeout) {
  std::string api = config.api_server;
  if (api.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || port == nullptr) {
      return absl::FailedPreconditionError(
          "provider.api_server: not set and KUBERNETES_SERVICE_HOST/PORT are not in the "
          "environment (not in a pod?)");
    }
    const std::string h = host;
    api = absl::StrCat("https://", h.find(':') != std::string::npos ? "[" + h + "]" : h, ":", port);
  }
  return std::unique_ptr<KubernetesProvider>(
      new KubernetesProvider(config, std::string(absl::StripSuffix(api, "/")), timeout));
}

KubernetesProvider::KubernetesProvider(ProviderConfig config, std::string api_server,
                                       absl::Duration timeout)
    : config_(std::move(config)), api_server_(std::move(api_server)), timeout_(timeout) {}

absl::Status KubernetesProvider::Scale(const NodePool& pool, uint32_t target) {
  return Patch(absl::StrCat("/apis/apps/v1/namespaces/", config_.ns, "/deployments/",
                            pool.deployment, "/scale"),
               absl::StrCat(R"({"spec":{"replicas":)", target, "}}"));
}

absl::Status KubernetesProvider::Remove(const NodePool& pool, uint32_t target,
                                        const std::vector<std::string>& node_ids) {
  for (const std::string& pod : node_ids) {
    absl::Status marked = Patch(
        absl::StrCat("/api/v1/namespaces/", config_.ns, "/pods/", pod),
        R"({"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-1000000"}}})");
    if (!marked.ok()) return marked;
  }
  return Scale(pool, target);
}

absl::Status KubernetesProvider::Patch(const std::string& path, const std::string& body) {
  std::ifstream token_in(config_.token_file);
  std::stringstream token;
  token << token_in.rdbuf();
  const std::string bearer(absl::StripAsciiWhitespace(token.str()));
  if (bearer.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("provider.token_file ", config_.token_file, ": empty or unreadable"));

  HttpRequest request;
  request.method = "PATCH";
  request.url = api_server_ + path;
  request.body = body;
  request.headers = {"Authorization: Bearer " + bearer,
                     "Content-Type: application/merge-patch+json", "Accept: application/json"};
  request.timeout = timeout_;
  request.ca_file = config_.ca_file;
  absl::StatusOr<HttpResponse> response = HttpCall(request);
  if (!response.ok()) return response.status();
  if (response->status < 200 || response->status >= 300) {
    return absl::UnavailableError(absl::StrCat("PATCH ", request.url, ": HTTP ", response->status,
                                               ": ", Tail(response->body)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NodeProvider>> MakeNodeProvider(const ProviderConfig& config,
                                                               const std::string& head_address) {
  if (config.type == "command")
    return std::make_unique<CommandProvider>(config.command, head_address);
  absl::StatusOr<std::unique_ptr<KubernetesProvider>> k8s = KubernetesProvider::Create(config);
  if (!k8s.ok()) return k8s.status();
  return std::unique_ptr<NodeProvider>(std::move(*k8s));
}

}  // namespace berth
