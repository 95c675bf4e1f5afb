// berth-autoscaler: every period, reads the head's nodes and pending demand,
// plans with ScalingPlanner, carries the plan out (provider for scale-ups and
// removals, the head for drains) and reports pools and decisions back to the
// head, where `berth status` and the head's metrics show them.
#include <signal.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "auth/cluster_token.h"
#include "auth/tls_flags.h"
#include "autoscaler/node_pool_config.h"
#include "autoscaler/node_provider.h"
#include "autoscaler/scaling_planner.h"
#include "common/files.h"
#include "common/help_json.h"
#include "common/log_flag.h"
#include "common/metrics_server.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "wire/head_client.h"

namespace berth {
namespace {

constexpr size_t kRecentActions = 20;

struct Flags {
  std::string head = "127.0.0.1:6380";
  std::string config;
  int period_ms = 1000;
  int rpc_timeout_ms = 5000;
  std::string metrics_listen;
  std::string metrics_port_file;
  std::string token_file;
  TlsFiles tls;
  bool check_config = false;
};

std::string Describe(const v1::AutoscalerAction& a) {
  std::string kind =
      v1::AutoscalerActionKind_Name(a.kind()).substr(std::string("AUTOSCALER_ACTION_KIND_").size());
  return absl::StrCat(
      kind, " ", a.pool(), " -> ", a.target_nodes(),
      a.node_ids().empty() ? "" : absl::StrCat(" [", absl::StrJoin(a.node_ids(), ", "), "]"), ": ",
      a.reason());
}

volatile sig_atomic_t stop_requested = 0;

int Run(const Flags& flags) {
  absl::StatusOr<AutoscalerConfig> config = LoadAutoscalerConfig(flags.config);
  if (!config.ok()) {
    LogError(config.status().message());
    return 2;
  }
  if (flags.check_config) {
    for (const NodePool& pool : config->pools) {
      std::printf("%s: pool %s: %u x %s GPU, %s, %u..%u nodes, idle %llds\n", flags.config.c_str(),
                  pool.name.c_str(), pool.gpus,
                  pool.accelerator_type.empty() ? "no" : pool.accelerator_type.c_str(),
                  pool.resources.ToString().c_str(), pool.min_nodes, pool.max_nodes,
                  static_cast<long long>(pool.idle_timeout_ms / 1000));
    }
    return 0;
  }
  absl::StatusOr<std::unique_ptr<NodeProvider>> provider =
      MakeNodeProvider(config->provider, flags.head);
  if (!provider.ok()) {
    LogError(provider.status().message());
    return 2;
  }
  HeadClientOptions options;
  options.timeout = absl::Milliseconds(flags.rpc_timeout_ms);
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClusterToken(flags.token_file, "--token-file");
    if (!token.ok()) {
      LogError(token.status().message());
      return 2;
    }
    options.cluster_token = *token;
  }
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(flags.tls, /*need_certificate=*/false);
  if (!tls.ok()) {
    LogError(tls.status().message());
    return 2;
  }
  options.tls = *std::move(tls);
  absl::StatusOr<std::unique_ptr<HeadClient>> head = HeadClient::Create(flags.head, options);
  if (!head.ok()) {
    LogError("--head: ", head.status().message());
    return 2;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  auto& actions_total =
      prometheus::BuildCounter()
          .Name("berth_autoscaler_actions_total")
          .Help("Actions carried out by berth-autoscaler, by kind, pool and result.")
          .Register(*registry);
  std::unique_ptr<MetricsServer> metrics;
  if (!flags.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(flags.metrics_listen);
    if (!started.ok()) {
      LogError(started.status().message());
      return 2;
    }
    metrics = *std::move(started);
    metrics->Register(registry);
    if (!flags.metrics_port_file.empty())
      WritePortFile(flags.metrics_port_file, metrics->port()).IgnoreError();
  }

  std::map<std::string, const NodePool*> pools;
  for (const NodePool& pool : config->pools) pools[pool.name] = &pool;
  ScalingPlanner planner(config->pools);
  std::deque<v1::AutoscalerAction> recent;
  LogInfo(config->pools.size(), " pool(s), provider ", config->provider.type, ", head ",
          flags.head);
  while (!stop_requested) {
    const absl::Time pass_start = absl::Now();
    absl::StatusOr<v1::ListNodesResponse> nodes = (*head)->ListNodes();
    absl::StatusOr<v1::GetClusterStatusResponse> status =
        nodes.ok() ? (*head)->GetClusterStatus()
                   : absl::StatusOr<v1::GetClusterStatusResponse>(nodes.status());
    if (!status.ok()) {
      LogWarning("head ", flags.head, ": ", status.status().message());
    } else {
      ScalingInput input;
      input.nodes.assign(nodes->nodes().begin(), nodes->nodes().end());
      input.pending.assign(status->pending_demand().begin(), status->pending_demand().end());
      input.now_ms = absl::ToUnixMillis(absl::Now());
      ScalingPlan plan = planner.Plan(input);
      for (v1::AutoscalerAction& action : plan.actions) {
        const NodePool& pool = *pools.at(action.pool());
        absl::Status done;
        switch (action.kind()) {
          case v1::AUTOSCALER_ACTION_KIND_SCALE_UP:
            done = (*provider)->Scale(pool, action.target_nodes());
            break;
          case v1::AUTOSCALER_ACTION_KIND_DRAIN:
            for (const std::string& node : action.node_ids()) {
              v1::DrainNodeRequest drain;
              drain.set_node_id(node);
              drain.set_reason(action.reason());
              absl::StatusOr<v1::DrainNodeResponse> drained = (*head)->DrainNode(drain);
              if (!drained.ok() && done.ok()) done = drained.status();
            }
            break;
          case v1::AUTOSCALER_ACTION_KIND_REMOVE:
            done = (*provider)->Remove(
                pool, action.target_nodes(),
                std::vector<std::string>(action.node_ids().begin(), action.node_ids().end()));
            break;
          default:
            break;
        }
        if (!done.ok()) {
          action.set_error(std::string(done.message()));
          planner.OnActionFailed(action);
        }
        actions_total
            .Add({{"kind", v1::AutoscalerActionKind_Name(action.kind()).substr(23)},
                  {"pool", action.pool()},
                  {"result", done.ok() ? "ok" : "error"}})
            .Increment();
        Log(done.ok() ? LogLevel::kInfo : LogLevel::kWarning, Describe(action),
            done.ok() ? "" : " FAILED: ", done.message());
        recent.push_back(action);
        if (recent.size() > kRecentActions) recent.pop_front();
      }
      v1::AutoscalerStatus report;
      for (v1::NodePoolStatus& p : plan.pools) *report.add_pools() = std::move(p);
      for (const v1::AutoscalerAction& a : recent) *report.add_recent_actions() = a;
      for (v1::UnsatisfiableDemand& u : plan.unsatisfiable)
        *report.add_unsatisfiable() = std::move(u);
      if (absl::Status reported = (*head)->ReportAutoscalerStatus(report); !reported.ok()) {
        LogWarning("report to the head: ", reported.message());
      }
    }
    const absl::Time next = pass_start + absl::Milliseconds(flags.period_ms);
    while (!stop_requested && absl::Now() < next) absl::SleepFor(absl::Milliseconds(20));
  }
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  berth::Flags flags;
  CLI::App app{"berth-autoscaler: grows and shrinks node pools from berth's pending demand"};
  app.add_option("--head", flags.head, "head address, HOST:PORT, or the active head and its standbys, HOST:PORT,HOST:PORT")->capture_default_str();
  app.add_option("--config", flags.config, "node pools and provider, YAML")->required();
  app.add_option("--period-ms", flags.period_ms, "time between passes")
      ->check(CLI::Range(50, 3'600'000))
      ->capture_default_str();
  app.add_option("--rpc-timeout-ms", flags.rpc_timeout_ms, "deadline of each call to the head")
      ->check(CLI::Range(100, 600'000))
      ->capture_default_str();
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "serve Prometheus /metrics on HOST:PORT (port 0 picks one); empty = off");
  app.add_option("--metrics-port-file", flags.metrics_port_file,
                 "write the bound metrics port here");
  app.add_flag("--check-config", flags.check_config, "validate --config, print the pools and exit");
  berth::AddTlsFlags(app, flags.tls, "berth-client; optional");
  app.add_option("--token-file", flags.token_file,
                 "cluster token for the head (default: $BERTH_TOKEN_FILE)")
      ->envname("BERTH_TOKEN_FILE");
  const berth::LogFlag log_flag(app);
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-autoscaler");
  struct sigaction on_stop {};
  on_stop.sa_handler = [](int) { berth::stop_requested = 1; };
  sigaction(SIGTERM, &on_stop, nullptr);
  sigaction(SIGINT, &on_stop, nullptr);
  return berth::Run(flags);
}
