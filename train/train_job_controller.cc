#include "train/train_job_controller.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <csignal>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "wire/proto_convert.h"
#include "train/rank_assignment.h"
#include "train/scaling_config.h"
#include "train/worker_env.h"

namespace berth {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }
int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// How long the peers of a failed process get to fail too before the
// attempt's cause is chosen: the earliest failure is the root cause, but
// its exit is not always reported first.
constexpr absl::Duration kFailureSettle = absl::Seconds(2);
// The longest a finished command job waits for its report relay to be up.
constexpr absl::Duration kRelayStartup = absl::Seconds(10);
// How often a running attempt asks its raylets for exits it was not told
// of (a report lost with a head restart, a worker its raylet no longer has).
constexpr absl::Duration kReconcileEvery = absl::Seconds(2);

bool IsTerminal(v1::TrainJobState s) {
  return s == v1::TRAIN_JOB_STATE_SUCCEEDED || s == v1::TRAIN_JOB_STATE_FAILED ||
         s == v1::TRAIN_JOB_STATE_STOPPED;
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

std::string DescribeExit(const v1::WorkerStatus& s) {
  if (s.signal() != 0) return absl::StrCat("was killed by signal ", s.signal());
  return absl::StrCat("exited with code ", s.exit_code());
}

// "rank 1", "node 0", "the trainer": what a process of an attempt is, from
// its worker id (<job>-a<n>-r<rank> | -n<node rank> | -trainer).
std::string DescribeProcess(const std::string& worker_id) {
  if (absl::EndsWith(worker_id, "-trainer")) return "the trainer";
  if (absl::EndsWith(worker_id, "-store")) return "the rendezvous store host";
  const size_t dash = worker_id.rfind('-');
  if (dash == std::string::npos || dash + 2 > worker_id.size()) return worker_id;
  const std::string number = worker_id.substr(dash + 2);
  if (worker_id[dash + 1] == 'r') return absl::StrCat("rank ", number);
  if (worker_id[dash + 1] == 'n') return absl::StrCat("the launcher of node rank ", number);
  return worker_id;
}

// A failure cause a person can act on: which process, how it ended, and
// what it said (the raylet's WorkerStatus.error: the headline, then its
// context, indented).
std::string DescribeFailure(const std::string& worker_id, const std::string& node_id,
                            const v1::WorkerStatus& s) {
  std::string cause = absl::StrCat(DescribeProcess(worker_id), " (", worker_id, " on ", node_id,
                                   ") ", DescribeExit(s));
  if (s.error().empty()) return cause;
  std::vector<absl::string_view> lines = absl::StrSplit(s.error(), '\n');
  absl::StrAppend(&cause, ": ", lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) absl::StrAppend(&cause, "\n    ", lines[i]);
  return cause;
}

// When a process failed, for finding the first failure of a group.
int64_t FailedAtUs(const v1::WorkerStatus& s) {
  return s.failed_unix_us() != 0 ? s.failed_unix_us() : s.ended_unix_ms() * 1000;
}

// The attempt a worker id of the job belongs to (<job>-a<n>-...).
std::optional<uint32_t> AttemptOf(const std::string& job_id, const std::string& worker_id) {
  const std::string prefix = absl::StrCat(job_id, "-a");
  if (!absl::StartsWith(worker_id, prefix)) return std::nullopt;
  absl::string_view rest = absl::string_view(worker_id).substr(prefix.size());
  uint32_t attempt = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &attempt)) return std::nullopt;
  return attempt;
}

// The processes of an attempt that are not ranks.
bool IsHelperProcess(const std::string& worker_id) {
  return absl::EndsWith(worker_id, "-trainer") || absl::EndsWith(worker_id, "-store");
}

bool IsPerNode(const v1::TrainJobSpec& spec) {
  const v1::Entrypoint::Command& c = spec.entrypoint().command();
  return spec.entrypoint().has_command() &&
         (c.per_node() || c.launcher() != v1::Entrypoint::LAUNCHER_UNSPECIFIED);
}

// A per-rank Python command gets a store host of its own interpreter
// (worker_env.h); a launcher's agent hosts its own.
bool HasStoreHost(const v1::TrainJobSpec& spec) {
  return spec.entrypoint().has_command() && !IsPerNode(spec) &&
         IsPythonInterpreter(spec.entrypoint().command().argv(0));
}

Launcher LauncherOf(const v1::Entrypoint::Command& command) {
  switch (command.launcher()) {
    case v1::Entrypoint::LAUNCHER_TORCHRUN:
      return Launcher::kTorchrun;
    case v1::Entrypoint::LAUNCHER_ACCELERATE:
      return Launcher::kAccelerate;
    default:
      return Launcher::kNone;
  }
}

absl::Status ValidateEntrypoint(const v1::TrainJobSpec& spec) {
  if (!spec.entrypoint().has_command()) {
    const auto& builtin = spec.entrypoint().builtin_trainer();
    if (!builtin.model().empty() && builtin.model() != "mlp") {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.entrypoint.builtin_trainer.model: unknown model '", builtin.model(),
          "' (berth-worker has: mlp)"));
    }
    if (!std::isfinite(builtin.learning_rate()) || builtin.learning_rate() < 0) {
      return absl::InvalidArgumentError(
          "spec.entrypoint.builtin_trainer.learning_rate: must be finite and >= 0");
    }
    return absl::OkStatus();
  }
  const auto& command = spec.entrypoint().command();
  if (command.argv_size() == 0 || command.argv(0).empty()) {
    return absl::InvalidArgumentError("spec.entrypoint.command.argv: give the program to run");
  }
  for (const std::string& name : ReservedEnvNames()) {
    if (command.env().contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.entrypoint.command.env[\"", name, "\"]: set by berth for every worker"));
    }
  }
  if (!v1::Entrypoint::Launcher_IsValid(command.launcher())) {
    return absl::InvalidArgumentError(absl::StrCat("spec.entrypoint.command.launcher: unknown value ",
                                                   static_cast<int>(command.launcher())));
  }
  return ValidateLauncherArgv(LauncherOf(command), {command.argv().begin(), command.argv().end()},
                              "spec.entrypoint.command.argv");
}

}  // namespace

