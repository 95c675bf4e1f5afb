// berth: the command-line client of a berth cluster.
//
//   berth [--address HOST:PORT] [--timeout SECONDS] [-o table|json] COMMAND
//
// Commands: nodes, status, drain, pg {create,get,list,remove}. Each command
// registers its flags and, when chosen, an action that runs after parsing
// with a connected HeadClient; new commands plug in the same way.
// Exit codes: 0 ok, 1 the head returned an error (stderr: `berth: CODE:
// message`), 2 usage error (stderr names the flag).
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/bundle_args.h"
#include "client/format.h"
#include "client/head_client.h"

namespace berth {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitHeadError = 1;
constexpr int kExitUsage = 2;

constexpr const char* kDefaultAddress = "127.0.0.1:6380";

// What every action gets.
struct Context {
  HeadClient& client;
  bool json;
};

// A chosen command, run once parsing succeeded.
using Action = std::function<int(const Context&)>;

int HeadError(const absl::Status& status) {
  std::cerr << "berth: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
  return kExitHeadError;
}

int UsageError(const absl::Status& status) {
  std::cerr << "berth: " << status.message() << "\n";
  return kExitUsage;
}

int PrintJson(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return HeadError(json.status());
  std::cout << *json;
  return kExitOk;
}

// Prints a successful response as JSON or as `table(response)`.
template <typename Response, typename Table>
int Print(const Context& ctx, const absl::StatusOr<Response>& response, Table table) {
  if (!response.ok()) return HeadError(response.status());
  if (ctx.json) return PrintJson(*response);
  std::cout << table(*response);
  return kExitOk;
}

// Registers `cmd`'s action: `run(ctx, flags)` with the flags parsed.
template <typename Flags>
void OnChosen(CLI::App* cmd, Action* action, std::shared_ptr<Flags> flags,
              int (*run)(const Context&, const Flags&)) {
  cmd->callback([=] { *action = [=](const Context& ctx) { return run(ctx, *flags); }; });
}

// --- berth nodes, berth status ---------------------------------------------

struct NoFlags {};

int RunNodes(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.ListNodes(), FormatNodes);
}

int RunStatus(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.GetClusterStatus(), FormatClusterStatus);
}

// --- berth drain -----------------------------------------------------------

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

// --- berth pg ... ----------------------------------------------------------

struct PgCreateFlags {
  std::string name;
  std::string strategy = "PACK";
  std::vector<std::string> bundles;
  int replicas = 1;
  int priority = 0;
  double wait_seconds = 0;
  CLI::Option* wait = nullptr;  // count() > 0 when --wait was given
};

int RunPgCreate(const Context& ctx, const PgCreateFlags& flags) {
  absl::StatusOr<std::vector<v1::Bundle>> bundles = ParseBundleArgs(flags.bundles, flags.replicas);
  if (!bundles.ok()) return UsageError(bundles.status());
  absl::StatusOr<v1::PlacementStrategy> strategy = ParseStrategyArg(flags.strategy);
  if (!strategy.ok()) return UsageError(strategy.status());

  v1::CreatePlacementGroupRequest request;
  request.set_name(flags.name);
  request.set_strategy(*strategy);
  request.set_priority(flags.priority);
  for (v1::Bundle& bundle : *bundles) *request.add_bundles() = std::move(bundle);
  absl::StatusOr<v1::CreatePlacementGroupResponse> created =
      ctx.client.CreatePlacementGroup(std::move(request));
  if (flags.wait->count() == 0) {
    return Print(ctx, created, [](const v1::CreatePlacementGroupResponse& r) {
      return absl::StrCat(r.placement_group_id(), "\n");
    });
  }
  if (!created.ok()) return HeadError(created.status());

  v1::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id(created->placement_group_id());
  wait.set_timeout_ms(static_cast<uint32_t>(flags.wait_seconds * 1000));
  absl::StatusOr<v1::WaitPlacementGroupReadyResponse> waited =
      ctx.client.WaitPlacementGroupReady(wait);
  const int printed = Print(ctx, waited, [](const v1::WaitPlacementGroupReadyResponse& r) {
    return FormatPlacementGroup(r.placement_group());
  });
  if (printed != kExitOk || waited->ready()) return printed;
  return HeadError(absl::DeadlineExceededError(
      absl::StrCat("placement group ", created->placement_group_id(), " is not ready after ",
                   flags.wait_seconds, "s: ", waited->placement_group().pending_reason())));
}

struct PgGetFlags {
  std::string id_or_name;
};

int RunPgGet(const Context& ctx, const PgGetFlags& flags) {
  return Print(ctx, ctx.client.FindPlacementGroup(flags.id_or_name),
               [](const v1::GetPlacementGroupResponse& r) {
                 return FormatPlacementGroup(r.placement_group());
               });
}

struct PgListFlags {
  std::vector<std::string> states;
};

