// berth: the command-line client of a berth cluster.
//
//   berth [--address HOST:PORT] [--timeout SECONDS] [-o table|json] COMMAND
//
// Commands: up, down, start (local processes, no head needed); submit,
// jobs, job [ID], logs, stop (train jobs, like `ray job` / sbatch / squeue);
// nodes, status, drain, pg {create,get,list,remove}, job
// {submit,get,list,stop,watch}. Each command registers its flags and, when
// chosen, an action that runs after parsing, with a connected HeadClient
// (OnChosen) or without one (OnChosenLocal); new commands plug in the same
// way. The head is --address, else $BERTH_ADDRESS, else the local cluster's
// (`berth up`), else 127.0.0.1:6380.
// Exit codes: 0 ok, 1 the head returned an error (stderr: `berth: CODE:
// message`), a followed job did not succeed or a local process failed, 2
// usage error (stderr names the flag).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "client/bundle_args.h"
#include "client/format.h"
#include "wire/head_client.h"
#include "auth/cluster_token.h"
#include "auth/tls_flags.h"
#include "client/job_args.h"
#include "client/job_file.h"
#include "client/local_cluster.h"

namespace berth {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitHeadError = 1;
constexpr int kExitUsage = 2;

// The global flags, as every action sees them.
struct Globals {
  std::string address;  // --address; empty = discover
  std::string token_file;  // --token-file; empty = discover
  TlsFiles tls;            // --tls-*-file; empty = discover
  double timeout_seconds = 10;
  bool json = false;
};

// What every action that talks to the head gets.
struct Context {
  HeadClient& client;
  const std::string& address;
  bool json;
  absl::Duration timeout;
};

// A chosen command, run once parsing succeeded.
using Action = std::function<int(const Globals&)>;

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

std::string StateDir() { return LocalStateDir(std::getenv("BERTH_HOME"), getuid()); }

// The local cluster's token: `berth up` and `berth start --head` write it.
std::string LocalTokenPath() { return StateDir() + "/token"; }

// The cluster token to send: --token-file, else $BERTH_TOKEN_FILE, else the
// local cluster's when it has one; "" = none.
absl::StatusOr<std::string> ResolveClusterToken(const std::string& flag) {
  const char* env = std::getenv("BERTH_TOKEN_FILE");
  if (!flag.empty()) return LoadClusterToken(flag, "--token-file");
  if (env != nullptr && *env != '\0') return LoadClusterToken(env, "$BERTH_TOKEN_FILE");
  if (access(LocalTokenPath().c_str(), F_OK) == 0) return LoadClusterToken(LocalTokenPath(), "local cluster token");
  return std::string();
}

// The local cluster's CA and certificates: `berth up` and `berth start
// --head` write them (auth/cluster_tls.h).
std::string LocalTlsDir() { return StateDir() + "/tls"; }

// TLS to the head: the --tls-* flags, else $BERTH_TLS_CA_FILE (with
// $BERTH_TLS_CERT_FILE and $BERTH_TLS_KEY_FILE), else the local cluster's
// client certificate when it has one; none = plaintext.
absl::StatusOr<TlsConfig> ResolveTls(const TlsFiles& flags) {
  if (!flags.ca_file.empty() || !flags.cert_file.empty() || !flags.key_file.empty()) {
    return LoadTlsConfig(flags, false);
  }
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value == nullptr ? "" : value);
  };
  if (!env("BERTH_TLS_CA_FILE").empty()) {
    absl::StatusOr<TlsConfig> tls =
        LoadTlsConfig({env("BERTH_TLS_CA_FILE"), env("BERTH_TLS_CERT_FILE"), env("BERTH_TLS_KEY_FILE")}, false);
    if (!tls.ok()) return absl::InvalidArgumentError(absl::StrCat("$BERTH_TLS_*: ", tls.status().message()));
    return tls;
  }
  const TlsFiles local = ClusterTlsFiles(LocalTlsDir(), TlsRole::kClient);
  if (access(local.ca_file.c_str(), F_OK) == 0) return LoadTlsConfig(local, false);
  return TlsConfig{};
}

// Token and TLS as the flags, the environment or the local cluster say.
absl::StatusOr<HeadClientOptions> ResolveClientOptions(const std::string& token_file, const TlsFiles& tls_files) {
  HeadClientOptions options;
  absl::StatusOr<std::string> token = ResolveClusterToken(token_file);
  if (!token.ok()) return token.status();
  options.cluster_token = *std::move(token);
  absl::StatusOr<TlsConfig> tls = ResolveTls(tls_files);
  if (!tls.ok()) return tls.status();
  options.tls = *std::move(tls);
  return options;
}

