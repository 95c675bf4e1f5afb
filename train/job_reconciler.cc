#include "train/job_reconciler.h"

#include <algorithm>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "train/scaling_config.h"
#include "train/train_job_spec.h"

namespace berth {
namespace {

// A group waiting for room is looked at again after these waits, for its
// pending reason: its placement wakes the job at once, so with many jobs
// waiting the looks are rare.
constexpr BackoffPolicy kPlacementWait{absl::Milliseconds(100), 2, absl::Seconds(30)};

// An elastic job's split of `group`: it keeps the first min_workers
// bundles, and the bundle of each further worker's group is returned.
std::optional<PlacementGroupSpec> TakeElasticBundles(uint32_t min_workers,
                                                     PlacementGroupSpec* group) {
  if (min_workers == 0 || min_workers >= group->bundles().size()) return std::nullopt;
  // Validated with the job (BuildTrainPlacementGroup), so the split holds.
  absl::StatusOr<ElasticGroups> groups = SplitElastic(*group, min_workers);
  if (!groups.ok()) return std::nullopt;
  *group = std::move(groups->core);
  return std::move(groups->extra);
}

}  // namespace

JobReconciler::JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options)
    : JobReconciler(std::move(info), std::move(spec), std::move(options), Phase::kCreateGroup) {}

JobReconciler::JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options,
                             Phase phase)
    : info_(std::move(info)),
      spec_(std::move(spec)),
      elastic_spec_(TakeElasticBundles(info_.spec().scaling_config().min_workers(), &spec_)),
      membership_(elastic_spec_.has_value(), spec_.bundles().size(),
                  info_.spec().scaling_config().min_workers(),
                  info_.spec().scaling_config().num_workers()),
      options_(std::move(options)),
      phase_(phase),
      placement_wait_(kPlacementWait),
      timers_(info_.spec()),
      stop_grace_(StopGrace(info_.spec(), options_.default_stop_grace)),
      release_retry_(kPlacementWait) {}

JobReconciler JobReconciler::Restored(const v1::TrainJobRecord& record, PlacementGroupSpec spec,
                                      JobOptions options) {
  const bool finished = IsTerminal(record.info().state());
  JobReconciler job(record.info(), std::move(spec), std::move(options),
                    finished ? Phase::kDone : Phase::kCreateGroup);
  job.stop_requested_ = record.stop_requested();
  const v1::TrainJobInfo& i = job.info_;
  for (const v1::AttemptWorkers& past : record.past_attempts()) {
    for (const v1::WorkerRank& w : past.workers())
      job.logs_.push_back(job.LogOf(w, past.attempt()));
  }
  for (const v1::WorkerRank& w : i.workers()) job.logs_.push_back(job.LogOf(w, i.attempt()));
  if (!finished && IsTerminal(record.ending_state())) {
    job.End(record.ending_state(), record.ending_message());
    return job;
  }
  if (finished || i.placement_group_id().empty()) return job;  // the latter: creates its group
  job.attempt_ = i.attempt();
  job.processes_ = RecordedProcesses(i);
  if (i.state() == v1::TRAIN_JOB_STATE_RUNNING && !job.processes_.empty()) {
    // Processes that ended while the head was away: their exit reports may
    // have been lost, so its first Step asks their raylets.
    job.phase_ = Phase::kWatch;
    return job;
  }
  // A half-started attempt: whatever the previous head started, recorded
  // or not, is stopped, and the next attempt takes a number no raylet has
  // seen (a worker id started again with other arguments is refused).
  if (!job.processes_.empty()) job.attempt_ += 1;
  job.phase_ = Phase::kResumeScan;
  return job;
}

v1::TrainJobRecord JobReconciler::Record() const {
  v1::TrainJobRecord record;
  *record.mutable_info() = info_;
  record.set_stop_requested(stop_requested_);
  if (phase_ == Phase::kRemoveGroup) {
    record.set_ending_state(final_state_);
    record.set_ending_message(final_message_);
  }
  for (const RankLog& l : logs_) {
    if (l.attempt == info_.attempt() && info_.workers_size() > 0) continue;  // info's workers
    if (record.past_attempts().empty() || record.past_attempts().rbegin()->attempt() != l.attempt) {
      record.add_past_attempts()->set_attempt(l.attempt);
    }
    v1::WorkerRank* w = record.mutable_past_attempts()->rbegin()->add_workers();
    w->set_world_rank(l.rank);
    w->set_node_id(l.node_id);
    w->set_worker_id(l.worker_id);
    if (l.node_rank) w->set_node_rank(*l.node_rank);
  }
  return record;
}

