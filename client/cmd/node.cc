// berth nodes, berth drain, berth undrain, berth node gpu-healthy: the
// cluster's nodes.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "client/job_args.h"

namespace berth {
namespace {

int RunNodes(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.ListNodes(), FormatNodes);
}

struct DrainFlags {
  std::string node_id;
  std::string reason;
  std::string deadline;  // a duration from now; empty = none
};

int RunDrain(const Context& ctx, const DrainFlags& flags) {
  v1::DrainNodeRequest request;
  request.set_node_id(flags.node_id);
  request.set_reason(flags.reason);
  if (!flags.deadline.empty()) {
    absl::StatusOr<int64_t> seconds = ParseDurationSeconds(flags.deadline, "--deadline", 0);
    if (!seconds.ok()) return UsageError(seconds.status());
    request.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Seconds(*seconds)));
  }
  absl::StatusOr<v1::DrainNodeResponse> response = ctx.client.DrainNode(request);
  if (response.ok() && !response->accepted()) {
    return HeadError(absl::FailedPreconditionError(
        absl::StrCat("the head did not accept draining node ", flags.node_id)));
  }
  return Print(ctx, response, [&](const v1::DrainNodeResponse& r) {
    const std::string by =
        request.deadline_unix_ms() == 0
            ? "jobs move at their next checkpoint"
            : absl::StrCat("everything moves by ", Timestamp(request.deadline_unix_ms()));
    return absl::StrCat("node ", flags.node_id, " is draining; ", r.bundles_to_move(),
                        " bundle(s) to move; ", by, "\n");
  });
}

int RunUndrain(const Context& ctx, const std::string& node_id) {
  if (absl::Status s = ctx.client.UndrainNode(node_id); !s.ok()) return HeadError(s);
  if (!ctx.json) std::cout << "node " << node_id << " is ALIVE again\n";
  return ctx.json ? PrintJson(v1::UndrainNodeResponse()) : kExitOk;
}

struct GpuHealthyFlags {
  std::string node_id;
  uint32_t gpu_index = 0;
};

int RunGpuHealthy(const Context& ctx, const GpuHealthyFlags& flags) {
  v1::MarkGpuHealthyRequest request;
  request.set_node_id(flags.node_id);
  request.set_gpu_index(flags.gpu_index);
  return Print(ctx, ctx.client.MarkGpuHealthy(request), [&](const v1::MarkGpuHealthyResponse& r) {
    return absl::StrCat("GPU ", flags.gpu_index, " of ", flags.node_id,
                        " is back in service (it was unhealthy: ", r.was_unhealthy_reason(), ")\n");
  });
}

}  // namespace

void AddNodeCommands(CLI::App& app, Action* action) {
  OnChosen(app.add_subcommand("nodes", "List the cluster's nodes and their free resources"), action,
           std::make_shared<NoFlags>(), RunNodes);

  auto drain = std::make_shared<DrainFlags>();
  CLI::App* drain_cmd = app.add_subcommand(
      "drain", "Stop placing bundles on a node and move what runs there to other nodes");
  drain_cmd->add_option("NODE_ID", drain->node_id, "Node to drain")->required();
  drain_cmd->add_option("--reason", drain->reason, "Why, shown in `berth nodes`");
  drain_cmd->add_option("--deadline", drain->deadline,
                        "Jobs not moved at a checkpoint by then (e.g. 10m) are stopped with "
                        "their grace period and restarted elsewhere; default: none");
  OnChosen(drain_cmd, action, drain, RunDrain);

  auto undrain = std::make_shared<std::string>();
  CLI::App* undrain_cmd =
      app.add_subcommand("undrain", "End a node's drain: it takes bundles again");
  undrain_cmd->add_option("NODE_ID", *undrain, "Node to make ALIVE again")->required();
  OnChosen(undrain_cmd, action, undrain, RunUndrain);

  CLI::App* node = app.add_subcommand("node", "One node's GPUs");
  node->require_subcommand(1);
  auto gpu_healthy = std::make_shared<GpuHealthyFlags>();
  CLI::App* gpu_healthy_cmd = node->add_subcommand(
      "gpu-healthy", "Return a GPU found unhealthy to service, once it was checked or replaced");
  gpu_healthy_cmd->add_option("NODE_ID", gpu_healthy->node_id, "The GPU's node")->required();
  gpu_healthy_cmd->add_option("GPU", gpu_healthy->gpu_index, "The GPU's index on the node")
      ->required();
  OnChosen(gpu_healthy_cmd, action, gpu_healthy, RunGpuHealthy);
}

}  // namespace berth