// Connects to the head the globals name and runs `run` with it.
int WithHead(const Globals& globals, const std::function<int(const Context&)>& run) {
  std::optional<LocalState> state;
  const char* env = std::getenv("BERTH_ADDRESS");
  // The state file matters only when nothing else names the head.
  if (globals.address.empty() && (env == nullptr || *env == '\0')) {
    absl::StatusOr<std::optional<LocalState>> read = ReadStateFile(StateFilePath(StateDir()));
    if (!read.ok()) return HeadError(read.status());
    state = *std::move(read);
  }
  const std::string address = ResolveHeadAddress(globals.address, env, state);
  absl::StatusOr<HeadClientOptions> resolved = ResolveClientOptions(globals.token_file, globals.tls);
  if (!resolved.ok()) return UsageError(resolved.status());
  HeadClientOptions options = *std::move(resolved);
  options.timeout = absl::Seconds(globals.timeout_seconds);
  absl::StatusOr<std::unique_ptr<HeadClient>> client = HeadClient::Create(address, options);
  // HeadClient names the field ("address: ..."); the user typed the flag.
  if (!client.ok()) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("--", client.status().message())));
  }
  return run(Context{**client, address, globals.json, options.timeout});
}

// Registers `cmd`'s action: `run(ctx, flags)` with the flags parsed and the
// head connected.
template <typename Flags>
void OnChosen(CLI::App* cmd, Action* action, std::shared_ptr<Flags> flags,
              int (*run)(const Context&, const Flags&)) {
  cmd->callback([=] {
    *action = [=](const Globals& globals) {
      return WithHead(globals, [&](const Context& ctx) { return run(ctx, *flags); });
    };
  });
}

// The same for commands that need no running head (up, down, start).
template <typename Flags>
void OnChosenLocal(CLI::App* cmd, Action* action, std::shared_ptr<Flags> flags,
                   int (*run)(const Globals&, const Flags&)) {
  cmd->callback([=] { *action = [=](const Globals& globals) { return run(globals, *flags); }; });
}

// --- berth nodes, berth status ---------------------------------------------

struct NoFlags {};

int RunNodes(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.ListNodes(), FormatNodes);
}

// "CREATED 2, PENDING 1" from a state count list; `prefix` is stripped from
// the enum names.
template <typename Counts, typename NameOf>
std::string StateCounts(const Counts& counts, absl::string_view prefix, NameOf name_of) {
  if (counts.empty()) return "(none)";
  std::vector<std::string> parts;
  for (const auto& c : counts) {
    std::string name = name_of(c.state());
    if (absl::StartsWith(name, prefix)) name.erase(0, prefix.size());
    parts.push_back(absl::StrCat(name, " ", c.count()));
  }
  return absl::StrJoin(parts, ", ");
}

int RunStatus(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.GetClusterStatus(), [](const v1::GetClusterStatusResponse& r) {
    return absl::StrCat(
        FormatClusterStatus(r), "\nPlacement groups: ",
        StateCounts(r.placement_groups(), "PLACEMENT_GROUP_STATE_",
                    [](v1::PlacementGroupState s) { return v1::PlacementGroupState_Name(s); }),
        "\nTrain jobs: ",
        StateCounts(r.train_jobs(), "TRAIN_JOB_STATE_",
                    [](v1::TrainJobState s) { return v1::TrainJobState_Name(s); }),
        "\n");
  });
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

