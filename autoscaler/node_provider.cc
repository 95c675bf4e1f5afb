#include "autoscaler/node_provider.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/command.h"
#include "common/http_client.h"

namespace berth {

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
  std::vector<std::string> env = CurrentEnvironment();
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
  const std::string what = absl::StrJoin(argv, " ");
  absl::StatusOr<CommandOutcome> outcome = RunCommand(std::move(argv), std::move(env), timeout_);
  if (!outcome.ok()) return outcome.status();
  if (outcome->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": ", outcome->Ending(timeout_)));
  }
  if (!outcome->ok()) {
    return absl::UnavailableError(absl::StrCat(what, ": ", outcome->Ending(timeout_),
                                               outcome->output.empty() ? "" : ": ",
                                               TextTail(outcome->output)));
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
                                               ": ", TextTail(response->body)));
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
