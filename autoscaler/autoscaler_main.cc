// berth-autoscaler: every period, reads the head's nodes and pending demand,
// plans with ScalingPlanner, carries the plan out (provider for scale-ups and
// removals, the head for drains) and reports pools and decisions back to the
// head, where `berth status` and the head's metrics show them.
#include <signal.h>

#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
#include "common/version.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
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

// The action's kind without the enum's prefix: "SCALE_UP".
std::string KindName(const v1::AutoscalerAction& a) {
  return v1::AutoscalerActionKind_Name(a.kind()).substr(
      std::string("AUTOSCALER_ACTION_KIND_").size());
}

std::string Describe(const v1::AutoscalerAction& a) {
  return absl::StrCat(
      KindName(a), " ", a.pool(), " -> ", a.target_nodes(),
      a.node_ids().empty() ? "" : absl::StrCat(" [", absl::StrJoin(a.node_ids(), ", "), "]"), ": ",
      a.reason());
}

volatile sig_atomic_t stop_requested = 0;

// One pass after another: reads the head's view, plans, carries the plan
// out and reports it to the head. A pass the head does not answer plans
// nothing; a failed action is reported and planned again.
class Autoscaler {
 public:
  Autoscaler(const AutoscalerConfig& config, NodeProvider* provider, HeadClient* head,
             std::string head_address, prometheus::Family<prometheus::Counter>* actions_total)
      : planner_(config.pools),
        provider_(provider),
        head_(head),
        head_address_(std::move(head_address)),
        actions_total_(actions_total) {
    for (const NodePool& pool : config.pools) pools_[pool.name] = &pool;
  }

  void RunPass() {
    absl::StatusOr<v1::ListNodesResponse> nodes = head_->ListNodes();
    absl::StatusOr<v1::GetClusterStatusResponse> status =
        nodes.ok() ? head_->GetClusterStatus()
                   : absl::StatusOr<v1::GetClusterStatusResponse>(nodes.status());
    if (!status.ok()) {
      LogWarning("head ", head_address_, ": ", status.status().message());
      return;
    }
    ScalingInput input;
    input.nodes.assign(nodes->nodes().begin(), nodes->nodes().end());
    input.pending.assign(status->pending_demand().begin(), status->pending_demand().end());
    input.now_ms = absl::ToUnixMillis(absl::Now());
    ScalingPlan plan = planner_.Plan(input);
    for (v1::AutoscalerAction& action : plan.actions) Record(&action, CarryOut(action));
    Report(&plan);
  }

 private:
  absl::Status CarryOut(const v1::AutoscalerAction& action) {
    const NodePool& pool = *pools_.at(action.pool());
    switch (action.kind()) {
      case v1::AUTOSCALER_ACTION_KIND_SCALE_UP:
        return provider_->Scale(pool, action.target_nodes());
      case v1::AUTOSCALER_ACTION_KIND_DRAIN:
        return Drain(action);
      case v1::AUTOSCALER_ACTION_KIND_REMOVE:
        return provider_->Remove(
            pool, action.target_nodes(),
            std::vector<std::string>(action.node_ids().begin(), action.node_ids().end()));
      default:
        return absl::OkStatus();
    }
  }

  // Asks the head to drain every node of `action`; the first failure.
  absl::Status Drain(const v1::AutoscalerAction& action) {
    absl::Status done;
    for (const std::string& node : action.node_ids()) {
      v1::DrainNodeRequest drain;
      drain.set_node_id(node);
      drain.set_reason(action.reason());
      absl::StatusOr<v1::DrainNodeResponse> drained = head_->DrainNode(drain);
      if (!drained.ok() && done.ok()) done = drained.status();
    }
    return done;
  }

  // Tells the planner of a failure, counts and logs the action, and keeps
  // it among the recent ones.
  void Record(v1::AutoscalerAction* action, const absl::Status& done) {
    if (!done.ok()) {
      action->set_error(std::string(done.message()));
      planner_.OnActionFailed(*action);
    }
    actions_total_
        ->Add({{"kind", KindName(*action)},
               {"pool", action->pool()},
               {"result", done.ok() ? "ok" : "error"}})
        .Increment();
    Log(done.ok() ? LogLevel::kInfo : LogLevel::kWarning, Describe(*action),
        done.ok() ? "" : " FAILED: ", done.message());
    recent_.push_back(*action);
    if (recent_.size() > kRecentActions) recent_.pop_front();
  }