// What a followed job is doing: why it waits while PENDING, how many
// workers started while STARTING, else step, loss and state.
std::string ProgressLine(const v1::TrainJobInfo& job) {
  if (job.state() == v1::TRAIN_JOB_STATE_PENDING && !job.message().empty()) {
    return absl::StrCat("pending: ", job.message());
  }
  if (job.state() == v1::TRAIN_JOB_STATE_STARTING) {
    // num_workers 0 means the default, 1.
    const uint32_t workers = std::max(job.spec().scaling_config().num_workers(), 1u);
    return absl::StrCat("workers started ", job.workers_size(), "/", workers);
  }
  return FormatTrainProgress(job);
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
    const std::string line = ProgressLine(got->job());
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

// Submits `spec`; prints the id, or with `wait` follows the job up to
// `wait_seconds` and ends as JobEnded does.
int SubmitJob(const Context& ctx, v1::TrainJobSpec spec, bool wait, double wait_seconds) {
  v1::SubmitTrainJobRequest request;
  *request.mutable_spec() = std::move(spec);
  absl::StatusOr<v1::SubmitTrainJobResponse> submitted =
      ctx.client.SubmitTrainJob(std::move(request));
  if (!wait || !submitted.ok()) {
    return Print(ctx, submitted, [](const v1::SubmitTrainJobResponse& r) {
      return absl::StrCat(r.job_id(), "\n");
    });
  }
  if (!ctx.json) std::cout << submitted->job_id() << std::endl;
  absl::StatusOr<v1::TrainJobInfo> job =
      FollowJob(ctx, submitted->job_id(), absl::Seconds(kDefaultPollSeconds),
                absl::Now() + absl::Seconds(wait_seconds));
  if (!job.ok()) return HeadError(job.status());
  return JobEnded(ctx, *job, /*detail=*/true);
}

int RunJobSubmit(const Context& ctx, const JobSubmitFlags& flags) {
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(flags.args);
  if (!spec.ok()) return UsageError(spec.status());
  return SubmitJob(ctx, *std::move(spec), flags.wait->count() > 0, flags.wait_seconds);
}

struct SubmitFlags {
  std::string file;
  bool wait = false;
  double timeout_seconds = 600;
};

int RunSubmit(const Context& ctx, const SubmitFlags& flags) {
  absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile(flags.file);
  // The message already names the file, line and key.
  if (!spec.ok()) {
    std::cerr << "berth: " << spec.status().message() << "\n";
    return kExitHeadError;
  }
  return SubmitJob(ctx, *std::move(spec), flags.wait, flags.timeout_seconds);
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

struct LogsFlags {
  std::string id;
  CLI::Option* rank = nullptr;  // count() > 0 when --rank was given
  uint32_t rank_value = 0;
  bool follow = false;
};

// Writes log chunks to stdout, with "[rank r] " before each line when they
// come from several ranks; a line split across chunks is joined first.
class LogPrinter {
 public:
  explicit LogPrinter(bool prefix) : prefix_(prefix) {}

  void Add(const v1::LogChunk& chunk) {
    if (!prefix_) {
      std::cout << chunk.data() << std::flush;
      return;
    }
    std::string& partial = partial_[{chunk.rank(), chunk.stream()}];
    partial += chunk.data();
    size_t end;
    while ((end = partial.find('\n')) != std::string::npos) {
      std::cout << "[rank " << chunk.rank() << "] " << partial.substr(0, end + 1);
      partial.erase(0, end + 1);
    }
    std::cout << std::flush;
  }

  // Prints the unterminated last lines.
  void Flush() {
    for (const auto& [key, partial] : partial_) {
      if (!partial.empty()) std::cout << "[rank " << key.first << "] " << partial << "\n";
    }
    partial_.clear();
  }

 private:
  const bool prefix_;
  std::map<std::pair<uint32_t, int>, std::string> partial_;
};

// The head's StreamTrainJobLogs; a server stream, so not a HeadClient call
// (no retries: chunks already printed cannot be taken back).
int RunLogs(const Context& ctx, const LogsFlags& flags) {
  auto stub = v1::TrainJobService::NewStub(ctx.client.channel());
  v1::StreamTrainJobLogsRequest request;
  request.set_job_id(flags.id);
  if (flags.rank->count() > 0) request.set_rank(flags.rank_value);
  request.set_follow(flags.follow);
  grpc::ClientContext context;
  AttachClusterToken(&context, ctx.client.cluster_token());
  // A followed job may run for days; the rest is bounded like any call.
  if (!flags.follow) context.set_deadline(absl::ToChronoTime(absl::Now() + ctx.timeout));
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
      stub->StreamTrainJobLogs(&context, request);
  LogPrinter printer(/*prefix=*/flags.rank->count() == 0);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) printer.Add(chunk);
  printer.Flush();
  const grpc::Status status = reader->Finish();
  if (status.ok()) return kExitOk;
  return HeadError(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                status.error_message()));
}