RankLog JobReconciler::LogOf(const v1::WorkerRank& worker, uint32_t attempt) const {
  RankLog log{worker.world_rank(), worker.node_id(), worker.worker_id(), attempt, std::nullopt};
  if (IsPerNode(info_.spec())) log.node_rank = worker.node_rank();
  return log;
}

bool JobReconciler::RequestStop() {
  if (stop_requested_ || IsTerminal(info_.state())) return false;
  stop_requested_ = true;
  return true;
}

void JobReconciler::OnWorkerExit(const v1::WorkerStatus& status) {
  exits_[status.worker_id()] = status;
}

bool JobReconciler::OnProgress(absl::Time now, const v1::ReportTrainProgressRequest& request) {
  trainer_reported_ = true;
  // A report of the script's (a command's relay says it is up with an
  // empty one, which is no progress).
  if (request.step() > 0 || !request.metrics().empty() || !request.latest_checkpoint().empty()) {
    timers_.Progressed(now);
  }
  if (request.step() >= info_.last_step()) {
    info_.set_last_step(request.step());
    info_.set_last_loss(request.loss());
    if (!request.metrics().empty()) *info_.mutable_last_metrics() = request.metrics();
  }
  bool due = phase_ == Phase::kFinishing;
  // Every report names the latest checkpoint: a new one is a new path
  // (the built-in trainer's step-N.pt, the SDK's checkpoint_<time>), and
  // its step is that of the first report naming it.
  if (!request.latest_checkpoint().empty() &&
      request.latest_checkpoint() != info_.latest_checkpoint() &&
      request.step() >= info_.latest_checkpoint_step()) {
    info_.set_latest_checkpoint(request.latest_checkpoint());
    info_.set_latest_checkpoint_step(request.step());
    due |= move_checkpoint_.has_value();  // a moving job moves at this checkpoint
  }
  // The first report of the ranks' times in an attempt counts (placement
  // clears them for the next attempt).
  v1::StartupTimeline& startup = *info_.mutable_startup();
  if (request.group_joined_unix_us() != 0 && startup.group_joined_unix_us() == 0) {
    startup.set_ranks_running_unix_us(request.ranks_running_unix_us());
    startup.set_group_joined_unix_us(request.group_joined_unix_us());
  }
  return due;
}

std::set<std::string> JobReconciler::WatchedNodes() const {
  // The attempt's nodes and those that stopped answering: every node a
  // phase reached within one Step may ask about.
  if (phase_ == Phase::kDone) return {};
  std::set<std::string> nodes = NodesOf(processes_);
  nodes.insert(unreachable_.begin(), unreachable_.end());
  return nodes;
}

void JobReconciler::SetState(absl::Time now, v1::TrainJobState state, const std::string& message) {
  info_.set_state(state);
  info_.set_message(message);
  if (state == v1::TRAIN_JOB_STATE_RUNNING && info_.started_unix_ms() == 0) {
    info_.set_started_unix_ms(absl::ToUnixMillis(now));
  }
  if (IsTerminal(state)) info_.set_ended_unix_ms(absl::ToUnixMillis(now));
  persist_ = true;
}

JobStep JobReconciler::Act(JobAction action) {
  JobStep step;
  step.action = std::move(action);
  return step;
}

JobStep JobReconciler::WaitUntil(absl::Time wake_at) {
  JobStep wait;
  wait.wake_at = wake_at;
  return wait;
}

JobStep JobReconciler::Step(absl::Time now, const JobWorld& world) {
  // Each phase either acts, waits, or moves to another phase and loops.
  std::optional<JobStep> step;
  while (!step) step = StepPhase(now, world);
  step->persist = std::exchange(persist_, false);
  step->restarted = std::exchange(restarted_, false);
  return *std::move(step);
}

