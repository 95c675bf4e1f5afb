// berth: the command-line client of a berth cluster.
//
//   berth [--address HOST:PORT] [--timeout SECONDS] [-o table|json] COMMAND
//
// Commands: nodes, status, drain, pg {create,get,list,remove}, job
// {submit,get,list,stop,watch}. Each command registers its flags and, when
// chosen, an action that runs after parsing with a connected HeadClient; new
// commands plug in the same way.
// Exit codes: 0 ok, 1 the head returned an error (stderr: `berth: CODE:
// message`) or a followed job did not succeed, 2 usage error (stderr names
// the flag).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/bundle_args.h"
#include "client/format.h"
#include "client/head_client.h"
#include "client/job_args.h"

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

// --- berth job ... ---------------------------------------------------------

constexpr double kDefaultPollSeconds = 0.5;

bool IsTerminal(v1::TrainJobState state) {
  return state == v1::TRAIN_JOB_STATE_SUCCEEDED || state == v1::TRAIN_JOB_STATE_FAILED ||
         state == v1::TRAIN_JOB_STATE_STOPPED;
}

// Polls job `id` every `poll` until it ends, and returns it as it ended.
// In table mode prints its progress line whenever that changes, so the user
// sees the loss fall. DEADLINE_EXCEEDED once `deadline` passes; the job
// keeps running.
absl::StatusOr<v1::TrainJobInfo> FollowJob(const Context& ctx, const std::string& id,
                                           absl::Duration poll, absl::Time deadline) {
  v1::GetTrainJobRequest request;
  request.set_job_id(id);
  std::string last_line;
  for (;;) {
    absl::StatusOr<v1::GetTrainJobResponse> got = ctx.client.GetTrainJob(request);
    if (!got.ok()) return got.status();
    const std::string line = FormatTrainProgress(got->job());
    if (!ctx.json && line != last_line) std::cout << line << std::endl;
    last_line = line;
    if (IsTerminal(got->job().state())) return got->job();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("job ", id, " has not ended yet (", line,
                                                      "); `berth job watch ", id,
                                                      "` follows it further"));
    }
    absl::SleepFor(std::min(poll, deadline - now));
  }
}

// Ends a followed job's output: in JSON what `berth job get` prints, else
// with `detail` the `berth job get` table. Exit 0 only if it SUCCEEDED,
// else 1 with the head's message on stderr.
int JobEnded(const Context& ctx, const v1::TrainJobInfo& job, bool detail) {
  if (ctx.json) {
    v1::GetTrainJobResponse response;
    *response.mutable_job() = job;
    if (const int printed = PrintJson(response); printed != kExitOk) return printed;
  } else if (detail) {
    std::cout << "\n" << FormatTrainJob(job);
  }
  if (job.state() == v1::TRAIN_JOB_STATE_SUCCEEDED) return kExitOk;
  std::cerr << "berth: job " << job.job_id() << " did not succeed: " << job.message() << "\n";
  return kExitHeadError;
}

struct JobSubmitFlags {
  JobSubmitArgs args;
  double wait_seconds = 0;
  CLI::Option* wait = nullptr;  // count() > 0 when --wait was given
};

int RunJobSubmit(const Context& ctx, const JobSubmitFlags& flags) {
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(flags.args);
  if (!spec.ok()) return UsageError(spec.status());
  v1::SubmitTrainJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  absl::StatusOr<v1::SubmitTrainJobResponse> submitted =
      ctx.client.SubmitTrainJob(std::move(request));
  if (flags.wait->count() == 0 || !submitted.ok()) {
    return Print(ctx, submitted, [](const v1::SubmitTrainJobResponse& r) {
      return absl::StrCat(r.job_id(), "\n");
    });
  }
  if (!ctx.json) std::cout << submitted->job_id() << std::endl;
  absl::StatusOr<v1::TrainJobInfo> job =
      FollowJob(ctx, submitted->job_id(), absl::Seconds(kDefaultPollSeconds),
                absl::Now() + absl::Seconds(flags.wait_seconds));
  if (!job.ok()) return HeadError(job.status());
  return JobEnded(ctx, *job, /*detail=*/true);
}

struct JobIdFlags {
  std::string id;
};

int RunJobGet(const Context& ctx, const JobIdFlags& flags) {
  v1::GetTrainJobRequest request;
  request.set_job_id(flags.id);
  return Print(ctx, ctx.client.GetTrainJob(request),
               [](const v1::GetTrainJobResponse& r) { return FormatTrainJob(r.job()); });
}

struct JobListFlags {
  std::vector<std::string> states;
};

int RunJobList(const Context& ctx, const JobListFlags& flags) {
  v1::ListTrainJobsRequest request;
  for (const std::string& text : flags.states) {
    absl::StatusOr<v1::TrainJobState> state = ParseTrainJobStateArg(text);
    if (!state.ok()) return UsageError(state.status());
    request.add_states(*state);
  }
  return Print(ctx, ctx.client.ListTrainJobs(request), FormatTrainJobs);
}