// `berth jobs`, `berth job ID`, `berth submit FILE`, `berth logs ID`, `berth
// stop ID`: the everyday verbs, beside the `job` subcommands.
void AddTopLevelJobCommands(CLI::App& app, CLI::App* job, Action* action) {
  auto submit = std::make_shared<SubmitFlags>();
  CLI::App* submit_cmd =
      app.add_subcommand("submit", "Submit the train job a YAML job file describes; prints its id");
  submit_cmd->add_option("FILE", submit->file, "Job file (see `berth submit --help`)")
      ->required();
  submit_cmd->add_flag("--wait", submit->wait,
                       "Follow the job until it ends, then print its rank table; exit 0 only if "
                       "it SUCCEEDED");
  submit_cmd->add_option("--timeout-s", submit->timeout_seconds, "With --wait: give up after SECONDS")
      ->check(CLI::Range(0.0, 7 * 24 * 3600.0))
      ->capture_default_str();
  OnChosen(submit_cmd, action, submit, RunSubmit);

  auto jobs = std::make_shared<JobListFlags>();
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "List train jobs (= job list)");
  jobs_cmd->add_option("--state", jobs->states, "Only jobs in this state (repeatable)");
  OnChosen(jobs_cmd, action, jobs, RunJobList);

  auto logs = std::make_shared<LogsFlags>();
  CLI::App* logs_cmd = app.add_subcommand(
      "logs", "Print a job's worker output, \"[rank r] \"-prefixed unless --rank is given");
  logs_cmd->add_option("ID", logs->id, "Job id")->required();
  logs->rank = logs_cmd->add_option("--rank", logs->rank_value, "Only this world rank");
  logs_cmd->add_flag("-f,--follow", logs->follow, "Keep printing new output until the job ends");
  OnChosen(logs_cmd, action, logs, RunLogs);

  auto stop = std::make_shared<JobIdFlags>();
  CLI::App* stop_cmd = app.add_subcommand("stop", "Stop a train job (= job stop)");
  stop_cmd->add_option("ID", stop->id, "Job id")->required();
  OnChosen(stop_cmd, action, stop, RunJobStop);

  // `berth job ID` is `berth job get ID`; job's own callback runs after its
  // subcommand's, so it only acts when none was given.
  auto get = std::make_shared<JobIdFlags>();
  job->add_option("ID", get->id, "Job id: show that job (= job get ID)");
  job->callback([job, action, get] {
    if (!job->get_subcommands().empty()) return;
    if (get->id.empty()) throw CLI::RequiredError("job: a subcommand or a job ID");
    *action = [get](const Globals& globals) {
      return WithHead(globals, [&](const Context& ctx) { return RunJobGet(ctx, *get); });
    };
  });
}