int RunPgList(const Context& ctx, const PgListFlags& flags) {
  v1::ListPlacementGroupsRequest request;
  for (const std::string& text : flags.states) {
    absl::StatusOr<v1::PlacementGroupState> state = ParsePlacementGroupStateArg(text);
    if (!state.ok()) return UsageError(state.status());
    request.add_states(*state);
  }
  return Print(ctx, ctx.client.ListPlacementGroups(request), FormatPlacementGroups);
}

struct PgRemoveFlags {
  std::string id;
};

int RunPgRemove(const Context& ctx, const PgRemoveFlags& flags) {
  v1::RemovePlacementGroupRequest request;
  request.set_placement_group_id(flags.id);
  return Print(ctx, ctx.client.RemovePlacementGroup(request),
               [&](const v1::RemovePlacementGroupResponse&) {
                 return absl::StrCat("removed ", flags.id, "\n");
               });
}

void AddCommands(CLI::App& app, Action* action) {
  auto no_flags = std::make_shared<NoFlags>();
  OnChosen(app.add_subcommand("nodes", "List the cluster's nodes and their free resources"), action,
           no_flags, RunNodes);
  OnChosen(app.add_subcommand("status", "Cluster totals, availability and pending demand"), action,
           no_flags, RunStatus);

  auto drain = std::make_shared<DrainFlags>();
  CLI::App* drain_cmd =
      app.add_subcommand("drain", "Stop placing bundles on a node; move its groups");
  drain_cmd->add_option("NODE_ID", drain->node_id, "Node to drain")->required();
  drain_cmd->add_option("--reason", drain->reason, "Why, shown in `berth nodes`");
  OnChosen(drain_cmd, action, drain, RunDrain);

  CLI::App* pg = app.add_subcommand("pg", "Placement groups");
  pg->require_subcommand(1);

  auto create = std::make_shared<PgCreateFlags>();
  CLI::App* create_cmd = pg->add_subcommand("create", "Create a placement group; prints its id");
  create_cmd->add_option("--name", create->name, "Unique name (optional)");
  create_cmd
      ->add_option("--strategy", create->strategy, "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")
      ->capture_default_str();
  create_cmd
      ->add_option(
          "--bundle", create->bundles,
          "Bundle, repeatable: \"GPU=1,CPU=2,memory=16Gi\" or \"GPU=1;zone in (a,b), !spot\"")
      ->required();
  create_cmd->add_option("--replicas", create->replicas, "Repeat the --bundle list N times")
      ->capture_default_str();
  create_cmd->add_option("--priority", create->priority, "Higher is placed first")
      ->capture_default_str();
  create->wait = create_cmd
                     ->add_option("--wait", create->wait_seconds,
                                  "Wait up to SECONDS for the group to be CREATED, then print it")
                     ->check(CLI::Range(0.0, 7 * 24 * 3600.0));
  OnChosen(create_cmd, action, create, RunPgCreate);

  auto get = std::make_shared<PgGetFlags>();
  CLI::App* get_cmd = pg->add_subcommand("get", "Show one placement group and its bundles");
  get_cmd->add_option("ID_OR_NAME", get->id_or_name, "Group id or name")->required();
  OnChosen(get_cmd, action, get, RunPgGet);

  auto list = std::make_shared<PgListFlags>();
  CLI::App* list_cmd = pg->add_subcommand("list", "List placement groups");
  list_cmd->add_option("--state", list->states,
                       "Only groups in this state (repeatable): PENDING, PREPARED, CREATED, "
                       "RESCHEDULING, REMOVED");
  OnChosen(list_cmd, action, list, RunPgList);

  auto remove = std::make_shared<PgRemoveFlags>();
  CLI::App* remove_cmd =
      pg->add_subcommand("remove", "Remove a placement group, releasing its bundles");
  remove_cmd->add_option("ID", remove->id, "Group id")->required();
  OnChosen(remove_cmd, action, remove, RunPgRemove);
}

int Main(int argc, char** argv) {
  CLI::App app("berth: the client of a berth cluster (placement groups, nodes, status)", "berth");
  // Global flags are accepted after the command too: `berth pg list -o json`.
  app.fallthrough();
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return absl::StrCat("berth: ", e.what(), "\nRun with --help for more information.\n");
  });

  std::string address = kDefaultAddress;
  double timeout_seconds = 10;
  std::string output = "table";
  app.add_option("--address", address, "Head address host:port")
      ->envname("BERTH_ADDRESS")
      ->capture_default_str();
  app.add_option("--timeout", timeout_seconds, "Deadline of each call, seconds")
      ->check(CLI::Range(0.001, 24 * 3600.0))
      ->capture_default_str();
  app.add_option("-o,--output", output, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  Action action;
  AddCommands(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == kExitOk ? kExitOk : kExitUsage;
  }

  HeadClientOptions options;
  options.timeout = absl::Seconds(timeout_seconds);
  absl::StatusOr<std::unique_ptr<HeadClient>> client = HeadClient::Create(address, options);
  // HeadClient names the field ("address: ..."); the user typed the flag.
  if (!client.ok()) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("--", client.status().message())));
  }
  return action(Context{**client, output == "json"});
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) { return berth::Main(argc, argv); }