absl::StatusOr<PlacementGroupSpec> PlacementGroupForJob(const v1::TrainJobSpec& spec) {
  const v1::ScalingConfig& s = spec.scaling_config();
  ScalingConfig config;
  config.num_workers = s.num_workers();
  config.use_gpu = s.use_gpu();
  // An empty map on the wire is "unset": Ray's defaults apply.
  if (s.resources_per_worker().amounts_size() > 0) {
    config.resources_per_worker.emplace(s.resources_per_worker().amounts().begin(),
                                        s.resources_per_worker().amounts().end());
  }
  if (s.trainer_resources().amounts_size() > 0) {
    config.trainer_resources.emplace(s.trainer_resources().amounts().begin(),
                                     s.trainer_resources().amounts().end());
  }
  config.accelerator_type = s.accelerator_type();
  switch (s.placement_strategy()) {
    case v1::PLACEMENT_STRATEGY_UNSPECIFIED:
    case v1::PLACEMENT_STRATEGY_PACK:
      config.placement_strategy = "PACK";
      break;
    case v1::PLACEMENT_STRATEGY_SPREAD:
      config.placement_strategy = "SPREAD";
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_PACK:
      config.placement_strategy = "STRICT_PACK";
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD:
      config.placement_strategy = "STRICT_SPREAD";
      break;
    default:
      config.placement_strategy = absl::StrCat(static_cast<int>(s.placement_strategy()));
  }
  absl::StatusOr<PlacementGroupSpec> group = BuildTrainPlacementGroup(config);
  if (!group.ok()) {
    return absl::Status(group.status().code(), absl::StrCat("spec.", group.status().message()));
  }
  return group;
}

TrainJobController::TrainJobController(PlacementGroupHost* groups, RayletClients* raylets,
                                       TrainControllerConfig config)
    : groups_(groups), raylets_(raylets), config_(std::move(config)) {}

TrainJobController::~TrainJobController() {
  std::vector<std::thread*> threads;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [id, job] : jobs_) {
      job->stop_requested = true;
      threads.push_back(&job->thread);
    }
  }
  for (std::thread* t : threads) {
    if (t->joinable()) t->join();
  }
}

absl::StatusOr<std::string> TrainJobController::Submit(const v1::SubmitTrainJobRequest& request) {
  if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(request.spec().name(), "spec.name", config_.max_name_length, false);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(request.spec().storage_path(), "spec.storage_path", 1024, false);
      !s.ok()) {
    return s;
  }
  if (request.spec().failure_config().max_failures() < -1) {
    return absl::InvalidArgumentError(
        "spec.failure_config.max_failures: -1 (unlimited), 0 or more");
  }
  if (absl::Status s = ValidateEntrypoint(request.spec()); !s.ok()) return s;
  absl::StatusOr<PlacementGroupSpec> group = PlacementGroupForJob(request.spec());
  if (!group.ok()) return group.status();

  absl::MutexLock lock(&mu_);
  const std::string fingerprint = request.SerializeAsString();
  if (auto it = by_request_id_.find(request.request_id()); it != by_request_id_.end()) {
    if (jobs_.at(it->second)->fingerprint != fingerprint) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request_id: '", request.request_id(), "' was used for a different job"));
    }
    return it->second;
  }
  if (shutting_down_) return absl::UnavailableError("the head is shutting down");
  const size_t active = static_cast<size_t>(std::count_if(
      jobs_.begin(), jobs_.end(), [](const auto& j) { return !IsTerminal(j.second->info.state()); }));
  if (active >= config_.max_active_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(active, " train jobs are not finished (berth-head --max-active-jobs ",
                                                     config_.max_active_jobs, "); stop some or retry later"));
  }
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string id = absl::StrFormat("job-%08x", rng() & 0xffffffffULL);
  auto job = std::make_unique<Job>(*std::move(group));
  job->request_id = request.request_id();
  job->fingerprint = fingerprint;
  job->info.set_job_id(id);
  *job->info.mutable_spec() = request.spec();
  job->info.set_state(v1::TRAIN_JOB_STATE_PENDING);
  job->info.set_message("creating the placement group");
  job->info.set_submitted_unix_ms(NowMs());
  job->info.mutable_startup()->set_submitted_unix_us(NowUs());
  Job* raw = job.get();
  jobs_[id] = std::move(job);
  by_request_id_[request.request_id()] = id;
  PersistLocked(*raw);
  raw->thread = std::thread([this, id] { RunJob(id); });
  return id;
}

absl::Status TrainJobController::Get(const std::string& job_id, v1::TrainJobInfo* info) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  *info = it->second->info;
  return absl::OkStatus();
}

void TrainJobController::List(const v1::ListTrainJobsRequest& request,
                              v1::ListTrainJobsResponse* response) const {
  absl::MutexLock lock(&mu_);
  std::vector<const v1::TrainJobInfo*> infos;
  for (const auto& [id, job] : jobs_) {
    if (request.states_size() > 0 &&
        std::find(request.states().begin(), request.states().end(), job->info.state()) ==
            request.states().end()) {
      continue;
    }
    infos.push_back(&job->info);
  }
  std::sort(infos.begin(), infos.end(), [](const v1::TrainJobInfo* a, const v1::TrainJobInfo* b) {
    return a->submitted_unix_ms() < b->submitted_unix_ms();
  });
  for (const v1::TrainJobInfo* info : infos) *response->add_jobs() = *info;
}

absl::Status TrainJobController::Stop(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  if (it->second->stop_requested || IsTerminal(it->second->info.state())) return absl::OkStatus();
  it->second->stop_requested = true;
  PersistLocked(*it->second);  // a head restarted from here on still stops it
  return absl::OkStatus();
}