void AddJobCommands(CLI::App& app, Action* action) {
  CLI::App* job = app.add_subcommand("job", "Distributed training jobs");
  job->require_subcommand(0, 1);
  AddTopLevelJobCommands(app, job, action);

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

// --- berth up, berth start, berth down -------------------------------------

constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kStopGrace = absl::Seconds(5);

int LocalError(const absl::Status& status) {
  std::cerr << "berth: " << status.message() << "\n";
  return kExitHeadError;
}

// The processes and files of this machine's cluster, and where the
// binaries that run them are.
struct Local {
  std::string dir = StateDir();
  std::string state_file = StateFilePath(dir);
  std::string log_dir = (std::filesystem::path(dir) / "logs").string();

  absl::StatusOr<std::string> Binary(const std::string& name, const std::string& build_subdir) {
    std::error_code error;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
    const char* path = std::getenv("PATH");
    return FindBinary(name, build_subdir, self, path == nullptr ? "" : path);
  }

  // Starts `name` (role `role`) in the background and records it in `state`
  // and the state file, so that `berth down` stops it even if the rest fails.
  absl::StatusOr<LocalProcess> Spawn(LocalState& state, const std::string& role,
                                     const std::string& name, const std::string& binary,
                                     const std::vector<std::string>& args) {
    LocalProcess process{role, name, 0, binary, absl::StrCat(log_dir, "/", name, ".log")};
    absl::StatusOr<pid_t> pid = SpawnDaemon(binary, args, process.log);
    if (!pid.ok()) return pid.status();
    process.pid = *pid;
    state.processes.push_back(process);
    if (absl::Status written = WriteStateFile(state_file, state); !written.ok()) return written;
    return process;
  }
};

// Why `process` is no longer running, with the end of its log.
absl::Status Exited(const LocalProcess& process) {
  return absl::FailedPreconditionError(absl::StrCat(process.name, " (pid ", process.pid,
                                                    ") exited; the end of ", process.log, ":\n",
                                                    LogTail(process.log, 10)));
}

// Waits until `process` wrote its port to `port_file` (it serves then).
absl::StatusOr<std::string> WaitForPort(const LocalProcess& process, const std::string& port_file) {
  const absl::Time deadline = absl::Now() + kStartTimeout;
  for (;;) {
    std::ifstream in(port_file);
    std::string port;
    if (in >> port) return port;
    if (!IsRunning(process)) return Exited(process);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(process.name, " is not serving after ",
                                                      absl::FormatDuration(kStartTimeout),
                                                      "; see ", process.log));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// Where the local head keeps its state: a head started again after a crash
// (`berth start --head`) continues the cluster; `up` and `down` clear it.
std::string HeadStateDir(const Local& local) { return absl::StrCat(local.dir, "/head-state"); }

// Starts a head listening on `listen` ("host:port", port 0 = any free one)
// and returns its address once it serves.
absl::StatusOr<std::string> StartHead(Local& local, LocalState& state, const std::string& host,
                                      int port) {
  absl::StatusOr<std::string> head = local.Binary("berth-head", "scheduler");
  if (!head.ok()) return head.status();
  absl::StatusOr<std::string> worker = local.Binary("berth-worker", "worker");
  if (!worker.ok()) return worker.status();
  const std::string port_file = absl::StrCat(local.dir, "/head.port");
  std::filesystem::remove(port_file);
  // Secure by default: every RPC of the local cluster carries this token.
  if (access(LocalTokenPath().c_str(), F_OK) != 0) {
    std::error_code ignored;
    std::filesystem::create_directories(local.dir, ignored);
    if (absl::StatusOr<std::string> token = CreateClusterToken(LocalTokenPath()); !token.ok()) return token.status();
  }
  // And TLS: a CA of its own and certificates for the head, the nodes and
  // clients (mutual TLS between the head and the raylets).
  const TlsFiles head_tls = ClusterTlsFiles(LocalTlsDir(), TlsRole::kHead);
  if (access(head_tls.ca_file.c_str(), F_OK) != 0) {
    std::vector<std::string> hosts;
    if (host != "127.0.0.1" && host != "localhost") hosts.push_back(host);
    if (absl::Status s = CreateClusterCertificates(LocalTlsDir(), hosts); !s.ok()) return s;
  }
  absl::StatusOr<LocalProcess> process =
      local.Spawn(state, "head", "head", *head,
                  {"--listen", absl::StrCat(host, ":", port), "--port-file", port_file,
                   "--worker-binary", *worker, "--checkpoint-root",
                   absl::StrCat(local.dir, "/checkpoints"), "--metrics-listen",
                   absl::StrCat(host, ":0"), "--state-dir", HeadStateDir(local), "--token-file",
                   LocalTokenPath(), "--tls-ca-file", head_tls.ca_file, "--tls-cert-file",
                   head_tls.cert_file, "--tls-key-file", head_tls.key_file});
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> bound = WaitForPort(*process, port_file);
  if (!bound.ok()) return bound.status();
  state.head_address = absl::StrCat(host, ":", *bound);
  if (absl::Status written = WriteStateFile(local.state_file, state); !written.ok()) return written;
  return state.head_address;
}

absl::StatusOr<LocalProcess> StartRaylet(Local& local, LocalState& state,
                                         const std::string& head_address, const std::string& name,
                                         std::vector<std::string> flags,
                                         const std::string& metrics_listen = "127.0.0.1:0") {
  absl::StatusOr<std::string> raylet = local.Binary("berth-raylet", "raylet");
  if (!raylet.ok()) return raylet.status();
  if (access(LocalTokenPath().c_str(), F_OK) == 0) flags.insert(flags.end(), {"--token-file", LocalTokenPath()});
  const TlsFiles tls = ClusterTlsFiles(LocalTlsDir(), TlsRole::kNode);
  if (access(tls.ca_file.c_str(), F_OK) == 0) {
    flags.insert(flags.end(), {"--tls-ca-file", tls.ca_file, "--tls-cert-file", tls.cert_file, "--tls-key-file",
                               tls.key_file});
  }
  flags.insert(flags.end(), {"--head", head_address, "--log-dir",
                             absl::StrCat(local.log_dir, "/workers/", name), "--metrics-listen",
                             metrics_listen});
  return local.Spawn(state, "raylet", name, *raylet, flags);
}

// The local state, or an error when any of its processes still runs.
absl::StatusOr<LocalState> NotRunning(const Local& local, absl::string_view what) {
  absl::StatusOr<std::optional<LocalState>> state = ReadStateFile(local.state_file);
  if (!state.ok()) return state.status();
  if (!state->has_value()) return LocalState{};
  for (const LocalProcess& p : (*state)->processes) {
    if (IsRunning(p) && (what.empty() || p.role == what)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a local cluster is already running (", p.name, ", pid ", p.pid,
          (*state)->head_address.empty() ? "" : ", head at " + (*state)->head_address,
          "; state in ", local.state_file, "); `berth down` stops it"));
    }
  }
  // Left over from a cluster that is gone: start afresh, keep the address
  // of a head still recorded for `start --address`.
  return **state;
}

// Waits until the head at `address` lists every node of `ids` ALIVE.
absl::StatusOr<v1::ListNodesResponse> WaitForNodes(const LocalState& state,
                                                   const std::vector<std::string>& ids) {
  absl::StatusOr<HeadClientOptions> options = ResolveClientOptions("", {});
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<HeadClient>> client = HeadClient::Create(state.head_address, *options);
  if (!client.ok()) return client.status();
  const absl::Time deadline = absl::Now() + kStartTimeout;
  for (;;) {
    for (const LocalProcess& p : state.processes) {
      if (!IsRunning(p)) return Exited(p);
    }
    absl::StatusOr<v1::ListNodesResponse> nodes = (*client)->ListNodes();
    std::vector<std::string> missing = ids;
    if (nodes.ok()) {
      for (const v1::NodeInfo& node : nodes->nodes()) {
        if (node.state() == v1::NODE_STATE_ALIVE) {
          missing.erase(std::remove(missing.begin(), missing.end(), node.node_id()),
                        missing.end());
        }
      }
      if (missing.empty()) return nodes;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "nodes not ALIVE after ", absl::FormatDuration(kStartTimeout), ": ",
          absl::StrJoin(missing, ", "), "; logs in ", state.log_dir));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// Stops every process of `state`, raylets first so that they can still
// report to the head, and removes the state file.
void StopLocal(const Local& local, const LocalState& state) {
  std::vector<LocalProcess> raylets, heads;
  for (const LocalProcess& p : state.processes) (p.role == "head" ? heads : raylets).push_back(p);
  StopProcesses(raylets, kStopGrace);
  StopProcesses(heads, kStopGrace);
  std::filesystem::remove(local.state_file);
  std::error_code ignored;
  std::filesystem::remove_all(HeadStateDir(local), ignored);
  std::filesystem::remove(LocalTokenPath(), ignored);
  std::filesystem::remove_all(LocalTlsDir(), ignored);
}

struct UpFlags {
  int nodes = 2;
  int gpus_per_node = 4;
  std::string accelerator_type = "A10G";
  std::string cpus_per_node = "8";
  std::string memory_per_node = "32Gi";
  std::string node_spec;
  int port = 6380;
};

int RunUp(const Globals& globals, const UpFlags& flags) {
  std::vector<NodeSpec> specs;
  if (!flags.node_spec.empty()) {
    absl::StatusOr<std::vector<NodeSpec>> loaded = LoadNodeSpecFile(flags.node_spec);
    if (!loaded.ok()) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--node-spec: ", loaded.status().message())));
    }
    specs = *std::move(loaded);
  } else {
    specs.push_back({"node", flags.gpus_per_node, flags.accelerator_type, flags.cpus_per_node,
                     flags.memory_per_node, {}, flags.nodes});
  }
  Local local;
  absl::StatusOr<LocalState> state = NotRunning(local, "");
  if (!state.ok()) return LocalError(state.status());
  *state = LocalState{};
  state->log_dir = local.log_dir;
  std::error_code ignored;
  std::filesystem::remove_all(HeadStateDir(local), ignored);  // a new cluster

  // On any failure nothing is left running.
  auto fail = [&](const absl::Status& status) {
    StopLocal(local, *state);
    return LocalError(status);
  };
  absl::StatusOr<std::string> address = StartHead(local, *state, "127.0.0.1", flags.port);
  if (!address.ok()) return fail(address.status());
  std::vector<std::string> ids;
  for (const auto& [id, spec] : ExpandNodes(specs)) {
    absl::StatusOr<LocalProcess> raylet =
        StartRaylet(local, *state, *address, id, RayletFlags(id, spec));
    if (!raylet.ok()) return fail(raylet.status());
    ids.push_back(id);
  }
  absl::StatusOr<v1::ListNodesResponse> nodes = WaitForNodes(*state, ids);
  if (!nodes.ok()) return fail(nodes.status());
  if (globals.json) return PrintJson(*nodes);
  std::cout << "head:  " << *address << "\nlogs:  " << local.log_dir << "\n\n"
            << FormatNodes(*nodes) << "\nstop with `berth down`\n";
  return kExitOk;
}

int RunDown(const Globals&, const NoFlags&) {
  Local local;
  absl::StatusOr<std::optional<LocalState>> state = ReadStateFile(local.state_file);
  if (!state.ok()) return LocalError(state.status());
  if (!state->has_value()) {
    std::cout << "no local cluster (no " << local.state_file << ")\n";
    return kExitOk;
  }
  StopLocal(local, **state);
  for (const LocalProcess& p : (*state)->processes) {
    std::cout << "stopped " << p.role << " " << p.name << " (pid " << p.pid << ")\n";
  }
  return kExitOk;
}

struct StartFlags {
  CLI::Option* head = nullptr;  // count() > 0: start a head
  int port = 6380;
  std::string listen = "127.0.0.1";
  std::string address;  // start a raylet of this head
  CLI::Option* num_gpus = nullptr;
  int num_gpus_value = 0;
  std::string accelerator_type;
  std::string resources;
  std::string labels;
  std::string node_id;
  std::string node_pool;
  std::string metrics_listen = "127.0.0.1:0";
};

int RunStart(const Globals&, const StartFlags& flags) {
  const bool head = flags.head->count() > 0;
  if (head == !flags.address.empty()) {
    return UsageError(absl::InvalidArgumentError("start: give either --head or --address"));
  }
  Local local;
  absl::StatusOr<LocalState> state = NotRunning(local, head ? "head" : "");
  // Raylets join a running cluster; only a second head is refused.
  if (!state.ok() && head) return LocalError(state.status());
  if (!state.ok()) {
    absl::StatusOr<std::optional<LocalState>> read = ReadStateFile(local.state_file);
    if (!read.ok()) return LocalError(read.status());
    state = read->value_or(LocalState{});
  }
  // A head started where a cluster's raylets still run continues it from
  // the head's state; otherwise it starts afresh.
  if (head && std::none_of(state->processes.begin(), state->processes.end(), IsRunning)) {
    std::error_code ignored;
    std::filesystem::remove_all(HeadStateDir(local), ignored);
  }
  state->log_dir = local.log_dir;
  if (head) {
    absl::StatusOr<std::string> address = StartHead(local, *state, flags.listen, flags.port);
    if (!address.ok()) return LocalError(address.status());
    std::cout << "head listening at " << *address << " (log " << state->processes.back().log
              << ")\njoin with `berth start --address " << *address << "`\n";
    return kExitOk;
  }
  std::vector<std::string> raylet_flags;
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) raylet_flags.insert(raylet_flags.end(), {flag, value});
  };
  add("--node-id", flags.node_id);
  if (flags.num_gpus->count() > 0) add("--num-gpus", absl::StrCat(flags.num_gpus_value));
  add("--accelerator-type", flags.accelerator_type);
  add("--resources", flags.resources);
  add("--labels", flags.labels);
  add("--node-pool", flags.node_pool);
  const std::string name =
      flags.node_id.empty() ? absl::StrCat("raylet-", state->processes.size()) : flags.node_id;
  absl::StatusOr<LocalProcess> raylet =
      StartRaylet(local, *state, flags.address, name, raylet_flags, flags.metrics_listen);
  if (!raylet.ok()) return LocalError(raylet.status());
  std::cout << "raylet " << name << " (pid " << raylet->pid << ") joining " << flags.address
            << " (log " << raylet->log << ")\n";
  return kExitOk;
}

