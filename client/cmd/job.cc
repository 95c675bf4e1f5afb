// berth job submit|get|list|stop|watch, and the everyday verbs beside them:
// berth submit FILE, jobs, job ID, logs ID, stop ID (like `ray job`,
// sbatch, squeue).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "auth/cluster_token.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "client/job_args.h"
#include "client/job_file.h"
#include "common/working_dir_package.h"
#include "grpcpp/grpcpp.h"
#include "wire/train_job_state.h"

namespace berth {
namespace {

constexpr double kDefaultPollSeconds = 0.5;

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
// sees the loss fall, and a line when a new attempt began (a restart
// between two looks shows too). DEADLINE_EXCEEDED once `deadline` passes;
// the job keeps running.
absl::StatusOr<v1::TrainJobInfo> FollowJob(const Context& ctx, const std::string& id,
                                           absl::Duration poll, absl::Time deadline) {
  v1::GetTrainJobRequest request;
  request.set_job_id(id);
  std::string last_line;
  std::optional<uint32_t> attempt;
  for (;;) {
    absl::StatusOr<v1::GetTrainJobResponse> got = ctx.client.GetTrainJob(request);
    if (!got.ok()) return got.status();
    const v1::TrainJobInfo& job = got->job();
    if (!ctx.json && attempt && job.attempt() > *attempt) {
      std::cout << "attempt " << job.attempt() << " began"
                << (job.failure_causes_size() > 0
                        ? absl::StrCat(" (latest failure: ", *job.failure_causes().rbegin(), ")")
                        : "")
                << std::endl;
    }
    attempt = job.attempt();
    const std::string line = ProgressLine(job);
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
  std::string wait;  // --wait's value (WithWaitValues); empty = not given
};

// Submits `spec`; prints the id, or with `wait` (--wait's value) follows
// the job and ends as JobEnded does.
int SubmitJob(const Context& ctx, v1::TrainJobSpec spec, const std::string& wait) {
  absl::StatusOr<absl::Duration> most = WaitDuration(wait);
  if (!wait.empty() && !most.ok()) return UsageError(most.status());
  v1::SubmitTrainJobRequest request;
  *request.mutable_spec() = std::move(spec);
  absl::StatusOr<v1::SubmitTrainJobResponse> submitted =
      ctx.client.SubmitTrainJob(std::move(request));
  if (wait.empty() || !submitted.ok()) {
    return Print(ctx, submitted, [](const v1::SubmitTrainJobResponse& r) {
      return absl::StrCat(r.job_id(), "\n");
    });
  }
  if (!ctx.json) std::cout << submitted->job_id() << std::endl;
  absl::StatusOr<v1::TrainJobInfo> job =
      FollowJob(ctx, submitted->job_id(), absl::Seconds(kDefaultPollSeconds), absl::Now() + *most);
  if (!job.ok()) return HeadError(job.status());
  return JobEnded(ctx, *job, /*detail=*/true);
}

int RunJobSubmit(const Context& ctx, const JobSubmitFlags& flags) {
  JobSubmitArgs args = flags.args;
  if (!args.command.empty()) {
    // Relative paths in the command mean what they mean here (Slurm's
    // default), on a filesystem the nodes share.
    std::error_code error;
    const std::filesystem::path dir = args.working_dir.empty()
                                          ? std::filesystem::current_path(error)
                                          : std::filesystem::absolute(args.working_dir, error);
    if (error) {
      return UsageError(
          absl::InvalidArgumentError(absl::StrCat("--working-dir: ", error.message())));
    }
    args.working_dir = std::string(absl::StripSuffix(dir.lexically_normal().string(), "/"));
    if (args.working_dir.empty()) args.working_dir = "/";
  }
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  if (!spec.ok()) return UsageError(spec.status());
  return SubmitJob(ctx, *std::move(spec), flags.wait);
}

struct SubmitFlags {
  std::string file;
  std::string wait;  // as JobSubmitFlags::wait
};

// Packs and uploads the runtime_env's working_dir, then names the package
// in `spec`, as Ray's runtime_env does; the head refuses one over its limit.
absl::Status UploadWorkingDir(const Context& ctx, const JobRuntimeEnv& env,
                              v1::TrainJobSpec* spec) {
  constexpr uint64_t kMostAnyHeadTakes = 4096ull << 20;  // berth-head --package-limit-mb's range
  absl::StatusOr<PackedDir> packed = Pack(env.working_dir, env.excludes, kMostAnyHeadTakes);
  if (!packed.ok()) {
    return absl::Status(packed.status().code(),
                        absl::StrCat("runtime_env.working_dir: ", packed.status().message()));
  }
  absl::StatusOr<v1::UploadPackageResponse> uploaded =
      ctx.client.UploadPackage(packed->digest, packed->bytes);
  if (!uploaded.ok()) {
    return absl::Status(uploaded.status().code(),
                        absl::StrCat("runtime_env.working_dir: uploading ", env.working_dir, ": ",
                                     uploaded.status().message()));
  }
  spec->mutable_entrypoint()->mutable_command()->set_working_dir_package(packed->digest);
  return absl::OkStatus();
}

int RunSubmit(const Context& ctx, const SubmitFlags& flags) {
  JobRuntimeEnv runtime_env;
  absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile(flags.file, &runtime_env);
  // The message already names the file, line and key.
  if (!spec.ok()) {
    std::cerr << "berth: " << spec.status().message() << "\n";
    return kExitHeadError;
  }
  if (!runtime_env.working_dir.empty()) {
    if (absl::Status s = UploadWorkingDir(ctx, runtime_env, &*spec); !s.ok()) {
      std::cerr << "berth: " << s.message() << "\n";
      return kExitHeadError;
    }
  }
  return SubmitJob(ctx, *std::move(spec), flags.wait);
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
  std::string queue;
};

int RunJobList(const Context& ctx, const JobListFlags& flags) {
  v1::ListTrainJobsRequest request;
  for (const std::string& text : flags.states) {
    absl::StatusOr<v1::TrainJobState> state = ParseTrainJobStateArg(text);
    if (!state.ok()) return UsageError(state.status());
    request.add_states(*state);
  }
  request.set_queue(flags.queue);
  return Print(ctx, ctx.client.ListTrainJobs(request), FormatTrainJobs);
}

int RunJobStop(const Context& ctx, const JobIdFlags& flags) {
  v1::StopTrainJobRequest request;
  request.set_job_id(flags.id);
  absl::StatusOr<v1::StopTrainJobResponse> stopped = ctx.client.StopTrainJob(request);
  if (stopped.ok() && IsTerminal(stopped->state())) {
    // Nothing was stopped: a script that stops a job it believes runs
    // learns it was wrong.
    if (ctx.json) PrintJson(*stopped);
    std::cerr << "berth: job " << flags.id << " had already ended ("
              << TrainJobStateName(stopped->state()) << "); nothing to stop\n";
    return kExitHeadError;
  }
  return Print(ctx, stopped, [&](const v1::StopTrainJobResponse&) {
    return absl::StrCat("stopping ", flags.id,
                        " (its processes get SIGTERM, then SIGKILL after its grace period)\n");
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
  CLI::Option* attempt = nullptr;  // likewise --attempt
  uint32_t attempt_value = 0;
  bool follow = false;
};

// Writes log chunks to stdout, with "[rank r] " before each line when they
// come from several workers ("[node n] " for a launcher per node, which
// writes for its node's ranks); a line split across chunks is joined first.
// With `headers`, a line "==> attempt N <==" marks where a later attempt's
// output begins (a restart).
class LogPrinter {
 public:
  LogPrinter(bool prefix, bool headers) : prefix_(prefix), headers_(headers) {}

  void Add(const v1::LogChunk& chunk) {
    if (headers_ && chunk.attempt() != attempt_.value_or(0)) {
      Flush();
      std::cout << (attempt_ ? "\n" : "") << "==> attempt " << chunk.attempt() << " <==\n";
    }
    attempt_ = chunk.attempt();
    if (!prefix_) {
      std::cout << chunk.data() << std::flush;
      return;
    }
    const std::string label = chunk.has_node_rank()
                                  ? absl::StrCat("[node ", chunk.node_rank(), "] ")
                                  : absl::StrCat("[rank ", chunk.rank(), "] ");
    auto& [shown_as, partial] = partial_[{chunk.worker_id(), chunk.stream()}];
    shown_as = label;
    partial += chunk.data();
    size_t end;
    while ((end = partial.find('\n')) != std::string::npos) {
      std::cout << label << partial.substr(0, end + 1);
      partial.erase(0, end + 1);
    }
    std::cout << std::flush;
  }

  // Prints the unterminated last lines.
  void Flush() {
    for (const auto& [key, line] : partial_) {
      if (!line.second.empty()) std::cout << line.first << line.second << "\n";
    }
    partial_.clear();
  }

 private:
  const bool prefix_;
  const bool headers_;
  std::optional<uint32_t> attempt_;  // of the last chunk
  // By (worker, stream): its label and its unterminated line.
  std::map<std::pair<std::string, int>, std::pair<std::string, std::string>> partial_;
};

// The head's StreamTrainJobLogs; a server stream, so not a HeadClient call
// (no retries: chunks already printed cannot be taken back).
int RunLogs(const Context& ctx, const LogsFlags& flags) {
  auto stub = v1::TrainJobService::NewStub(ctx.client.channel());
  v1::StreamTrainJobLogsRequest request;
  request.set_job_id(flags.id);
  if (flags.rank->count() > 0) request.set_rank(flags.rank_value);
  if (flags.attempt->count() > 0) request.set_attempt(flags.attempt_value);
  request.set_follow(flags.follow);
  grpc::ClientContext context;
  AttachClusterToken(&context, ctx.client.cluster_token());
  // A followed job may run for days; the rest is bounded like any call.
  if (!flags.follow) context.set_deadline(absl::ToChronoTime(absl::Now() + ctx.timeout));
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
      stub->StreamTrainJobLogs(&context, request);
  LogPrinter printer(/*prefix=*/flags.rank->count() == 0,
                     /*headers=*/flags.attempt->count() == 0);
  v1::LogChunk chunk;
  bool told = false;
  while (reader->Read(&chunk)) {
    if (flags.rank->count() > 0 && chunk.has_node_rank() && !std::exchange(told, true)) {
      std::cerr << "berth: rank " << flags.rank_value << " runs under node " << chunk.node_rank()
                << "'s launcher, which writes for all of the node's ranks: this is its output\n";
    }
    printer.Add(chunk);
  }
  printer.Flush();
  const grpc::Status status = reader->Finish();
  if (status.ok()) return kExitOk;
  return HeadError(
      absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()));
}

// `berth jobs`, `berth job ID`, `berth submit FILE`, `berth logs ID`, `berth
// stop ID`: the everyday verbs, beside the `job` subcommands.
void AddTopLevelJobCommands(CLI::App& app, CLI::App* job, Action* action) {
  auto submit = std::make_shared<SubmitFlags>();
  CLI::App* submit_cmd =
      app.add_subcommand("submit", "Submit the train job a YAML job file describes; prints its id");
  submit_cmd->add_option("FILE", submit->file, "Job file (see `berth submit --help`)")->required();
  AddWaitFlag(submit_cmd, submit->wait,
              "the job ends, following it; then print its rank table; exit 0 only if it "
              "SUCCEEDED");
  OnChosen(submit_cmd, action, submit, RunSubmit);

  auto jobs = std::make_shared<JobListFlags>();
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "List train jobs (= job list)");
  jobs_cmd->add_option("--state", jobs->states, "Only jobs in this state (repeatable)");
  jobs_cmd->add_option("--queue", jobs->queue, "Only jobs of this queue");
  OnChosen(jobs_cmd, action, jobs, RunJobList);

  auto logs = std::make_shared<LogsFlags>();
  CLI::App* logs_cmd = app.add_subcommand(
      "logs",
      "Print a job's worker output, \"[rank r] \"-prefixed unless --rank is given (\"[node n] \" "
      "for a launcher per node, torchrun or accelerate, which writes for its node's ranks)");
  logs_cmd->add_option("ID", logs->id, "Job id")->required();
  logs->rank = logs_cmd->add_option("--rank", logs->rank_value, "Only this world rank");
  logs->attempt = logs_cmd->add_option(
      "--attempt", logs->attempt_value,
      "Only this attempt (0 = the first; `berth job ID` shows the latest); default: every "
      "attempt kept, a \"==> attempt N <==\" line where each later one begins");
  logs_cmd->add_flag("-f,--follow", logs->follow,
                     "Keep printing new output until the job ends (a restart's output "
                     "after its header line)");
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

// `berth job submit`'s flags of the workers: how many, what each needs and
// where they run.
void AddScalingFlags(CLI::App* cmd, JobSubmitArgs& args) {
  cmd->add_option("--num-workers", args.num_workers, "Number of workers (world size)")->required();
  cmd->add_option("--min-workers", args.min_workers,
                  "Elastic: start once this many workers fit, grow toward --num-workers "
                  "at checkpoints, shrink to no fewer when a node is lost");
  cmd->add_flag("--use-gpu", args.use_gpu, "Workers use GPUs (GPU=1 each by default)");
  cmd->add_option("--resources-per-worker", args.resources_per_worker,
                  "Resources of each worker, e.g. \"GPU=1,CPU=2\"; given once per "
                  "worker, the i-th is rank i's");
  cmd->add_option("--rank-resources", args.rank_resources,
                  "Extra resources of one rank, merged into its bundle, e.g. "
                  "\"0:memory=200Gi\" (repeatable)");
  cmd->add_option("--label-selector", args.label_selector,
                  "Nodes the workers may use, e.g. \"zone in (a,b), !spot\"; given once "
                  "per worker, the i-th is rank i's");
  cmd->add_option("--trainer-resources", args.trainer_resources,
                  "Resources of the trainer, shared with rank 0's bundle, e.g. "
                  "\"CPU=1,memory=200Gi\" (default CPU=1)");
  cmd->add_option("--accelerator-type", args.accelerator_type,
                  "GPU model the workers need, e.g. A10G");
  cmd->add_option("--topology-required", args.topology_required,
                  "A node label key whose one value every rank shares, e.g. "
                  "berth.io/topology-rack; the job waits until one domain has room");
  cmd->add_option("--topology-preferred", args.topology_preferred,
                  "Label keys to keep the ranks within, innermost first (repeatable), "
                  "e.g. berth.io/nvlink-domain then berth.io/topology-rack");
  cmd->add_option("--strategy", args.strategy, "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")
      ->capture_default_str();
}

// `berth job submit`'s flags of the job as a whole: restarts, name, queue,
// priority, time limit and checkpoints.
void AddJobFieldFlags(CLI::App* cmd, JobSubmitArgs& args) {
  cmd->add_option("--max-failures", args.max_failures,
                  "Restarts from the latest checkpoint before the job fails; -1 = unlimited")
      ->capture_default_str();
  cmd->add_option("--name", args.name, "Name (need not be unique)");
  cmd->add_option("--queue", args.queue, "Queue to submit to (default: the default queue)");
  cmd->add_option("--priority", args.priority,
                  "Order within its queue (higher first); may preempt lower ones")
      ->capture_default_str();
  cmd->add_option("--priority-class", args.priority_class,
                  "A priority class (berth queue priority-class) instead of --priority");
  cmd->add_option("--time-limit", args.time_limit,
                  "Like Slurm's --time, e.g. 2h: at the limit the job is stopped and ends "
                  "TIMED_OUT; lets it start past a reserved gang without delaying it");
  cmd->add_option("--stop-grace-period", args.stop_grace_period,
                  "Time the processes get from SIGTERM to SIGKILL when stopped, e.g. 60s "
                  "(default: the head's, 30s)");
  cmd->add_option("--progress-timeout", args.progress_timeout,
                  "An attempt that reported progress and then none for this long is hung: "
                  "it fails and restarts under --max-failures, e.g. 30m");
  cmd->add_option("--storage-path", args.storage_path,
                  "Where checkpoints go (default: the head's storage)");
}

// `berth job submit`'s flags of what the ranks run: the built-in trainer's,
// or a command after `--` and its environment.
void AddEntrypointFlags(CLI::App* cmd, JobSubmitArgs& args) {
  cmd->add_option(
      "--steps", args.steps,
      absl::StrCat("Built-in trainer: training steps (default ", kDefaultTrainSteps, ")"));
  cmd->add_option("--lr", args.lr, "Built-in trainer: learning rate");
  cmd->add_option("--batch-size", args.batch_size, "Built-in trainer: per-worker batch");
  cmd->add_option("--checkpoint-every", args.checkpoint_every,
                  "Built-in trainer: checkpoint every this many steps (0 = at the end)");
  // One value per --env, so that the `--` before the command ends the
  // flags rather than just this option's values.
  cmd->add_option("--env", args.env, "Command: KEY=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--working-dir", args.working_dir,
                  "Command: the folder every rank runs in, the same path on every node (a "
                  "shared filesystem; default: the current folder, as Slurm's sbatch)");
  cmd->add_option("COMMAND", args.command, "After `--`: the program and arguments every rank runs");
}

void AddJobSubmitCommand(CLI::App* job, Action* action) {
  auto submit = std::make_shared<JobSubmitFlags>();
  CLI::App* submit_cmd = job->add_subcommand(
      "submit",
      "Submit a train job; prints its id. Without a command after `--` it runs the built-in "
      "trainer");
  AddScalingFlags(submit_cmd, submit->args);
  AddJobFieldFlags(submit_cmd, submit->args);
  AddEntrypointFlags(submit_cmd, submit->args);
  AddWaitFlag(submit_cmd, submit->wait,
              "the job ends, following it; then print its rank table; exit 0 only if it "
              "SUCCEEDED");
  OnChosen(submit_cmd, action, submit, RunJobSubmit);
}

}  // namespace

void AddJobCommands(CLI::App& app, Action* action) {
  CLI::App* job = app.add_subcommand("job", "Distributed training jobs");
  job->require_subcommand(0, 1);
  AddTopLevelJobCommands(app, job, action);
  AddJobSubmitCommand(job, action);

  auto get = std::make_shared<JobIdFlags>();
  CLI::App* get_cmd = job->add_subcommand("get", "Show one job, its failures and its rank table");
  get_cmd->add_option("ID", get->id, "Job id")->required();
  OnChosen(get_cmd, action, get, RunJobGet);

  auto list = std::make_shared<JobListFlags>();
  CLI::App* list_cmd = job->add_subcommand("list", "List train jobs");
  list_cmd->add_option("--state", list->states,
                       "Only jobs in this state (repeatable): PENDING, STARTING, RUNNING, "
                       "RESTARTING, SUCCEEDED, FAILED, STOPPED, TIMED_OUT");
  list_cmd->add_option("--queue", list->queue, "Only jobs of this queue");
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

}  // namespace berth