absl::Status TrainJobController::ReportProgress(const v1::ReportTrainProgressRequest& request) {
  if (request.job_id().empty()) return absl::InvalidArgumentError("job_id: required");
  constexpr int kMaxMetrics = 64;
  if (request.metrics_size() > kMaxMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", request.metrics_size(), " entries, at most ", kMaxMetrics));
  }
  for (const auto& [name, value] : request.metrics()) {
    if (absl::Status s = ValidateString(name, "metrics key", 128, true); !s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job_id: no job '", request.job_id(), "'"));
  }
  it->second->trainer_reported = true;
  v1::TrainJobInfo& info = it->second->info;
  if (request.step() >= info.last_step()) {
    info.set_last_step(request.step());
    info.set_last_loss(request.loss());
    if (!request.metrics().empty()) *info.mutable_last_metrics() = request.metrics();
  }
  if (!request.latest_checkpoint().empty() && request.step() >= info.latest_checkpoint_step()) {
    info.set_latest_checkpoint(request.latest_checkpoint());
    info.set_latest_checkpoint_step(request.step());
  }
  // The first report of the ranks' times in an attempt counts (WaitPlaced
  // clears them for the next attempt).
  v1::StartupTimeline& startup = *info.mutable_startup();
  if (request.group_joined_unix_us() != 0 && startup.group_joined_unix_us() == 0) {
    startup.set_ranks_running_unix_us(request.ranks_running_unix_us());
    startup.set_group_joined_unix_us(request.group_joined_unix_us());
  }
  PersistLocked(*it->second);
  return absl::OkStatus();
}

void TrainJobController::OnWorkerExit(const std::string& node_id, const v1::WorkerStatus& status) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(status.job_id());
  if (it == jobs_.end()) return;
  it->second->exits[status.worker_id()] = status;
}

absl::StatusOr<std::vector<RankLog>> TrainJobController::Logs(const std::string& job_id,
                                                              std::optional<uint32_t> rank) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  const std::vector<RankLog>& logs = it->second->logs;
  if (!rank) return logs;
  if (*rank >= it->second->info.spec().scaling_config().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", *rank, " >= num_workers"));
  }
  for (const RankLog& l : logs) {
    if (l.rank == *rank) return std::vector<RankLog>{l};
  }
  return std::vector<RankLog>{};
}

void TrainJobController::SetState(const std::string& job_id, v1::TrainJobState state,
                                  const std::string& message) {
  absl::MutexLock lock(&mu_);
  v1::TrainJobInfo& info = jobs_.at(job_id)->info;
  info.set_state(state);
  info.set_message(message);
  if (state == v1::TRAIN_JOB_STATE_RUNNING && info.started_unix_ms() == 0) {
    info.set_started_unix_ms(NowMs());
  }
  if (IsTerminal(state)) info.set_ended_unix_ms(NowMs());
  PersistLocked(*jobs_.at(job_id));
}

void TrainJobController::PersistLocked(const Job& job) {
  if (!config_.persist) return;
  v1::TrainJobRecord record;
  *record.mutable_info() = job.info;
  record.set_request_id(job.request_id);
  record.set_stop_requested(job.stop_requested);
  config_.persist(record);
}

void TrainJobController::Restore(const std::vector<v1::TrainJobRecord>& records) {
  absl::MutexLock lock(&mu_);
  for (const v1::TrainJobRecord& record : records) {
    const std::string& id = record.info().job_id();
    absl::StatusOr<PlacementGroupSpec> group = PlacementGroupForJob(record.info().spec());
    if (id.empty() || jobs_.count(id) > 0 || !group.ok()) continue;
    auto job = std::make_unique<Job>(*std::move(group));
    job->info = record.info();
    job->request_id = record.request_id();
    job->stop_requested = record.stop_requested();
    v1::SubmitTrainJobRequest submitted;
    *submitted.mutable_spec() = record.info().spec();
    submitted.set_request_id(record.request_id());
    job->fingerprint = submitted.SerializeAsString();
    for (const v1::WorkerRank& w : job->info.workers()) job->logs.push_back({w.world_rank(), w.node_id(), w.worker_id()});
    by_request_id_[record.request_id()] = id;
    Job* raw = job.get();
    jobs_[id] = std::move(job);
    if (!IsTerminal(raw->info.state())) raw->thread = std::thread([this, id] { ResumeJob(id); });
  }
}

void TrainJobController::ResumeJob(const std::string& job_id) {
  std::string pg_id;
  v1::TrainJobState state;
  uint32_t attempt = 0;
  std::map<std::string, std::string> processes;  // worker id -> node
  {
    absl::MutexLock lock(&mu_);
    const v1::TrainJobInfo& info = jobs_.at(job_id)->info;
    pg_id = info.placement_group_id();
    state = info.state();
    attempt = info.attempt();
    for (const v1::WorkerRank& w : info.workers()) {
      processes[w.worker_id()] = w.node_id();
      if (w.world_rank() != 0) continue;
      processes[absl::StrCat(job_id, "-a", attempt, "-trainer")] = w.node_id();
      if (HasStoreHost(info.spec())) processes[absl::StrCat(job_id, "-a", attempt, "-store")] = w.node_id();
    }
  }
  if (pg_id.empty()) {  // stopped before its group was created
    RunJob(job_id);
    return;
  }
  std::optional<std::map<std::string, std::string>> running;
  if (state == v1::TRAIN_JOB_STATE_RUNNING && !processes.empty()) {
    // Processes that ended while the head was away: their exit reports may
    // have been lost, so ask their raylets.
    RecordUnreportedExits(job_id, processes);
    running = std::move(processes);
  } else {
    // A half-started attempt: whatever the previous head started, recorded
    // or not, is stopped, and the next attempt takes a number no raylet has
    // seen (a worker id started again with other arguments is refused).
    uint32_t next = processes.empty() ? attempt : attempt + 1;
    std::set<std::string> nodes;
    for (const auto& [worker, node] : processes) nodes.insert(node);
    if (absl::StatusOr<v1::PlacementGroupInfo> pg = groups_->GetGroup(pg_id); pg.ok()) {
      for (const v1::BundleLocation& location : pg->locations()) nodes.insert(location.node_id());
    }
    for (const std::string& node : nodes) {
      absl::StatusOr<v1::ListWorkersResponse> listed = WorkersOn(job_id, node);
      if (!listed.ok()) continue;
      for (const v1::WorkerStatus& w : listed->workers()) {
        if (std::optional<uint32_t> a = AttemptOf(job_id, w.worker_id())) next = std::max(next, *a + 1);
        if (w.state() == v1::WORKER_STATE_RUNNING || w.state() == v1::WORKER_STATE_STARTING) {
          processes[w.worker_id()] = node;
        }
      }
    }
    if (!processes.empty()) StopProcesses(job_id, processes);
    attempt = next;
  }
  RunAttempts(job_id, pg_id, attempt, std::move(running));
}