// --- berth credentials -------------------------------------------------------

struct CredentialsFlags {
  std::string dir;
  std::vector<std::string> hosts;
};

// A cluster token and a CA with head, node and client certificates, for
// clusters `berth up` does not start (Kubernetes, systemd).
int RunCredentials(const Globals&, const CredentialsFlags& flags) {
  std::error_code error;
  std::filesystem::create_directories(flags.dir, error);
  if (error) return UsageError(absl::InvalidArgumentError(absl::StrCat("DIR: ", flags.dir, ": ", error.message())));
  std::filesystem::permissions(flags.dir, std::filesystem::perms::owner_all, error);
  if (access((flags.dir + "/ca.crt").c_str(), F_OK) == 0) {
    return UsageError(absl::AlreadyExistsError(
        absl::StrCat("DIR: ", flags.dir, " already holds a CA (ca.crt); remove it to make new credentials")));
  }
  if (absl::StatusOr<std::string> token = CreateClusterToken(flags.dir + "/token"); !token.ok()) {
    return UsageError(token.status());
  }
  if (absl::Status s = CreateClusterCertificates(flags.dir, flags.hosts); !s.ok()) return UsageError(s);
  std::cout << "wrote " << flags.dir << "/{token,ca.crt,ca.key,head.crt,head.key,node.crt,node.key,client.crt,"
            << "client.key} (mode 0600)\n"
            << "head:   --token-file token --tls-ca-file ca.crt --tls-cert-file head.crt --tls-key-file head.key\n"
            << "raylet: --token-file token --tls-ca-file ca.crt --tls-cert-file node.crt --tls-key-file node.key\n"
            << "users:  BERTH_TOKEN_FILE=token BERTH_TLS_CA_FILE=ca.crt (keep ca.key offline)\n";
  return kExitOk;
}