std::optional<JobStep> JobReconciler::StepPhase(absl::Time now, const JobWorld& world) {
  switch (phase_) {
    case Phase::kCreateGroup:
      return CreateJobGroup();
    case Phase::kCreateElastic:
      return CreateElasticGroup();
    case Phase::kResumeScan:
      return ResumeScan(world);
    case Phase::kAwaitPlacement:
      return AwaitPlacement(now, world);
    case Phase::kStartProcesses:
      return Act(StartProcesses{std::move(to_start_)});
    case Phase::kWatch:
      return Watch(now, world);
    case Phase::kFinishing:
      return Finishing(now);
    case Phase::kProbe:
      return Probe(now, world);
    case Phase::kSettle:
      return Settle(now, world);
    case Phase::kAwaitNodeDeath:
      return AwaitingNodeDeath(now, world);
    case Phase::kStopping:
      if (to_stop_.empty()) {
        AfterStopped(now);
        return std::nullopt;
      }
      return Act(StopProcesses{std::move(to_stop_), stop_grace_});
    case Phase::kAwaitStopped:
      return AwaitStopped(now);
    case Phase::kReleaseGroup:
      return ReleasingGroup(now);
    case Phase::kRemoveGroup:
      return Act(RemoveGroup{to_remove_.back()});
    case Phase::kAllocatePort:  // awaiting the result
    case Phase::kDone:
      break;
  }
  return JobStep{};
}

CreateGroup JobReconciler::GroupRequest(PlacementGroupSpec spec, std::string name,
                                        std::string request_id) const {
  CreateGroup create{std::move(spec), {}};
  create.meta.set_name(std::move(name));
  create.meta.set_job_id(info_.job_id());
  create.meta.set_queue(info_.spec().queue());
  create.meta.set_priority(info_.spec().priority());
  create.meta.set_priority_class(info_.spec().priority_class());
  create.meta.set_time_limit_s(info_.spec().time_limit_s());
  create.meta.set_request_id(std::move(request_id));
  return create;
}

JobStep JobReconciler::CreateJobGroup() const {
  // A group made again (the first is gone) has a request id of its own, or
  // the head would answer with the old one.
  return Act(GroupRequest(spec_, absl::StrCat(info_.job_id(), "-pg"),
                          info_.placement_group_id().empty()
                              ? absl::StrCat(info_.job_id(), "/pg")
                              : absl::StrCat(info_.job_id(), "/pg/a", attempt_)));
}

JobStep JobReconciler::CreateElasticGroup() const {
  const int j = info_.elastic_group_ids_size();
  // Made again after they were dropped: a request id of the attempt's.
  return Act(GroupRequest(*elastic_spec_, absl::StrCat(info_.job_id(), "-pg-e", j),
                          absl::StrCat(info_.job_id(), "/pg/e", j, "/a", attempt_)));
}

JobStep JobReconciler::ResumeScan(const JobWorld& world) {
  std::set<std::string> nodes = NodesOf(processes_);
  if (world.group.ok()) {
    for (const v1::BundleLocation& l : world.group->locations()) nodes.insert(l.node_id());
  }
  listing_ = Listing::kResumeScan;
  return Act(ListWorkers{std::move(nodes)});
}

std::optional<JobStep> JobReconciler::AwaitPlacement(absl::Time now, const JobWorld& world) {
  if (stop_requested_) {
    End(v1::TRAIN_JOB_STATE_STOPPED, "stopped");
    return std::nullopt;
  }
  if (std::optional<std::string> timed_out = timers_.TimedOut(now, info_)) {
    End(v1::TRAIN_JOB_STATE_TIMED_OUT, *std::move(timed_out));
    return std::nullopt;
  }
  // One attempt per Step: a restart yields first (and after a failure of
  // the job's own, backs off), then looks at the head again.
  if (restart_pending_ || now < restart_at_) {
    restart_pending_ = false;
    return WaitUntil(std::min(std::max(restart_at_, now), JobTimers::LimitEnds(info_)));
  }
  if (GroupGone(world)) {
    phase_ = Phase::kCreateGroup;
    return std::nullopt;
  }
  if (std::string id = membership_.ToRelease(info_, world, /*running=*/false); !id.empty()) {
    releasing_ = id;
    return Act(ReleaseGroup{std::move(id)});
  }
  if (OnPreempting(now, world)) return std::nullopt;
  if (world.group.ok() && world.group->moving() && !world.group->preempting()) {
    // Placed (partly) on a draining node: those bundles are placed elsewhere.
    info_.set_message(absl::StrCat("moving: ", world.group->moving_reason()));
    releasing_ = info_.placement_group_id();
    return Act(ReleaseGroup{releasing_});
  }
  const std::vector<uint32_t> core = membership_.CoreBundlesToRun(info_, world);
  if (core.empty()) return WaitForPlacement(now, world);
  placement_wait_.Reset();
  // The elastic groups are made once the job's own group holds its
  // bundles, so they never take what it waits for.
  if (membership_.WantsAnotherGroup(info_)) {
    phase_ = Phase::kCreateElastic;
    return std::nullopt;
  }
  return StartAttempt(now, world, core);
}