bool TrainJobController::WaitPlaced(const std::string& job_id, const std::string& pg_id) {
  // A group that fits is placed within milliseconds (one two-phase commit
  // with its raylets): look again soon, then back off to config_.poll for a
  // group that waits for room.
  absl::Duration wait = std::min(absl::Milliseconds(1), config_.poll);
  while (true) {
    absl::StatusOr<v1::PlacementGroupInfo> pg = groups_->GetGroup(pg_id);
    absl::MutexLock lock(&mu_);
    Job& job = *jobs_.at(job_id);
    if (job.stop_requested) return false;
    if (pg.ok() && pg->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
      // A new attempt's start: the stages after placement begin again.
      v1::StartupTimeline& startup = *job.info.mutable_startup();
      startup.set_placed_unix_us(NowUs());
      startup.clear_workers_started_unix_us();
      startup.clear_ranks_running_unix_us();
      startup.clear_group_joined_unix_us();
      return true;
    }
    if (pg.ok()) {
      job.info.set_message(absl::StrCat("waiting for placement", pg->infeasible() ? " (infeasible)" : "",
                                        ": ", pg->pending_reason()));
    }
    mu_.AwaitWithTimeout(absl::Condition(&job.stop_requested), wait);
    wait = std::min(wait * 2, config_.poll);
  }
}