  void Report(ScalingPlan* plan) {
    v1::AutoscalerStatus report;
    for (v1::NodePoolStatus& p : plan->pools) *report.add_pools() = std::move(p);
    for (const v1::AutoscalerAction& a : recent_) *report.add_recent_actions() = a;
    for (v1::UnsatisfiableDemand& u : plan->unsatisfiable) {
      *report.add_unsatisfiable() = std::move(u);
    }
    if (absl::Status reported = head_->ReportAutoscalerStatus(report); !reported.ok()) {
      LogWarning("report to the head: ", reported.message());
    }
  }

  ScalingPlanner planner_;
  std::map<std::string, const NodePool*> pools_;
  NodeProvider* provider_;
  HeadClient* head_;
  std::string head_address_;
  prometheus::Family<prometheus::Counter>* actions_total_;
  std::deque<v1::AutoscalerAction> recent_;
};

// --check-config: one line per pool.
void PrintPools(const std::string& file, const AutoscalerConfig& config) {
  for (const NodePool& pool : config.pools) {
    std::printf("%s: pool %s: %u x %s GPU, %s, %u..%u nodes, idle %llds\n", file.c_str(),
                pool.name.c_str(), pool.gpus,
                pool.accelerator_type.empty() ? "no" : pool.accelerator_type.c_str(),
                pool.resources.ToString().c_str(), pool.min_nodes, pool.max_nodes,
                static_cast<long long>(pool.idle_timeout_ms / 1000));
  }
}

absl::StatusOr<std::unique_ptr<HeadClient>> ConnectToHead(const Flags& flags) {
  HeadClientOptions options;
  options.timeout = absl::Milliseconds(flags.rpc_timeout_ms);
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClusterToken(flags.token_file, "--token-file");
    if (!token.ok()) return token.status();
    options.cluster_token = *token;
  }
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(flags.tls, /*need_certificate=*/false);
  if (!tls.ok()) return tls.status();
  options.tls = *std::move(tls);
  absl::StatusOr<std::unique_ptr<HeadClient>> head = HeadClient::Create(flags.head, options);
  if (!head.ok()) {
    return absl::Status(head.status().code(), absl::StrCat("--head: ", head.status().message()));
  }
  return head;
}

// Serves `registry` on --metrics-listen; null when that is not set.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const Flags& flags, const std::shared_ptr<prometheus::Registry>& registry) {
  if (flags.metrics_listen.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
      MetricsServer::Start(flags.metrics_listen);
  if (!metrics.ok()) return metrics.status();
  (*metrics)->Register(registry);
  if (!flags.metrics_port_file.empty())
    WritePortFile(flags.metrics_port_file, (*metrics)->port()).IgnoreError();
  return metrics;
}

// Setup failed: the reason on stderr, and the exit code for a bad setup.
int SetupFailed(const absl::Status& status) {
  LogError(status.message());
  return 2;
}

int Run(const Flags& flags) {
  absl::StatusOr<AutoscalerConfig> config = LoadAutoscalerConfig(flags.config);
  if (!config.ok()) return SetupFailed(config.status());
  if (flags.check_config) {
    PrintPools(flags.config, *config);
    return 0;
  }
  absl::StatusOr<std::unique_ptr<NodeProvider>> provider =
      MakeNodeProvider(config->provider, flags.head);
  if (!provider.ok()) return SetupFailed(provider.status());
  absl::StatusOr<std::unique_ptr<HeadClient>> head = ConnectToHead(flags);
  if (!head.ok()) return SetupFailed(head.status());

  auto registry = std::make_shared<prometheus::Registry>();
  auto& actions_total =
      prometheus::BuildCounter()
          .Name("berth_autoscaler_actions_total")
          .Help("Actions carried out by berth-autoscaler, by kind, pool and result.")
          .Register(*registry);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics = StartMetrics(flags, registry);
  if (!metrics.ok()) return SetupFailed(metrics.status());

  Autoscaler autoscaler(*config, provider->get(), head->get(), flags.head, &actions_total);
  LogInfo(config->pools.size(), " pool(s), provider ", config->provider.type, ", head ",
          flags.head);
  while (!stop_requested) {
    const absl::Time next = absl::Now() + absl::Milliseconds(flags.period_ms);
    autoscaler.RunPass();
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
  app.add_option(
         "--head", flags.head,
         "head address, HOST:PORT, or the active head and its standbys, HOST:PORT,HOST:PORT")
      ->capture_default_str();
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
  berth::AddVersionFlag(app, "berth-autoscaler");
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-autoscaler");
  struct sigaction on_stop {};
  on_stop.sa_handler = [](int) { berth::stop_requested = 1; };
  sigaction(SIGTERM, &on_stop, nullptr);
  sigaction(SIGINT, &on_stop, nullptr);
  return berth::Run(flags);
}