JobStep JobReconciler::WaitForPlacement(absl::Time now, const JobWorld& world) {
  // While the job's own group waits, its elastic groups would hold GPUs for
  // nothing (or what it waits for): they go, and are made again once it is
  // placed.
  if (world.group.ok() && info_.elastic_group_ids_size() > 0) {
    dropping_elastic_ = true;
    return Act(RemoveGroup{*info_.elastic_group_ids().rbegin()});
  }
  if (world.group.ok()) {
    info_.set_message(absl::StrCat("waiting for placement",
                                   world.group->infeasible() ? " (infeasible)" : "", ": ",
                                   world.group->pending_reason()));
  }
  return WaitUntil(std::min(now + placement_wait_.Next(), JobTimers::LimitEnds(info_)));
}

std::optional<JobStep> JobReconciler::StartAttempt(absl::Time now, const JobWorld& world,
                                                   const std::vector<uint32_t>& core) {
  // A new attempt's start: the stages after placement begin again.
  v1::StartupTimeline& startup = *info_.mutable_startup();
  startup.set_placed_unix_us(absl::ToUnixMicros(now));
  startup.clear_workers_started_unix_us();
  startup.clear_ranks_running_unix_us();
  startup.clear_group_joined_unix_us();
  placed_unix_ms_ = world.group->placed_unix_ms();
  timers_.Placed(now, &info_);
  SetState(now, attempt_ == 0 ? v1::TRAIN_JOB_STATE_STARTING : v1::TRAIN_JOB_STATE_RESTARTING,
           "starting the trainer and workers");
  const AttemptMembers members = membership_.NextAttempt(info_, world, core);
  absl::StatusOr<std::vector<RankedWorker>> ranks = AssignRanks(
      members.sites, WorkerBundlesAlike(spec_) ? RankOrder::kByPlacement : RankOrder::kByBundle);
  if (!ranks.ok()) {
    LaunchFailed(std::string(ranks.status().message()));
    return std::nullopt;
  }
  for (RankedWorker& r : *ranks) {
    std::tie(r.placement_group_id, r.bundle_index) = members.bundles[r.bundle_index];
  }
  membership_.RecordResize(now, attempt_, static_cast<uint32_t>(ranks->size()), resize_reason_,
                           &info_);
  resize_reason_.clear();
  membership_.AttemptStarted();
  ranks_ = *std::move(ranks);
  phase_ = Phase::kAllocatePort;
  return Act(AllocatePort{ranks_[0].node_id});
}

void JobReconciler::OnResult(absl::Time now, JobActionResult result) {
  if (auto* created = std::get_if<GroupCreated>(&result)) {
    OnGroupCreated(now, *created);
  } else if (auto* port = std::get_if<PortAllocated>(&result)) {
    OnPort(now, *port);
  } else if (auto* started = std::get_if<ProcessesStarted>(&result)) {
    OnStarted(now, std::move(*started));
  } else if (auto* listed = std::get_if<WorkersListed>(&result)) {
    OnListed(now, *listed);
  } else if (auto* sent = std::get_if<StopsSent>(&result)) {
    awaited_ = std::move(sent->awaited);
    deadline_ = now + stop_grace_ + absl::Seconds(3);
    phase_ = Phase::kAwaitStopped;
  } else if (auto* released = std::get_if<GroupReleased>(&result)) {
    OnReleased(now, *released);
  } else if (std::holds_alternative<GroupRemoved>(result)) {
    OnRemoved(now);
  }
}