absl::StatusOr<std::map<std::string, std::string>> TrainJobController::Launch(
    const std::string& job_id, const v1::PlacementGroupInfo& pg, uint32_t attempt) {
  std::vector<BundleSite> sites(pg.bundles_size());
  for (const v1::BundleLocation& loc : pg.locations()) {
    BundleSite& site = sites.at(loc.bundle_index());
    site.node_id = loc.node_id();
    for (const v1::GpuShare& g : loc.gpus()) site.gpu_ids.push_back(g.index());
  }
  absl::StatusOr<std::vector<RankedWorker>> ranks = AssignRanks(sites);
  if (!ranks.ok()) return ranks.status();
  const std::string rank0_address = groups_->RayletAddress((*ranks)[0].node_id);
  if (rank0_address.empty()) return absl::UnavailableError("rank 0's node is gone");
  absl::StatusOr<v1::AllocatePortResponse> port = raylets_->AllocatePort(rank0_address);
  if (!port.ok()) return port.status();
  const std::string master_addr = port->host().empty() ? HostOf(rank0_address) : port->host();

  v1::TrainJobSpec spec;
  std::string job_dir;
  std::string resume_from;
  {
    absl::MutexLock lock(&mu_);
    Job& job = *jobs_.at(job_id);
    spec = job.info.spec();
    job.exits.clear();
    job.logs.clear();
    job.trainer_reported = false;
    job.info.clear_workers();
    job.info.set_attempt(attempt);
    job.info.set_master_address(absl::StrCat(master_addr, ":", port->port()));
    resume_from = job.info.latest_checkpoint();
    job_dir = absl::StrCat(spec.storage_path().empty() ? config_.checkpoint_root : spec.storage_path(),
                           "/", job_id);
  }
  const bool command = spec.entrypoint().has_command();
  const v1::Entrypoint::Command& user = spec.entrypoint().command();
  const bool per_node = IsPerNode(spec);
  const bool store_host = HasStoreHost(spec);
  AttemptEnv attempt_env;
  attempt_env.job_id = job_id;
  attempt_env.placement_group_id = pg.placement_group_id();
  attempt_env.head_address = config_.head_address;
  attempt_env.master_addr = master_addr;
  attempt_env.master_port = static_cast<uint16_t>(port->port());
  attempt_env.world_size = static_cast<uint32_t>(ranks->size());
  for (const RankedWorker& r : *ranks) attempt_env.num_nodes = std::max(attempt_env.num_nodes, r.node_rank + 1);
  attempt_env.attempt = attempt;
  attempt_env.max_restarts = spec.failure_config().max_failures();
  // Built-in ranks meet at the trainer's store; a user command's store is
  // in the user's torch: a store host's, else rank 0's (worker_env.h).
  attempt_env.agent_store = !command || store_host;
  attempt_env.storage_path = job_dir;
  if (command) attempt_env.report_file = absl::StrCat(job_dir, "/reports/attempt-", attempt, ".jsonl");
  attempt_env.latest_checkpoint = resume_from;
  const auto& per_worker = spec.scaling_config().resources_per_worker().amounts();
  attempt_env.cpus_per_worker = per_worker.contains("CPU") ? per_worker.at("CPU") : 1.0;

  // What to start on each node, in order: rank 0's node first, the trainer
  // first on it.
  std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> by_node;
  auto add = [&](v1::WorkerSpec worker, const std::string& node_id) {
    auto it = std::find_if(by_node.begin(), by_node.end(),
                           [&](const auto& node) { return node.first == node_id; });
    if (it == by_node.end()) {
      by_node.emplace_back(node_id, std::vector<v1::WorkerSpec>{});
      it = std::prev(by_node.end());
    }
    it->second.push_back(std::move(worker));
  };
  auto new_worker = [&](const std::string& suffix, uint32_t bundle) {
    v1::WorkerSpec w;
    w.set_worker_id(absl::StrCat(job_id, "-a", attempt, "-", suffix));
    w.set_job_id(job_id);
    w.set_placement_group_id(pg.placement_group_id());
    w.set_bundle_index(bundle);
    return w;
  };
  auto set_env = [](v1::WorkerSpec& w, const std::map<std::string, std::string>& env) {
    w.mutable_env()->insert(env.begin(), env.end());
  };
  auto add_user_command = [&](v1::WorkerSpec& w, const std::vector<std::string>& argv) {
    for (const std::string& a : argv) w.add_argv(a);
    for (const auto& [k, v] : user.env()) (*w.mutable_env())[k] = v;
    w.set_cwd(user.working_dir());
  };

  // The trainer: the job's driver. It hosts the built-in ranks' store; for a
  // user command it relays berth.train.report() from rank 0's node.
  v1::WorkerSpec trainer = new_worker("trainer", 0);
  trainer.add_argv(config_.worker_binary);
  std::vector<std::string> trainer_args = {"trainer", "--world-size", absl::StrCat(attempt_env.world_size),
                                           "--checkpoint-dir", absl::StrCat(job_dir, "/checkpoints"),
                                           "--head", config_.head_address, "--job-id", job_id};
  if (command) {
    trainer_args.insert(trainer_args.end(), {"--report-file", attempt_env.report_file});
  } else {
    trainer_args.insert(trainer_args.end(), {"--port", absl::StrCat(port->port())});
    if (!resume_from.empty()) trainer_args.insert(trainer_args.end(), {"--resume-from", resume_from});
  }
  for (const std::string& a : trainer_args) trainer.add_argv(a);
  set_env(trainer, NodeEnv(attempt_env, (*ranks)[0].node_id, 0, (*ranks)[0].local_world_size, 0, true));
  // Only the trainer calls the head (ReportTrainProgress); ranks never see the token.
  if (!config_.cluster_token.empty()) (*trainer.mutable_env())["BERTH_CLUSTER_TOKEN"] = config_.cluster_token;
  add(std::move(trainer), (*ranks)[0].node_id);

  if (store_host) {
    v1::WorkerSpec store = new_worker("store", 0);
    set_env(store, NodeEnv(attempt_env, (*ranks)[0].node_id, 0, (*ranks)[0].local_world_size, 0, true));
    add_user_command(store, StoreHostArgv(user.argv(0), attempt_env.master_port, attempt_env.world_size));
    add(std::move(store), (*ranks)[0].node_id);
  }

  auto rank_proto = [](const RankedWorker& r, const std::string& worker_id) {
    v1::WorkerRank rank;
    rank.set_world_rank(r.world_rank);
    rank.set_local_rank(r.local_rank);
    rank.set_node_rank(r.node_rank);
    rank.set_local_world_size(r.local_world_size);
    rank.set_bundle_index(r.bundle_index);
    rank.set_node_id(r.node_id);
    for (uint32_t gpu : r.gpu_ids) rank.add_gpu_indices(gpu);
    rank.set_worker_id(worker_id);
    return rank;
  };
  auto record_rank = [&](const v1::WorkerRank& rank) {
    absl::MutexLock lock(&mu_);
    Job& job = *jobs_.at(job_id);
    *job.info.add_workers() = rank;
    job.logs.push_back({rank.world_rank(), rank.node_id(), rank.worker_id()});
  };

  if (per_node) {
    // One launcher process per node, holding the node's bundles and GPUs;
    // it starts the node's ranks itself (ranks follow the placement: rank
    // 0's node is node rank 0).
    const std::vector<std::string> argv(user.argv().begin(), user.argv().end());
    for (uint32_t node_rank = 0; node_rank < attempt_env.num_nodes; ++node_rank) {
      std::vector<const RankedWorker*> local;
      for (const RankedWorker& r : *ranks) {
        if (r.node_rank == node_rank) local.push_back(&r);
      }
      const RankedWorker& first = *local.front();
      if (LauncherOf(user) == Launcher::kTorchrun && local.size() != (*ranks)[0].local_world_size) {
        return absl::FailedPreconditionError(absl::StrCat(
            "torchrun runs the same number of ranks on every node, but the placement put ",
            (*ranks)[0].local_world_size, " on node rank 0 and ", local.size(), " on node rank ", node_rank,
            " (use STRICT_SPREAD with one worker of all a node's GPUs, or a per-rank command)"));
      }
      NodeLaunch launch{node_rank, attempt_env.num_nodes, static_cast<uint32_t>(local.size()),
                        attempt_env.world_size, master_addr, attempt_env.master_port};
      absl::StatusOr<std::vector<std::string>> full_argv = LauncherArgv(LauncherOf(user), argv, launch);
      if (!full_argv.ok()) return full_argv.status();
      v1::WorkerSpec w = new_worker(absl::StrCat("n", node_rank), first.bundle_index);
      for (uint32_t gpu : first.visible_gpu_ids) w.add_visible_gpu_indices(gpu);
      *w.mutable_rank() = rank_proto(first, w.worker_id());
      const bool has_gpus = std::any_of(local.begin(), local.end(), [](const RankedWorker* r) { return !r->gpu_ids.empty(); });
      set_env(w, NodeEnv(attempt_env, first.node_id, node_rank, static_cast<uint32_t>(local.size()),
                         first.bundle_index, has_gpus));
      add_user_command(w, *full_argv);
      for (const RankedWorker* r : local) record_rank(rank_proto(*r, w.worker_id()));
      add(std::move(w), first.node_id);
    }
  } else {
    for (const RankedWorker& r : *ranks) {
      v1::WorkerSpec w = new_worker(absl::StrCat("r", r.world_rank), r.bundle_index);
      for (uint32_t gpu : r.visible_gpu_ids) w.add_visible_gpu_indices(gpu);
      *w.mutable_rank() = rank_proto(r, w.worker_id());
      set_env(w, RankEnv(attempt_env, r));
      if (command) {
        add_user_command(w, {user.argv().begin(), user.argv().end()});
      } else {
        const auto& builtin = spec.entrypoint().builtin_trainer();
        w.add_argv(config_.worker_binary);
        w.add_argv("train");
        auto flag = [&](const char* name, auto value) {
          if (value <= 0) return;
          w.add_argv(name);
          w.add_argv(absl::StrCat(value));
        };
        flag("--steps", builtin.steps());
        flag("--lr", builtin.learning_rate());
        flag("--batch-size", builtin.batch_size());
        flag("--checkpoint-every", builtin.checkpoint_every_steps());
      }
      record_rank(w.rank());
      add(std::move(w), r.node_id);
    }
  }
  absl::StatusOr<std::map<std::string, std::string>> started = StartProcesses(job_id, std::move(by_node));
  if (!started.ok()) return started.status();
  absl::MutexLock lock(&mu_);
  jobs_.at(job_id)->info.mutable_startup()->set_workers_started_unix_us(NowUs());
  return started;
}

