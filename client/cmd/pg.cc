// berth pg create|get|list|remove: placement groups.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bundle_args.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "client/job_args.h"

namespace berth {
namespace {

struct PgCreateFlags {
  std::string name;
  std::string queue;
  std::string strategy = "PACK";
  std::vector<std::string> bundles;
  int replicas = 1;
  int priority = 0;
  std::string priority_class;
  std::string time_limit;
  bool non_preemptible = false;
  std::string wait;  // --wait's value; "" = not given
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
  request.set_queue(flags.queue);
  request.set_priority_class(flags.priority_class);
  if (flags.non_preemptible) request.set_preemptible(false);
  if (!flags.time_limit.empty()) {
    absl::StatusOr<int64_t> limit = ParseDurationSeconds(flags.time_limit, "--time-limit", 1);
    if (!limit.ok()) return UsageError(limit.status());
    request.set_time_limit_s(*limit);
  }
  for (v1::Bundle& bundle : *bundles) *request.add_bundles() = std::move(bundle);
  absl::StatusOr<v1::CreatePlacementGroupResponse> created =
      ctx.client.CreatePlacementGroup(std::move(request));
  if (flags.wait.empty()) {
    return Print(ctx, created, [](const v1::CreatePlacementGroupResponse& r) {
      return absl::StrCat(r.placement_group_id(), "\n");
    });
  }
  absl::StatusOr<absl::Duration> most = WaitDuration(flags.wait);
  if (!most.ok()) return UsageError(most.status());
  if (!created.ok()) return HeadError(created.status());

  // In calls of at most 30 s each: every call has its deadline.
  const absl::Time until = absl::Now() + *most;
  v1::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id(created->placement_group_id());
  absl::StatusOr<v1::WaitPlacementGroupReadyResponse> waited;
  do {
    const absl::Duration left = std::max(absl::ZeroDuration(), until - absl::Now());
    wait.set_timeout_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(std::min(left, absl::Seconds(30)))));
    waited = ctx.client.WaitPlacementGroupReady(wait);
  } while (waited.ok() && !waited->ready() && absl::Now() < until);
  const int printed = Print(ctx, waited, [](const v1::WaitPlacementGroupReadyResponse& r) {
    return FormatPlacementGroup(r.placement_group());
  });
  if (printed != kExitOk || waited->ready()) return printed;
  return HeadError(absl::DeadlineExceededError(
      absl::StrCat("placement group ", created->placement_group_id(), " is not ready after ",
                   flags.wait, ": ", waited->placement_group().pending_reason())));
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

}  // namespace

void AddPgCommands(CLI::App& app, Action* action) {
  CLI::App* pg = app.add_subcommand("pg", "Placement groups");
  pg->require_subcommand(1);

  auto create = std::make_shared<PgCreateFlags>();
  CLI::App* create_cmd = pg->add_subcommand("create", "Create a placement group; prints its id");
  create_cmd->add_option("--name", create->name, "Unique name (optional)");
  create_cmd->add_option("--queue", create->queue, "Queue (default: the default queue)");
  create_cmd->add_option("--priority-class", create->priority_class,
                         "A priority class (berth queue priority-class) instead of --priority");
  create_cmd->add_option("--time-limit", create->time_limit,
                         "Like Slurm's --time, e.g. 2h: it may start past a reserved gang");
  create_cmd->add_flag("--non-preemptible", create->non_preemptible,
                       "Never preempted; then it runs only within its queue's nominal quota");
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
  AddWaitFlag(create_cmd, create->wait, "the group is CREATED, then print it");
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

}  // namespace berth