int RunJobStop(const Context& ctx, const JobIdFlags& flags) {
  v1::StopTrainJobRequest request;
  request.set_job_id(flags.id);
  return Print(ctx, ctx.client.StopTrainJob(request), [&](const v1::StopTrainJobResponse&) {
    return absl::StrCat("stopped ", flags.id, "\n");
  });
}

struct JobWatchFlags {
  std::string id;
  double interval_seconds = kDefaultPollSeconds;
};

int RunJobWatch(const Context& ctx, const JobWatchFlags& flags) {
  absl::StatusOr<v1::TrainJobInfo> job =
      FollowJob(ctx, flags.id, absl::Seconds(flags.interval_seconds), absl::InfiniteFuture());
  if (!job.ok()) return HeadError(job.status());
  return JobEnded(ctx, *job, /*detail=*/false);
}

void AddJobCommands(CLI::App& app, Action* action) {
  CLI::App* job = app.add_subcommand("job", "Distributed training jobs");
  job->require_subcommand(1);

  auto submit = std::make_shared<JobSubmitFlags>();
  JobSubmitArgs& args = submit->args;
  CLI::App* submit_cmd = job->add_subcommand(
      "submit",
      "Submit a train job; prints its id. Without a command after `--` it runs the built-in "
      "trainer");
  submit_cmd->add_option("--num-workers", args.num_workers, "Number of workers (world size)")
      ->required();
  submit_cmd->add_flag("--use-gpu", args.use_gpu, "Workers use GPUs (GPU=1 each by default)");
  submit_cmd->add_option("--resources-per-worker", args.resources_per_worker,
                         "Resources of each worker, e.g. \"GPU=1,CPU=2\"");
  submit_cmd->add_option("--trainer-resources", args.trainer_resources,
                         "Resources of the trainer, shared with rank 0's bundle, e.g. "
                         "\"CPU=1,memory=200Gi\" (default CPU=1)");
  submit_cmd->add_option("--accelerator-type", args.accelerator_type,
                         "GPU model the workers need, e.g. A10G");
  submit_cmd->add_option("--strategy", args.strategy, "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")
      ->capture_default_str();
  submit_cmd
      ->add_option("--max-failures", args.max_failures,
                   "Restarts from the latest checkpoint before the job fails; -1 = unlimited")
      ->capture_default_str();
  submit_cmd->add_option("--name", args.name, "Name (need not be unique)");
  submit_cmd->add_option("--storage-path", args.storage_path,
                         "Where checkpoints go (default: the head's storage)");
  submit_cmd->add_option(
      "--steps", args.steps,
      absl::StrCat("Built-in trainer: training steps (default ", kDefaultTrainSteps, ")"));
  submit_cmd->add_option("--lr", args.lr, "Built-in trainer: learning rate");
  submit_cmd->add_option("--batch-size", args.batch_size, "Built-in trainer: per-worker batch");
  submit_cmd->add_option("--checkpoint-every", args.checkpoint_every,
                         "Built-in trainer: checkpoint every this many steps (0 = at the end)");
  // One value per --env, so that the `--` before the command ends the
  // flags rather than just this option's values.
  submit_cmd->add_option("--env", args.env, "Command: KEY=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  submit_cmd->add_option("COMMAND", args.command,
                         "After `--`: the program and arguments every rank runs");
  submit->wait = submit_cmd
                     ->add_option("--wait", submit->wait_seconds,
                                  "Follow the job up to SECONDS until it ends, then print it; "
                                  "exit 0 only if it SUCCEEDED")
                     ->check(CLI::Range(0.0, 7 * 24 * 3600.0));
  OnChosen(submit_cmd, action, submit, RunJobSubmit);

  auto get = std::make_shared<JobIdFlags>();
  CLI::App* get_cmd = job->add_subcommand("get", "Show one job, its failures and its rank table");
  get_cmd->add_option("ID", get->id, "Job id")->required();
  OnChosen(get_cmd, action, get, RunJobGet);

  auto list = std::make_shared<JobListFlags>();
  CLI::App* list_cmd = job->add_subcommand("list", "List train jobs");
  list_cmd->add_option("--state", list->states,
                       "Only jobs in this state (repeatable): PENDING, STARTING, RUNNING, "
                       "RESTARTING, SUCCEEDED, FAILED, STOPPED");
  OnChosen(list_cmd, action, list, RunJobList);

  auto stop = std::make_shared<JobIdFlags>();
  CLI::App* stop_cmd =
      job->add_subcommand("stop", "Stop a job's workers and release its placement group");
  stop_cmd->add_option("ID", stop->id, "Job id")->required();
  OnChosen(stop_cmd, action, stop, RunJobStop);

  auto watch = std::make_shared<JobWatchFlags>();
  CLI::App* watch_cmd = job->add_subcommand(
      "watch",
      "Print step, loss and state as they change until the job ends; exit 0 only if "
      "it SUCCEEDED");
  watch_cmd->add_option("ID", watch->id, "Job id")->required();
  watch_cmd->add_option("--interval", watch->interval_seconds, "Seconds between polls")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  OnChosen(watch_cmd, action, watch, RunJobWatch);
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

  AddJobCommands(app, action);
}

int Main(int argc, char** argv) {
  CLI::App app("berth: the client of a berth cluster (placement groups, train jobs, nodes, status)",
               "berth");
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
