// berth nodes, berth drain: the cluster's nodes.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cmd/command.h"
#include "client/format.h"

namespace berth {
namespace {

int RunNodes(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.ListNodes(), FormatNodes);
}

struct DrainFlags {
  std::string node_id;
  std::string reason;
};

int RunDrain(const Context& ctx, const DrainFlags& flags) {
  v1::DrainNodeRequest request;
  request.set_node_id(flags.node_id);
  request.set_reason(flags.reason);
  absl::StatusOr<v1::DrainNodeResponse> response = ctx.client.DrainNode(request);
  if (response.ok() && !response->accepted()) {
    return HeadError(absl::FailedPreconditionError(
        absl::StrCat("the head did not accept draining node ", flags.node_id)));
  }
  return Print(ctx, response, [&](const v1::DrainNodeResponse& r) {
    return absl::StrCat("node ", flags.node_id, " is draining; ", r.bundles_to_move(),
                        " bundles to move\n");
  });
}

}  // namespace

void AddNodeCommands(CLI::App& app, Action* action) {
  OnChosen(app.add_subcommand("nodes", "List the cluster's nodes and their free resources"), action,
           std::make_shared<NoFlags>(), RunNodes);

  auto drain = std::make_shared<DrainFlags>();
  CLI::App* drain_cmd =
      app.add_subcommand("drain", "Stop placing bundles on a node; move its groups");
  drain_cmd->add_option("NODE_ID", drain->node_id, "Node to drain")->required();
  drain_cmd->add_option("--reason", drain->reason, "Why, shown in `berth nodes`");
  OnChosen(drain_cmd, action, drain, RunDrain);
}

}  // namespace berth