absl::StatusOr<std::map<std::string, std::string>> TrainJobController::StartProcesses(
    const std::string& job_id,
    std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> by_node) {
  // The nodes in parallel (up to kMaxParallelNodes at once), each node's
  // processes one by one: one by one overall, a job took a round trip per
  // process, tens of milliseconds each on a node busy loading the processes
  // started before. Not all at once: a raylet forks one process at a time,
  // so calls queued behind each other would spend their deadlines waiting.
  constexpr size_t kMaxParallelNodes = 32;
  absl::Mutex mu;
  std::map<std::string, std::string> started;  // worker id -> node id
  absl::Status failure;
  std::atomic<size_t> next{0};
  auto start_nodes = [&] {
    for (size_t i = next++; i < by_node.size(); i = next++) {
      const std::string& node_id = by_node[i].first;
      const std::string address = groups_->RayletAddress(node_id);
      for (v1::WorkerSpec& worker : by_node[i].second) {
        v1::StartWorkerRequest request;
        request.set_request_id(absl::StrCat("start/", worker.worker_id()));
        *request.mutable_spec() = std::move(worker);
        absl::StatusOr<v1::StartWorkerResponse> response =
            address.empty() ? absl::UnavailableError(absl::StrCat("node ", node_id, " is gone"))
                            : raylets_->StartWorker(address, request);
        absl::MutexLock lock(&mu);
        if (response.ok()) {
          started[request.spec().worker_id()] = node_id;
        } else if (failure.ok()) {
          failure = absl::Status(response.status().code(),
                                 absl::StrCat("starting ", request.spec().worker_id(), " on ",
                                              node_id, ": ", response.status().message()));
        }
        if (!failure.ok()) return;  // this attempt is over, on every node
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(by_node.size(), kMaxParallelNodes); ++t) {
    threads.emplace_back(start_nodes);
  }
  for (std::thread& t : threads) t.join();
  if (!failure.ok()) {
    StopProcesses(job_id, started);
    return failure;
  }
  return started;
}

std::string TrainJobController::PlacementChange(const std::map<std::string, std::string>& processes,
                                                const absl::StatusOr<v1::PlacementGroupInfo>& pg,
                                                int64_t placed_unix_ms) {
  std::set<std::string> nodes;
  for (const auto& [worker, node] : processes) nodes.insert(node);
  for (const std::string& node : nodes) {
    if (groups_->RayletAddress(node).empty()) return absl::StrCat("node ", node, " died (missed heartbeats)");
  }
  if (!pg.ok()) return "";  // the head's own error; asked again next pass
  if (pg->state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    return absl::StrCat("the placement group lost bundles: ", pg->pending_reason());
  }
  // Placed again since the attempt started, even if the node it lost came
  // back under the same id and took its bundles back between two passes.
  if (placed_unix_ms != 0 && pg->placed_unix_ms() != placed_unix_ms) {
    return "the placement group's bundles were placed again (a node of the attempt was lost)";
  }
  std::set<std::string> placed_on;
  for (const v1::BundleLocation& location : pg->locations()) placed_on.insert(location.node_id());
  for (const std::string& node : nodes) {
    if (placed_on.count(node) == 0) return absl::StrCat("the placement group's bundles moved off node ", node);
  }
  return "";
}

void TrainJobController::RecordUnreportedExits(const std::string& job_id,
                                               const std::map<std::string, std::string>& processes) {
  std::map<std::string, std::vector<std::string>> by_node;
  for (const auto& [worker, node] : processes) by_node[node].push_back(worker);
  for (const auto& [node, workers] : by_node) {
    // A dead node ends the attempt by itself; an unreachable one's
    // heartbeats decide.
    absl::StatusOr<v1::ListWorkersResponse> listed = WorkersOn(job_id, node);
    if (!listed.ok()) continue;
    std::map<std::string, const v1::WorkerStatus*> known;
    for (const v1::WorkerStatus& w : listed->workers()) known[w.worker_id()] = &w;
    absl::MutexLock lock(&mu_);
    Job& job = *jobs_.at(job_id);
    for (const std::string& worker : workers) {
      if (job.exits.count(worker) > 0) continue;
      auto it = known.find(worker);
      if (it == known.end()) {
        // Its exit can never be reported: the raylet lost it (a raylet of
        // a new life, which killed the old one's workers with it).
        v1::WorkerStatus lost;
        lost.set_worker_id(worker);
        lost.set_state(v1::WORKER_STATE_FAILED);
        lost.set_signal(SIGKILL);
        lost.set_error(absl::StrCat("its raylet on node ", node, " no longer knows it (the raylet restarted)"));
        lost.set_failed_unix_us(NowUs());
        job.exits[worker] = std::move(lost);
      } else if (it->second->state() != v1::WORKER_STATE_RUNNING &&
                 it->second->state() != v1::WORKER_STATE_STARTING) {
        job.exits[worker] = *it->second;
      }
    }
  }
}

TrainJobController::Outcome TrainJobController::Watch(
    const std::string& job_id, const std::string& pg_id,
    const std::map<std::string, std::string>& processes, int64_t placed_unix_ms) {
  const std::string trainer_id = [&] {
    for (const auto& [id, node] : processes) {
      if (absl::EndsWith(id, "-trainer")) return id;
    }
    return std::string();
  }();
  const size_t ranks = static_cast<size_t>(std::count_if(
      processes.begin(), processes.end(), [](const auto& p) { return !IsHelperProcess(p.first); }));
  absl::Time reconcile_at = absl::Now() + kReconcileEvery;
  while (true) {
    absl::StatusOr<v1::PlacementGroupInfo> pg = groups_->GetGroup(pg_id);
    // A resumed attempt takes the placement it finds as its own.
    if (placed_unix_ms == 0 && pg.ok() && pg->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
      placed_unix_ms = pg->placed_unix_ms();
    }
    const std::string placement_change = PlacementChange(processes, pg, placed_unix_ms);
    if (absl::Now() >= reconcile_at) {
      RecordUnreportedExits(job_id, processes);
      reconcile_at = absl::Now() + kReconcileEvery;
    }
    std::set<std::string> silent_nodes;  // of processes that reported no exit
    {
      absl::MutexLock lock(&mu_);
      Job& job = *jobs_.at(job_id);
      if (job.stop_requested) return {false, true, "stopped"};
      if (!placement_change.empty()) return {false, false, placement_change, true};
      size_t workers_done = 0;
      bool any_failed = false;
      for (const auto& [id, node] : processes) {
        auto exit = job.exits.find(id);
        if (exit == job.exits.end()) continue;
        const v1::WorkerStatus& s = exit->second;
        if (s.signal() != 0 || s.exit_code() != 0) {
          any_failed = true;
        } else if (!IsHelperProcess(id)) {
          ++workers_done;
        }
      }
      if (!any_failed && workers_done == ranks) {
        // Every rank finished cleanly. A user command's trainer only relays
        // reports (stopping it relays the last ones) and its store host is
        // no longer needed; the built-in trainer writes the final
        // checkpoint and checks the ranks agree, so give it a moment; then
        // it is stopped like a leftover.
        if (job.info.spec().entrypoint().has_command()) {
          // Ranks that finish within the relay's start-up (it loads libtorch)
          // would otherwise lose their last reports with it.
          mu_.AwaitWithTimeout(absl::Condition(&job.trainer_reported), kRelayStartup);
          return {true, false, ""};
        }
        auto trainer_exited = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return job.exits.count(trainer_id) > 0;
        };
        mu_.AwaitWithTimeout(absl::Condition(&trainer_exited), absl::Seconds(3));
        auto exit = job.exits.find(trainer_id);
        if (exit != job.exits.end() && (exit->second.signal() != 0 || exit->second.exit_code() != 0)) {
          return {false, false, DescribeFailure(trainer_id, processes.at(trainer_id), exit->second)};
        }
        return {true, false, ""};
      }
      if (!any_failed) {
        mu_.AwaitWithTimeout(absl::Condition(&job.stop_requested), config_.poll);
        continue;
      }
      for (const auto& [id, node] : processes) {
        if (job.exits.count(id) == 0) silent_nodes.insert(node);
      }
    }
    // A node that died takes its workers with it (the raylet's keepers),
    // and their peers fail of the broken connections before the head
    // declares it DEAD: then the node's death is the cause, not theirs.
    const std::set<std::string> unreachable = UnreachableNodes(job_id, silent_nodes);
    Outcome failed = FirstFailure(job_id, processes, unreachable);
    if (std::string lost = AwaitNodeDeath(job_id, unreachable); !lost.empty()) {
      return {false, false, lost, true};
    }
    return failed;
  }
}

absl::StatusOr<v1::ListWorkersResponse> TrainJobController::WorkersOn(const std::string& job_id,
                                                                      const std::string& node) {
  const std::string address = groups_->RayletAddress(node);
  if (address.empty()) return absl::UnavailableError(absl::StrCat("node ", node, " is not ALIVE"));
  v1::ListWorkersRequest request;
  request.set_job_id(job_id);
  return raylets_->ListWorkers(address, request);
}

std::set<std::string> TrainJobController::UnreachableNodes(const std::string& job_id,
                                                           const std::set<std::string>& nodes) {
  std::set<std::string> unreachable;
  for (const std::string& node : nodes) {
    if (!WorkersOn(job_id, node).ok()) unreachable.insert(node);
  }
  return unreachable;
}

TrainJobController::Outcome TrainJobController::FirstFailure(
    const std::string& job_id, const std::map<std::string, std::string>& processes,
    const std::set<std::string>& unreachable) {
  absl::MutexLock lock(&mu_);
  const Job& job = *jobs_.at(job_id);
  // Like torchrun's "first observed failure": the process that failed
  // first, by the time of its error, not the order of the reports (its
  // peers die of the broken connections after it). Its peers get a moment
  // to report, those on unreachable nodes excepted.
  auto all_ranks_exited = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (job.stop_requested) return true;
    for (const auto& [id, node] : processes) {
      if (!IsHelperProcess(id) && unreachable.count(node) == 0 && job.exits.count(id) == 0) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&all_ranks_exited), kFailureSettle);
  const v1::WorkerStatus* first = nullptr;
  std::string first_id, first_node;
  for (const auto& [id, node] : processes) {
    auto exit = job.exits.find(id);
    if (exit == job.exits.end()) continue;
    const v1::WorkerStatus& s = exit->second;
    if (s.signal() == 0 && s.exit_code() == 0) continue;
    if (first == nullptr || FailedAtUs(s) < FailedAtUs(*first)) {
      first = &s;
      first_id = id;
      first_node = node;
    }
  }
  return {false, false, DescribeFailure(first_id, first_node, *first)};
}