void AddLocalCommands(CLI::App& app, Action* action) {
  auto credentials = std::make_shared<CredentialsFlags>();
  CLI::App* credentials_cmd = app.add_subcommand(
      "credentials", "Write a cluster token, a CA and head/node/client certificates into DIR (mode 0600)");
  credentials_cmd->add_option("DIR", credentials->dir, "Directory to write")->required();
  credentials_cmd->add_option("--host", credentials->hosts,
                              "Another DNS name or IP address the certificates name (repeatable)");
  OnChosenLocal(credentials_cmd, action, credentials, RunCredentials);

  auto up = std::make_shared<UpFlags>();
  CLI::App* up_cmd = app.add_subcommand(
      "up", "Start a head and raylets with simulated GPUs on this machine; stop with `berth down`");
  up_cmd->add_option("--nodes", up->nodes, "Number of raylets")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  up_cmd->add_option("--gpus-per-node", up->gpus_per_node, "Simulated GPUs of each node")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  up_cmd->add_option("--accelerator-type", up->accelerator_type, "GPU model of every node")
      ->capture_default_str();
  up_cmd->add_option("--cpus-per-node", up->cpus_per_node, "Logical CPUs of each node")
      ->capture_default_str();
  up_cmd->add_option("--memory-per-node", up->memory_per_node, "Memory of each node, e.g. 32Gi")
      ->capture_default_str();
  up_cmd->add_option("--node-spec", up->node_spec,
                     "YAML list of nodes (name, gpus, accelerator_type, cpus, memory, labels, "
                     "count) instead of --nodes and the per-node flags");
  up_cmd->add_option("--port", up->port, "Head port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  OnChosenLocal(up_cmd, action, up, RunUp);

  OnChosenLocal(app.add_subcommand(
                    "down", "Stop the head and raylets that `berth up` and `berth start` started"),
                action, std::make_shared<NoFlags>(), RunDown);

  auto start = std::make_shared<StartFlags>();
  CLI::App* start_cmd = app.add_subcommand(
      "start", "Start one head (--head) or one raylet (--address) in the background here");
  start->head = start_cmd->add_flag("--head", "Start a head");
  start_cmd->add_option("--port", start->port, "With --head: port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  start_cmd->add_option("--listen", start->listen, "With --head: host to listen on")
      ->capture_default_str();
  start_cmd->add_option("--address", start->address, "Start a raylet of the head at HOST:PORT");
  start->num_gpus = start_cmd->add_option("--num-gpus", start->num_gpus_value,
                                          "Simulate N GPUs (default: the GPUs NVML finds)");
  start_cmd->add_option("--accelerator-type", start->accelerator_type,
                        "GPU model, e.g. A10G (default: NVML's)");
  start_cmd->add_option("--resources", start->resources, "Custom resources, name=qty,name=qty");
  start_cmd->add_option("--labels", start->labels, "Node labels, k=v,k=v");
  start_cmd->add_option("--node-id", start->node_id, "Node id (default: <hostname>-<port>)");
  start_cmd->add_option("--node-pool", start->node_pool, "Autoscaler node pool of the raylet");
  start_cmd->add_option("--metrics-listen", start->metrics_listen,
                        "With --address: the raylet's /metrics address (0.0.0.0:9465 to be scraped from elsewhere)")
      ->capture_default_str();
  OnChosenLocal(start_cmd, action, start, RunStart);
}

void AddCommands(CLI::App& app, Action* action) {
  AddLocalCommands(app, action);
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

  Globals globals;
  std::string output = "table";
  app.add_option("--address", globals.address,
                 "Head address host:port (default: $BERTH_ADDRESS, else the local cluster's, "
                 "else 127.0.0.1:6380)");
  AddTlsFlags(app, globals.tls, "berth-client; optional");
  app.add_option("--token-file", globals.token_file,
                 "Cluster token (default: $BERTH_TOKEN_FILE, else the local cluster's)");
  app.add_option("--timeout", globals.timeout_seconds, "Deadline of each call, seconds")
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

  globals.json = output == "json";
  return action(globals);
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) { return berth::Main(argc, argv); }