void JobReconciler::OnGroupCreated(absl::Time now, const GroupCreated& created) {
  if (phase_ == Phase::kCreateElastic) {
    if (!created.placement_group_id.ok()) {
      End(v1::TRAIN_JOB_STATE_FAILED, absl::StrCat("creating an elastic group: ",
                                                   created.placement_group_id.status().message()));
      return;
    }
    info_.add_elastic_group_ids(*created.placement_group_id);
    persist_ = true;
    phase_ = Phase::kAwaitPlacement;  // which makes the next one, if any
    return;
  }
  if (!created.placement_group_id.ok()) {
    SetState(now, v1::TRAIN_JOB_STATE_FAILED,
             absl::StrCat("creating the placement group: ",
                          created.placement_group_id.status().message()));
    phase_ = Phase::kDone;
    return;
  }
  info_.set_placement_group_id(*created.placement_group_id);
  persist_ = true;
  phase_ = Phase::kAwaitPlacement;
}

AttemptInputs JobReconciler::PlanInputs(const std::string& master_addr,
                                        uint16_t master_port) const {
  AttemptInputs in;
  in.job_id = info_.job_id();
  in.spec = info_.spec();
  in.placement_group_id = info_.placement_group_id();
  in.attempt = attempt_;
  in.ranks = ranks_;
  in.master_addr = master_addr;
  in.master_port = master_port;
  in.job_dir = absl::StrCat(
      info_.spec().storage_path().empty() ? options_.checkpoint_root : info_.spec().storage_path(),
      "/", info_.job_id());
  in.latest_checkpoint = info_.latest_checkpoint();
  in.head_address = options_.head_address;
  in.worker_binary = options_.worker_binary;
  in.relay_binary = options_.relay_binary;
  in.cluster_token = options_.cluster_token;
  return in;
}

void JobReconciler::OnPort(absl::Time now, const PortAllocated& port) {
  if (!port.endpoint.ok()) {
    LaunchFailed(std::string(port.endpoint.status().message()));
    return;
  }
  const auto& [host, master_port] = *port.endpoint;
  const AttemptInputs in = PlanInputs(host, master_port);
  exits_.clear();
  logs_.erase(std::remove_if(logs_.begin(), logs_.end(),
                             [&](const RankLog& l) {
                               return l.attempt == attempt_ ||
                                      l.attempt + kAttemptsWithLogs <= attempt_;
                             }),
              logs_.end());
  trainer_reported_ = false;
  info_.clear_workers();
  info_.set_attempt(attempt_);
  info_.set_master_address(absl::StrCat(host, ":", master_port));
  absl::StatusOr<AttemptPlan> plan = PlanAttempt(in);
  if (!plan.ok()) {
    LaunchFailed(std::string(plan.status().message()));
    return;
  }
  for (const v1::WorkerRank& rank : plan->ranks) {
    *info_.add_workers() = rank;
    logs_.push_back(LogOf(rank, attempt_));
  }
  to_start_ = std::move(plan->by_node);
  phase_ = Phase::kStartProcesses;
}

void JobReconciler::OnReleased(absl::Time now, const GroupReleased& released) {
  if (!releasing_.empty()) {
    // An elastic group, or a moving group before its attempt: it waits
    // again; one in two-phase commit is asked again after a moment.
    releasing_.clear();
    if (released.status.ok() || absl::IsNotFound(released.status)) {
      release_retry_.Reset();
    } else {
      restart_at_ = std::max(restart_at_, now + release_retry_.Next());
    }
    return;
  }
  if (released.status.ok() || absl::IsNotFound(released.status)) {
    // The next attempt starts when the group is placed again, from the
    // latest checkpoint; nothing of this one is left.
    processes_.clear();
    ++attempt_;
    release_retry_.Reset();
    phase_ = Phase::kAwaitPlacement;
  } else {
    deadline_ = now + release_retry_.Next();  // in two-phase commit: ask again
  }
}

void JobReconciler::OnRemoved(absl::Time now) {
  if (dropping_elastic_) {
    dropping_elastic_ = false;
    info_.mutable_elastic_group_ids()->RemoveLast();
    persist_ = true;
    return;
  }
  to_remove_.pop_back();
  if (!to_remove_.empty()) return;
  SetState(now, final_state_, final_message_);
  phase_ = Phase::kDone;
}

void JobReconciler::End(v1::TrainJobState state, std::string message) {
  final_state_ = state;
  final_message_ = std::move(message);
  persist_ = true;  // before its groups go: a head restarted meanwhile ends it so
  to_remove_ = {info_.placement_group_id()};
  for (auto it = info_.elastic_group_ids().rbegin(); it != info_.elastic_group_ids().rend(); ++it) {
    to_remove_.push_back(*it);
  }
  phase_ = Phase::kRemoveGroup;
}

}  // namespace berth