std::string TrainJobController::AwaitNodeDeath(const std::string& job_id, const std::set<std::string>& nodes) {
  auto died = [&]() -> std::string {
    for (const std::string& node : nodes) {
      if (groups_->RayletAddress(node).empty()) return absl::StrCat("node ", node, " died (missed heartbeats)");
    }
    return "";
  };
  // The heartbeats stopped at most node_dead_after ago.
  const absl::Time deadline = absl::Now() + (nodes.empty() ? absl::ZeroDuration() : config_.node_dead_after);
  while (true) {
    if (std::string cause = died(); !cause.empty() || absl::Now() >= deadline) return cause;
    absl::MutexLock lock(&mu_);
    const Job& job = *jobs_.at(job_id);
    if (mu_.AwaitWithTimeout(absl::Condition(&job.stop_requested), config_.poll)) return "";
  }
}

void TrainJobController::StopProcesses(const std::string& job_id,
                                       const std::map<std::string, std::string>& processes) {
  for (const auto& [worker_id, node_id] : processes) {
    const std::string address = groups_->RayletAddress(node_id);
    if (address.empty()) continue;
    v1::StopWorkerRequest request;
    request.set_worker_id(worker_id);
    request.set_grace_period_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(config_.stop_grace)));
    request.set_request_id(absl::StrCat("stop/", worker_id));
    raylets_->StopWorker(address, request).IgnoreError();
  }
  // Wait (bounded) until the processes on live nodes are gone, so the next
  // attempt does not share GPUs with the last one. Node liveness is read
  // before taking mu_: the head is never called with mu_ held.
  std::vector<std::string> awaited;
  for (const auto& [worker_id, node_id] : processes) {
    if (!groups_->RayletAddress(node_id).empty()) awaited.push_back(worker_id);
  }
  absl::MutexLock lock(&mu_);
  const Job& job = *jobs_.at(job_id);
  auto all_exited = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& worker_id : awaited) {
      if (!(job.exits.count(worker_id) > 0)) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&all_exited), config_.stop_grace + absl::Seconds(3));
}

void TrainJobController::RunJob(const std::string& job_id) {
  std::string pg_id;
  {
    v1::CreatePlacementGroupRequest meta;
    PlacementGroupSpec spec = [&] {
      absl::MutexLock lock(&mu_);
      Job& job = *jobs_.at(job_id);
      meta.set_name(absl::StrCat(job_id, "-pg"));
      meta.set_job_id(job_id);
      meta.set_request_id(absl::StrCat(job_id, "/pg"));
      return job.spec;
    }();
    absl::StatusOr<std::string> created = groups_->CreateGroup(std::move(spec), meta);
    if (!created.ok()) {
      SetState(job_id, v1::TRAIN_JOB_STATE_FAILED,
               absl::StrCat("creating the placement group: ", created.status().message()));
      return;
    }
    pg_id = *created;
    absl::MutexLock lock(&mu_);
    jobs_.at(job_id)->info.set_placement_group_id(pg_id);
    PersistLocked(*jobs_.at(job_id));
  }
  RunAttempts(job_id, pg_id, 0, std::nullopt);
}

void TrainJobController::RunAttempts(const std::string& job_id, const std::string& pg_id, uint32_t first_attempt,
                                     std::optional<std::map<std::string, std::string>> running) {
  int32_t max_failures = 0;
  bool count_node_failures = true;
  {
    absl::MutexLock lock(&mu_);
    const v1::FailureConfig& failure = jobs_.at(job_id)->info.spec().failure_config();
    max_failures = failure.max_failures();
    count_node_failures = !failure.has_count_node_failures() || failure.count_node_failures();
  }
  v1::TrainJobState final_state = v1::TRAIN_JOB_STATE_FAILED;
  std::string final_message;
  for (uint32_t attempt = first_attempt;; ++attempt) {
    absl::StatusOr<std::map<std::string, std::string>> processes;
    int64_t placed_unix_ms = 0;  // of the placement the attempt starts on; 0 = as found
    if (running) {
      processes = *std::move(running);
      running.reset();
    } else {
      if (!WaitPlaced(job_id, pg_id)) {
        final_state = v1::TRAIN_JOB_STATE_STOPPED;
        final_message = "stopped";
        break;
      }
      absl::StatusOr<v1::PlacementGroupInfo> pg = groups_->GetGroup(pg_id);
      if (pg.ok()) placed_unix_ms = pg->placed_unix_ms();
      SetState(job_id, attempt == 0 ? v1::TRAIN_JOB_STATE_STARTING : v1::TRAIN_JOB_STATE_RESTARTING,
               "starting the trainer and workers");
      processes = pg.ok() ? Launch(job_id, *pg, attempt)
                          : absl::StatusOr<std::map<std::string, std::string>>(pg.status());
    }
    Outcome outcome;
    if (processes.ok()) {
      SetState(job_id, v1::TRAIN_JOB_STATE_RUNNING, "");
      outcome = Watch(job_id, pg_id, *processes, placed_unix_ms);
      if (!outcome.succeeded) StopProcesses(job_id, *processes);
    } else {
      outcome.cause = std::string(processes.status().message());
      // A raylet that died while its processes were being started: the
      // node's death is the cause.
      std::set<std::string> nodes;
      if (absl::StatusOr<v1::PlacementGroupInfo> pg = groups_->GetGroup(pg_id); pg.ok()) {
        for (const v1::BundleLocation& location : pg->locations()) nodes.insert(location.node_id());
      }
      if (std::string lost = AwaitNodeDeath(job_id, UnreachableNodes(job_id, nodes)); !lost.empty()) {
        outcome.cause = lost;
        outcome.node_failure = true;
      }
    }
    if (outcome.succeeded) {
      StopProcesses(job_id, *processes);  // a trainer still up; exited ones are no-ops
      final_state = v1::TRAIN_JOB_STATE_SUCCEEDED;
      break;
    }
    if (outcome.stopped) {
      final_state = v1::TRAIN_JOB_STATE_STOPPED;
      final_message = "stopped";
      break;
    }
    bool give_up = false;
    {
      absl::MutexLock lock(&mu_);
      v1::TrainJobInfo& info = jobs_.at(job_id)->info;
      // The causes list every restart; failures counts those max_failures
      // is about.
      if (count_node_failures || !outcome.node_failure) info.set_failures(info.failures() + 1);
      info.add_failure_causes(outcome.cause);
      give_up = max_failures >= 0 && static_cast<int64_t>(info.failures()) > max_failures;
      PersistLocked(*jobs_.at(job_id));
    }
    if (give_up) {
      final_message = absl::StrCat("failed: ", outcome.cause);
      break;
    }
    if (config_.on_restart) config_.on_restart();
    {
      absl::MutexLock lock(&mu_);
      jobs_.at(job_id)->info.mutable_startup()->set_restarted_unix_us(NowUs());
    }
    SetState(job_id, v1::TRAIN_JOB_STATE_RESTARTING, absl::StrCat("restarting after: ", outcome.cause));
  }
  groups_->RemoveGroup(pg_id);
  SetState(job_id, final_state, final_message);
}

}  // namespace berth
