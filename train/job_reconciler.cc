#include "train/job_reconciler.h"

#include <algorithm>
#include <csignal>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "train/attempt_plan.h"
#include "train/scaling_config.h"
#include "train/train_job_spec.h"

namespace berth {
namespace {

// How long the peers of a failed process get to fail too before the
// attempt's cause is chosen, when a node of the attempt does not answer
// (its processes' exits may come late). With every node answering, the
// probe's listing has every exit so far and the peers are stopped at once.
constexpr absl::Duration kFailureSettle = absl::Seconds(2);
// The longest a finished command job waits for its report relay to be up.
constexpr absl::Duration kRelayStartup = absl::Seconds(10);
// The longest the built-in trainer gets to write its last checkpoint once
// its ranks finished.
constexpr absl::Duration kTrainerFinish = absl::Seconds(3);
// How often a running attempt asks its raylets for exits it was not told
// of (a report lost with a head restart, a worker its raylet no longer has);
// also the longest it goes without looking at its group and nodes.
constexpr absl::Duration kReconcileEvery = absl::Seconds(2);
// A group waiting for room is looked at again after these waits, for its
// pending reason: its placement wakes the job at once, so with many jobs
// waiting the looks are rare (10,000 waiting jobs are 333 looks/s).
constexpr BackoffPolicy kPlacementWait{absl::Milliseconds(100), 2, absl::Seconds(30)};
// Between attempts that failed before their processes ran (the port, the
// plan or a StartWorker failed): a launch that cannot work is not retried
// in a tight loop. A failure of running processes restarts at once.
constexpr BackoffPolicy kLaunchRetry{absl::Seconds(1), 2, absl::Seconds(30)};

bool Failed(const v1::WorkerStatus& s) { return s.signal() != 0 || s.exit_code() != 0; }

// The job's group no longer exists: someone removed it (a job removes its
// groups only once its end is written, which a restarted head carries out).
bool GroupGone(const JobWorld& world) {
  if (!world.group.ok()) return absl::IsNotFound(world.group.status());
  return world.group->state() == v1::PLACEMENT_GROUP_STATE_REMOVED;
}

// A group the attempt may run workers in: placed, and not being preempted.
bool Usable(const absl::StatusOr<v1::PlacementGroupInfo>& group) {
  return group.ok() && group->state() == v1::PLACEMENT_GROUP_STATE_CREATED && !group->preempting();
}

bool Runs(const v1::WorkerStatus& w) {
  return w.state() == v1::WORKER_STATE_RUNNING || w.state() == v1::WORKER_STATE_STARTING;
}

}  // namespace

JobReconciler::JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options)
    : JobReconciler(std::move(info), std::move(spec), std::move(options), Phase::kCreateGroup) {}

JobReconciler::JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options,
                             Phase phase)
    : info_(std::move(info)),
      spec_(std::move(spec)),
      options_(std::move(options)),
      phase_(phase),
      placement_wait_(kPlacementWait),
      launch_retry_(kLaunchRetry),
      release_retry_(kPlacementWait) {
  const uint32_t min = info_.spec().scaling_config().min_workers();
  if (min > 0 && min < spec_.bundles().size()) {
    // Validated with the job (BuildTrainPlacementGroup), so the split holds.
    if (absl::StatusOr<ElasticGroups> groups = SplitElastic(spec_, min); groups.ok()) {
      spec_ = std::move(groups->core);
      elastic_spec_ = std::move(groups->extra);
    }
  }
}

JobReconciler JobReconciler::Restored(const v1::TrainJobRecord& record, PlacementGroupSpec spec,
                                      JobOptions options) {
  const bool finished = IsTerminal(record.info().state());
  JobReconciler job(record.info(), std::move(spec), std::move(options),
                    finished ? Phase::kDone : Phase::kCreateGroup);
  job.stop_requested_ = record.stop_requested();
  const v1::TrainJobInfo& i = job.info_;
  for (const v1::WorkerRank& w : i.workers()) {
    job.logs_.push_back({w.world_rank(), w.node_id(), w.worker_id(), i.attempt()});
  }
  if (!finished && IsTerminal(record.ending_state())) {
    job.End(record.ending_state(), record.ending_message());
    return job;
  }
  if (finished || i.placement_group_id().empty()) return job;  // the latter: creates its group
  job.attempt_ = i.attempt();
  for (const v1::WorkerRank& w : i.workers()) {
    job.processes_[w.worker_id()] = w.node_id();
    if (w.world_rank() != 0) continue;
    job.processes_[absl::StrCat(i.job_id(), "-a", i.attempt(), "-trainer")] = w.node_id();
    if (HasStoreHost(i.spec())) {
      job.processes_[absl::StrCat(i.job_id(), "-a", i.attempt(), "-store")] = w.node_id();
    }
  }
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
  return record;
}

bool JobReconciler::RequestStop() {
  if (stop_requested_ || IsTerminal(info_.state())) return false;
  stop_requested_ = true;
  return true;
}

void JobReconciler::OnWorkerExit(const v1::WorkerStatus& status) {
  exits_[status.worker_id()] = status;
}

bool JobReconciler::OnProgress(const v1::ReportTrainProgressRequest& request) {
  trainer_reported_ = true;
  if (request.step() >= info_.last_step()) {
    info_.set_last_step(request.step());
    info_.set_last_loss(request.loss());
    if (!request.metrics().empty()) *info_.mutable_last_metrics() = request.metrics();
  }
  if (!request.latest_checkpoint().empty() && request.step() >= info_.latest_checkpoint_step()) {
    info_.set_latest_checkpoint(request.latest_checkpoint());
    info_.set_latest_checkpoint_step(request.step());
  }
  // The first report of the ranks' times in an attempt counts (placement
  // clears them for the next attempt).
  v1::StartupTimeline& startup = *info_.mutable_startup();
  if (request.group_joined_unix_us() != 0 && startup.group_joined_unix_us() == 0) {
    startup.set_ranks_running_unix_us(request.ranks_running_unix_us());
    startup.set_group_joined_unix_us(request.group_joined_unix_us());
  }
  return phase_ == Phase::kFinishing;
}

std::set<std::string> JobReconciler::NodesOf(const JobProcesses& processes) const {
  std::set<std::string> nodes;
  for (const auto& [worker, node] : processes) nodes.insert(node);
  return nodes;
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

JobStep JobReconciler::Step(absl::Time now, const JobWorld& world) {
  JobStep step = [&]() -> JobStep {
    // Each case either acts, waits, or moves to another phase and loops.
    while (true) {
      switch (phase_) {
        case Phase::kCreateGroup: {
          CreateGroup create{spec_, {}};
          create.meta.set_name(absl::StrCat(info_.job_id(), "-pg"));
          create.meta.set_job_id(info_.job_id());
          create.meta.set_queue(info_.spec().queue());
          create.meta.set_priority(info_.spec().priority());
          create.meta.set_priority_class(info_.spec().priority_class());
          create.meta.set_time_limit_s(info_.spec().time_limit_s());
          // A group made again (the first is gone) has a request id of its
          // own, or the head would answer with the old one.
          create.meta.set_request_id(info_.placement_group_id().empty()
                                         ? absl::StrCat(info_.job_id(), "/pg")
                                         : absl::StrCat(info_.job_id(), "/pg/a", attempt_));
          return Act(std::move(create));
        }
        case Phase::kCreateElastic: {
          const int j = info_.elastic_group_ids_size();
          CreateGroup create{*elastic_spec_, {}};
          create.meta.set_name(absl::StrCat(info_.job_id(), "-pg-e", j));
          create.meta.set_job_id(info_.job_id());
          create.meta.set_queue(info_.spec().queue());
          create.meta.set_priority(info_.spec().priority());
          create.meta.set_priority_class(info_.spec().priority_class());
          create.meta.set_time_limit_s(info_.spec().time_limit_s());
          // Made again after they were dropped: a request id of the attempt's.
          create.meta.set_request_id(absl::StrCat(info_.job_id(), "/pg/e", j, "/a", attempt_));
          return Act(std::move(create));
        }
        case Phase::kResumeScan: {
          std::set<std::string> nodes = NodesOf(processes_);
          if (world.group.ok()) {
            for (const v1::BundleLocation& l : world.group->locations()) nodes.insert(l.node_id());
          }
          listing_ = Listing::kResumeScan;
          return Act(ListWorkers{std::move(nodes)});
        }
        case Phase::kAwaitPlacement: {
          if (stop_requested_) {
            End(v1::TRAIN_JOB_STATE_STOPPED, "stopped");
            continue;
          }
          // One attempt per Step: a restart yields first (and after a failed
          // launch, waits), then looks at the head again.
          if (restart_pending_) {
            restart_pending_ = false;
            JobStep wait;
            wait.wake_at = restart_at_;
            return wait;
          }
          if (GroupGone(world)) {
            phase_ = Phase::kCreateGroup;
            continue;
          }
          if (std::string id = ElasticToRelease(world); !id.empty()) {
            releasing_ = id;
            return Act(ReleaseGroup{std::move(id)});
          }
          if (OnPreempting(now, world)) continue;
          const std::vector<uint32_t> core = CoreBundlesToRun(world);
          if (core.empty()) {
            // While the job's own group waits, its elastic groups would hold
            // GPUs for nothing (or what it waits for): they go, and are made
            // again once it is placed.
            if (world.group.ok() && info_.elastic_group_ids_size() > 0) {
              dropping_elastic_ = true;
              return Act(RemoveGroup{*info_.elastic_group_ids().rbegin()});
            }
            if (world.group.ok()) {
              info_.set_message(absl::StrCat("waiting for placement",
                                             world.group->infeasible() ? " (infeasible)" : "", ": ",
                                             world.group->pending_reason()));
            }
            JobStep wait;
            wait.wake_at = now + placement_wait_.Next();
            return wait;
          }
          placement_wait_.Reset();
          // The elastic groups are made once the job's own group holds its
          // bundles, so they never take what it waits for.
          if (elastic() && info_.elastic_group_ids_size() <
                               static_cast<int>(info_.spec().scaling_config().num_workers() -
                                                spec_.bundles().size())) {
            phase_ = Phase::kCreateElastic;
            continue;
          }
          // A new attempt's start: the stages after placement begin again.
          v1::StartupTimeline& startup = *info_.mutable_startup();
          startup.set_placed_unix_us(absl::ToUnixMicros(now));
          startup.clear_workers_started_unix_us();
          startup.clear_ranks_running_unix_us();
          startup.clear_group_joined_unix_us();
          placed_unix_ms_ = world.group->placed_unix_ms();
          SetState(now,
                   attempt_ == 0 ? v1::TRAIN_JOB_STATE_STARTING : v1::TRAIN_JOB_STATE_RESTARTING,
                   "starting the trainer and workers");
          // The job's bundles, then each elastic group placed by now.
          const std::vector<BundleSite> group_sites = SitesOf(*world.group);
          std::vector<BundleSite> sites;
          std::vector<std::pair<std::string, uint32_t>> site_bundles;
          for (uint32_t b : core) {
            sites.push_back(group_sites[b]);
            site_bundles.emplace_back("", b);
          }
          for (const std::string& id : info_.elastic_group_ids()) {
            auto g = world.elastic.find(id);
            if (g == world.elastic.end() || !Usable(g->second)) continue;
            sites.push_back(SitesOf(*g->second)[0]);
            site_bundles.emplace_back(id, 0);
          }
          absl::StatusOr<std::vector<RankedWorker>> ranks = AssignRanks(
              sites, WorkerBundlesAlike(spec_) ? RankOrder::kByPlacement : RankOrder::kByBundle);
          if (!ranks.ok()) {
            LaunchFailed(std::string(ranks.status().message()));
            continue;
          }
          for (RankedWorker& r : *ranks) {
            std::tie(r.placement_group_id, r.bundle_index) = site_bundles[r.bundle_index];
          }
          const uint32_t world_size = static_cast<uint32_t>(ranks->size());
          if (elastic() && info_.workers_size() > 0 &&
              (!resize_reason_.empty() ||
               static_cast<uint32_t>(info_.workers_size()) != world_size)) {
            v1::ResizeEvent* resize = info_.add_resizes();
            resize->set_unix_ms(absl::ToUnixMillis(now));
            resize->set_attempt(attempt_);
            resize->set_from(info_.workers_size());
            resize->set_to(world_size);
            resize->set_reason(resize_reason_.empty() ? "restarted with the workers placed"
                                                      : resize_reason_);
          }
          resize_reason_.clear();
          grow_after_checkpoint_ = -1;
          ranks_ = *std::move(ranks);
          phase_ = Phase::kAllocatePort;
          return Act(AllocatePort{ranks_[0].node_id});
        }
        case Phase::kStartProcesses:
          return Act(StartProcesses{std::move(to_start_)});
        case Phase::kWatch:
          if (std::optional<JobStep> s = Watch(now, world)) return *s;
          continue;
        case Phase::kFinishing:
          if (std::optional<JobStep> s = Finishing(now)) return *s;
          continue;
        case Phase::kProbe:
          if (listing_ == Listing::kLaunchFailed && world.group.ok()) {
            for (const v1::BundleLocation& l : world.group->locations())
              to_list_.insert(l.node_id());
          }
          if (to_list_.empty()) {
            OnListed(now, {});
            continue;
          }
          return Act(ListWorkers{std::move(to_list_)});
        case Phase::kSettle: {
          // Like torchrun's "first observed failure": the process that
          // failed first, by the time of its error, not the order of the
          // reports (its peers die of the broken connections after it).
          // Every node answered the probe, so every exit so far is known
          // (a root cause exits before its peers see the broken
          // connections): stop the rest now rather than wait for them to
          // fail on their own. Otherwise the peers on the nodes that
          // answered get a moment to report.
          if (unreachable_.empty()) {
            cause_ = FirstFailure();
            node_failure_ = false;
            Stop(processes_, AfterStop::kCountFailure);
            continue;
          }
          bool all_exited = true;
          for (const auto& [id, node] : processes_) {
            if (!IsHelperProcess(id) && unreachable_.count(node) == 0 && exits_.count(id) == 0) {
              all_exited = false;
            }
          }
          if (!all_exited && !stop_requested_ && now < deadline_) {
            JobStep wait;
            wait.wake_at = deadline_;
            return wait;
          }
          cause_ = FirstFailure();
          node_failure_ = false;
          stop_after_node_wait_ = true;
          AwaitNodeDeath(now);
          continue;
        }
        case Phase::kAwaitNodeDeath:
          if (std::optional<JobStep> s = AwaitingNodeDeath(now, world)) return *s;
          continue;
        case Phase::kStopping:
          if (to_stop_.empty()) {
            AfterStopped(now);
            continue;
          }
          return Act(StopProcesses{std::move(to_stop_)});
        case Phase::kAwaitStopped: {
          const bool all_exited =
              std::all_of(awaited_.begin(), awaited_.end(),
                          [&](const std::string& w) { return exits_.count(w) > 0; });
          if (!all_exited && now < deadline_) {
            JobStep wait;
            wait.wake_at = deadline_;
            return wait;
          }
          AfterStopped(now);
          continue;
        }
        case Phase::kReleaseGroup:
          if (now < deadline_) {
            JobStep wait;
            wait.wake_at = deadline_;
            return wait;
          }
          return Act(ReleaseGroup{info_.placement_group_id()});
        case Phase::kRemoveGroup:
          return Act(RemoveGroup{to_remove_.back()});
        case Phase::kAllocatePort:  // awaiting the result
        case Phase::kDone:
          return {};
      }
    }
  }();
  step.persist = std::exchange(persist_, false);
  step.restarted = std::exchange(restarted_, false);
  return step;
}

std::optional<JobStep> JobReconciler::Watch(absl::Time now, const JobWorld& world) {
  // A resumed attempt takes the placement it finds as its own.
  if (placed_unix_ms_ == 0 && world.group.ok() &&
      world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    placed_unix_ms_ = world.group->placed_unix_ms();
  }
  if (now >= reconcile_at_) {
    reconcile_at_ = now + kReconcileEvery;
    listing_ = Listing::kRecordExits;
    return Act(ListWorkers{NodesOf(processes_)});
  }
  if (stop_requested_) {
    Stop(processes_, AfterStop::kEndStopped);
    return std::nullopt;
  }
  if (OnPreempting(now, world)) return std::nullopt;
  if (std::string id = ElasticToRelease(world); !id.empty()) {
    releasing_ = id;
    return Act(ReleaseGroup{std::move(id)});
  }
  if (std::string loss = ElasticLoss(world); !loss.empty()) {
    resize_reason_ = std::move(loss);
    Stop(processes_, AfterStop::kResize);
    return std::nullopt;
  }
  if (std::string change = PlacementChange(world); !change.empty()) {
    cause_ = std::move(change);
    node_failure_ = true;
    Stop(processes_, AfterStop::kCountFailure);
    return std::nullopt;
  }
  size_t ranks = 0;
  size_t ranks_done = 0;
  bool any_failed = false;
  for (const auto& [id, node] : processes_) {
    if (!IsHelperProcess(id)) ++ranks;
    auto exit = exits_.find(id);
    if (exit == exits_.end()) continue;
    if (Failed(exit->second)) {
      any_failed = true;
    } else if (!IsHelperProcess(id)) {
      ++ranks_done;
    }
  }
  if (!any_failed && ranks_done == ranks) {
    // Every rank finished cleanly. A user command's trainer only relays
    // reports (stopping it relays the last ones), and ranks that finish
    // within the relay's start-up (it loads libtorch) would lose their last
    // reports with it; the built-in trainer writes the final checkpoint and
    // checks the ranks agree. Either gets a moment, then is stopped like a
    // leftover.
    phase_ = Phase::kFinishing;
    deadline_ = now + (info_.spec().entrypoint().has_command() ? kRelayStartup : kTrainerFinish);
    return std::nullopt;
  }
  if (!any_failed && elastic()) {
    // More workers placed: grow at the next checkpoint, so no step is lost.
    if (const size_t ready = ElasticReady(world); ready == 0) {
      grow_after_checkpoint_ = -1;
    } else if (grow_after_checkpoint_ < 0) {
      grow_after_checkpoint_ = static_cast<int64_t>(info_.latest_checkpoint_step());
    } else if (static_cast<int64_t>(info_.latest_checkpoint_step()) > grow_after_checkpoint_) {
      resize_reason_ =
          absl::StrCat(ready, " more worker(s) placed; grown at the checkpoint of step ",
                       info_.latest_checkpoint_step());
      Stop(processes_, AfterStop::kResize);
      return std::nullopt;
    }
  }
  if (!any_failed) {
    JobStep wait;
    wait.wake_at = reconcile_at_;
    return wait;
  }
  // A node that died takes its workers with it (the raylet's keepers), and
  // their peers fail of the broken connections before the head declares it
  // DEAD: then the node's death is the cause, not theirs. Which of the
  // nodes with processes that reported nothing still answer?
  to_list_.clear();
  for (const auto& [id, node] : processes_) {
    if (exits_.count(id) == 0) to_list_.insert(node);
  }
  listing_ = Listing::kUnreachable;
  phase_ = Phase::kProbe;
  return std::nullopt;
}

std::optional<JobStep> JobReconciler::Finishing(absl::Time now) {
  if (info_.spec().entrypoint().has_command()) {
    if (!trainer_reported_ && now < deadline_) {
      JobStep wait;
      wait.wake_at = deadline_;
      return wait;
    }
    Stop(processes_, AfterStop::kEndSucceeded);  // the relay; exited ones are no-ops
    return std::nullopt;
  }
  const std::string trainer_id = absl::StrCat(info_.job_id(), "-a", attempt_, "-trainer");
  auto exit = exits_.find(trainer_id);
  if (exit == exits_.end() && now < deadline_) {
    JobStep wait;
    wait.wake_at = deadline_;
    return wait;
  }
  if (exit != exits_.end() && Failed(exit->second) && processes_.count(trainer_id) > 0) {
    cause_ = DescribeFailure(trainer_id, processes_.at(trainer_id), exit->second);
    node_failure_ = false;
    Stop(processes_, AfterStop::kCountFailure);
  } else {
    Stop(processes_, AfterStop::kEndSucceeded);
  }
  return std::nullopt;
}

std::optional<JobStep> JobReconciler::AwaitingNodeDeath(absl::Time now, const JobWorld& world) {
  for (const std::string& node : unreachable_) {
    if (world.alive.count(node) == 0) {
      cause_ = absl::StrCat("node ", node, " died (missed heartbeats)");
      node_failure_ = true;
      dead_node_ = node;
      deadline_ = now;
      break;
    }
  }
  if (now < deadline_ && !stop_requested_) {
    JobStep wait;
    wait.wake_at = deadline_;
    return wait;
  }
  if (stop_after_node_wait_) {
    Stop(processes_, AfterStop::kCountFailure);
  } else {
    CountFailure(now);
  }
  return std::nullopt;
}

void JobReconciler::AwaitNodeDeath(absl::Time now) {
  // The heartbeats stopped at most node_dead_after ago.
  phase_ = Phase::kAwaitNodeDeath;
  deadline_ = now + (unreachable_.empty() ? absl::ZeroDuration() : options_.node_dead_after);
}

std::string JobReconciler::PlacementChange(const JobWorld& world) const {
  const std::set<std::string> nodes = NodesOf(processes_);
  for (const std::string& node : nodes) {
    if (world.alive.count(node) == 0)
      return absl::StrCat("node ", node, " died (missed heartbeats)");
  }
  if (GroupGone(world)) return "the placement group is gone";
  // An elastic job shrinks instead (ElasticLoss).
  if (!world.group.ok() || elastic()) return "";  // the former: the head's error, asked again
  if (world.group->state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    return absl::StrCat("the placement group lost bundles: ", world.group->pending_reason());
  }
  // Placed again since the attempt started, even if the node it lost came
  // back under the same id and took its bundles back between two looks.
  if (placed_unix_ms_ != 0 && world.group->placed_unix_ms() != placed_unix_ms_) {
    return "the placement group's bundles were placed again (a node of the attempt was lost)";
  }
  std::set<std::string> placed_on;
  for (const v1::BundleLocation& l : world.group->locations()) placed_on.insert(l.node_id());
  for (const std::string& node : nodes) {
    if (placed_on.count(node) == 0) {
      return absl::StrCat("the placement group's bundles moved off node ", node);
    }
  }
  return "";
}

std::string JobReconciler::FirstFailure() const {
  const v1::WorkerStatus* first = nullptr;
  std::string first_id, first_node;
  for (const auto& [id, node] : processes_) {
    auto exit = exits_.find(id);
    if (exit == exits_.end() || !Failed(exit->second)) continue;
    if (first == nullptr || FailedAtUs(exit->second) < FailedAtUs(*first)) {
      first = &exit->second;
      first_id = id;
      first_node = node;
    }
  }
  if (first == nullptr) return "a process of the attempt failed";
  return DescribeFailure(first_id, first_node, *first);
}

void JobReconciler::Stop(JobProcesses processes, AfterStop after) {
  to_stop_ = std::move(processes);
  after_stop_ = after;
  phase_ = Phase::kStopping;
}

void JobReconciler::AfterStopped(absl::Time now) {
  switch (after_stop_) {
    case AfterStop::kEndStopped:
      End(v1::TRAIN_JOB_STATE_STOPPED, "stopped");
      return;
    case AfterStop::kEndSucceeded:
      End(v1::TRAIN_JOB_STATE_SUCCEEDED, "");
      return;
    case AfterStop::kCountFailure:
      CountFailure(now);
      return;
    case AfterStop::kLaunchFailed:
      to_list_.clear();
      listing_ = Listing::kLaunchFailed;
      phase_ = Phase::kProbe;
      return;
    case AfterStop::kAwaitPlacement:
      phase_ = Phase::kAwaitPlacement;
      return;
    case AfterStop::kPreempted:
      phase_ = Phase::kReleaseGroup;
      deadline_ = now;
      return;
    case AfterStop::kResize:
      Resize(now);
      return;
  }
}

void JobReconciler::Resize(absl::Time now) {
  restart_pending_ = true;
  restart_at_ = now;
  info_.mutable_startup()->set_restarted_unix_us(absl::ToUnixMicros(now));
  SetState(now, v1::TRAIN_JOB_STATE_RESTARTING, absl::StrCat("resizing: ", resize_reason_));
  ++attempt_;
  phase_ = Phase::kAwaitPlacement;
}

bool JobReconciler::InElasticGroup(const v1::WorkerRank& w) const {
  return !w.placement_group_id().empty() && w.placement_group_id() != info_.placement_group_id();
}

std::set<std::string> JobReconciler::ElasticInUse() const {
  std::set<std::string> ids;
  for (const v1::WorkerRank& w : info_.workers()) {
    if (InElasticGroup(w)) ids.insert(w.placement_group_id());
  }
  return ids;
}

size_t JobReconciler::CoreWorkers() const {
  return std::count_if(info_.workers().begin(), info_.workers().end(),
                       [&](const v1::WorkerRank& w) { return !InElasticGroup(w); });
}

std::string JobReconciler::ElasticLoss(const JobWorld& world) const {
  if (!elastic() || GroupGone(world)) return "";  // the latter: counted (PlacementChange)
  for (const std::string& node : NodesOf(processes_)) {
    if (world.alive.count(node) == 0)
      return absl::StrCat("node ", node, " died (missed heartbeats)");
  }
  const std::vector<BundleSite> core_sites =
      world.group.ok() ? SitesOf(*world.group) : std::vector<BundleSite>{};
  for (const v1::WorkerRank& w : info_.workers()) {
    if (!InElasticGroup(w)) {
      if (world.group.ok() && (w.bundle_index() >= core_sites.size() ||
                               core_sites[w.bundle_index()].node_id != w.node_id())) {
        return absl::StrCat("the job's group lost bundle ", w.bundle_index(), " (node ",
                            w.node_id(), ")");
      }
      continue;
    }
    auto g = world.elastic.find(w.placement_group_id());
    if (g == world.elastic.end() || !g->second.ok()) continue;  // the head's error: ask again
    if (g->second->state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
      return absl::StrCat("elastic group ", w.placement_group_id(), " lost its bundle");
    }
    if (g->second->preempting()) {
      return absl::StrCat("elastic group ", w.placement_group_id(),
                          " is preempted: ", g->second->preempted_by());
    }
  }
  // An attempt on all of the group: placed again since it started, even if
  // the node it lost came back under the same id and took its bundles back
  // between two looks.
  if (world.group.ok() && CoreWorkers() == spec_.bundles().size() && placed_unix_ms_ != 0 &&
      world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED &&
      world.group->placed_unix_ms() != placed_unix_ms_) {
    return "the job's group was placed again (a node of the attempt was lost)";
  }
  return "";
}

std::vector<uint32_t> JobReconciler::CoreBundlesToRun(const JobWorld& world) const {
  if (!world.group.ok()) return {};
  std::vector<uint32_t> bundles;
  if (world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    for (uint32_t b = 0; b < spec_.bundles().size(); ++b) bundles.push_back(b);
    return bundles;
  }
  if (!elastic() || world.group->state() != v1::PLACEMENT_GROUP_STATE_RESCHEDULING) return {};
  // Only bundles the last attempt ran on: those are committed on their
  // raylets (one placed again may still be in two-phase commit).
  const std::vector<BundleSite> sites = SitesOf(*world.group);
  for (const v1::WorkerRank& w : info_.workers()) {
    if (!InElasticGroup(w) && w.bundle_index() < sites.size() &&
        sites[w.bundle_index()].node_id == w.node_id()) {
      bundles.push_back(w.bundle_index());
    }
  }
  std::sort(bundles.begin(), bundles.end());
  size_t placed = bundles.size();
  for (const auto& [id, group] : world.elastic) placed += Usable(group) ? 1 : 0;
  // Rank 0's bundle holds the trainer.
  if (bundles.empty() || bundles[0] != 0 || placed < info_.spec().scaling_config().min_workers()) {
    return {};
  }
  return bundles;
}

size_t JobReconciler::ElasticReady(const JobWorld& world) const {
  const std::set<std::string> in_use = ElasticInUse();
  size_t ready = 0;
  for (const auto& [id, group] : world.elastic) {
    if (in_use.count(id) == 0 && Usable(group)) ++ready;
  }
  // The job's own bundles placed again (all committed once it is CREATED).
  if (world.group.ok() && world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    ready += spec_.bundles().size() - std::min(CoreWorkers(), spec_.bundles().size());
  }
  return ready;
}

std::string JobReconciler::ElasticToRelease(const JobWorld& world) const {
  const std::set<std::string> in_use =
      phase_ == Phase::kWatch ? ElasticInUse() : std::set<std::string>{};
  for (const auto& [id, group] : world.elastic) {
    if (in_use.count(id) == 0 && group.ok() && group->preempting()) return id;
  }
  return "";
}

bool JobReconciler::OnPreempting(absl::Time now, const JobWorld& world) {
  if (!world.group.ok() || !world.group->preempting()) return false;
  // A job already PENDING for this preemption was told before (a restarted
  // head finds it under way): counted once.
  const bool told = info_.state() == v1::TRAIN_JOB_STATE_PENDING &&
                    info_.message() == world.group->preempted_by();
  if (!told) info_.set_preemptions(info_.preemptions() + 1);
  SetState(now, v1::TRAIN_JOB_STATE_PENDING, world.group->preempted_by());
  if (processes_.empty()) {
    phase_ = Phase::kReleaseGroup;
    deadline_ = now;
  } else {
    Stop(processes_, AfterStop::kPreempted);
  }
  return true;
}

void JobReconciler::LaunchFailed(const std::string& cause) {
  launch_failed_ = true;
  cause_ = cause;
  node_failure_ = false;
  to_list_.clear();
  listing_ = Listing::kLaunchFailed;
  phase_ = Phase::kProbe;
}

void JobReconciler::CountFailure(absl::Time now) {
  if (elastic() && node_failure_ && !dead_node_.empty()) {
    // A lost node: the job shrinks rather than fails.
    resize_reason_ = cause_;
    dead_node_.clear();
    Resize(now);
    return;
  }
  dead_node_.clear();
  const v1::FailureConfig& failure = info_.spec().failure_config();
  const bool count_node_failures =
      !failure.has_count_node_failures() || failure.count_node_failures();
  // The causes list every restart; failures counts those max_failures is
  // about.
  if (count_node_failures || !node_failure_) info_.set_failures(info_.failures() + 1);
  info_.add_failure_causes(cause_);
  persist_ = true;
  if (failure.max_failures() >= 0 &&
      static_cast<int64_t>(info_.failures()) > failure.max_failures()) {
    End(v1::TRAIN_JOB_STATE_FAILED, absl::StrCat("failed: ", cause_));
    return;
  }
  restarted_ = true;
  restart_pending_ = true;
  restart_at_ = launch_failed_ ? now + launch_retry_.Next() : now;
  info_.mutable_startup()->set_restarted_unix_us(absl::ToUnixMicros(now));
  SetState(now, v1::TRAIN_JOB_STATE_RESTARTING, absl::StrCat("restarting after: ", cause_));
  ++attempt_;
  phase_ = Phase::kAwaitPlacement;
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

void JobReconciler::OnResult(absl::Time now, JobActionResult result) {
  if (auto* created = std::get_if<GroupCreated>(&result);
      created && phase_ == Phase::kCreateElastic) {
    if (!created->placement_group_id.ok()) {
      End(v1::TRAIN_JOB_STATE_FAILED, absl::StrCat("creating an elastic group: ",
                                                   created->placement_group_id.status().message()));
      return;
    }
    info_.add_elastic_group_ids(*created->placement_group_id);
    persist_ = true;
    phase_ = Phase::kAwaitPlacement;  // which makes the next one, if any
  } else if (created) {
    if (!created->placement_group_id.ok()) {
      SetState(now, v1::TRAIN_JOB_STATE_FAILED,
               absl::StrCat("creating the placement group: ",
                            created->placement_group_id.status().message()));
      phase_ = Phase::kDone;
      return;
    }
    info_.set_placement_group_id(*created->placement_group_id);
    persist_ = true;
    phase_ = Phase::kAwaitPlacement;
  } else if (auto* port = std::get_if<PortAllocated>(&result)) {
    OnPort(now, *port);
  } else if (auto* started = std::get_if<ProcessesStarted>(&result)) {
    if (!started->status.ok()) {
      launch_failed_ = true;
      cause_ = std::string(started->status.message());
      // NOT_FOUND: the node lost a bundle the head's books put there (the
      // head places it again), not the job's fault.
      node_failure_ = absl::IsNotFound(started->status);
      Stop(std::move(started->started), AfterStop::kLaunchFailed);
      return;
    }
    info_.mutable_startup()->set_workers_started_unix_us(absl::ToUnixMicros(now));
    processes_ = std::move(started->started);
    launch_failed_ = false;
    launch_retry_.Reset();
    SetState(now, v1::TRAIN_JOB_STATE_RUNNING, "");
    reconcile_at_ = now + kReconcileEvery;
    phase_ = Phase::kWatch;
  } else if (auto* listed = std::get_if<WorkersListed>(&result)) {
    OnListed(now, *listed);
  } else if (auto* sent = std::get_if<StopsSent>(&result)) {
    awaited_ = std::move(sent->awaited);
    deadline_ = now + options_.stop_grace + absl::Seconds(3);
    phase_ = Phase::kAwaitStopped;
  } else if (auto* released = std::get_if<GroupReleased>(&result);
             released && !releasing_.empty()) {
    releasing_.clear();  // an elastic group: it waits again; asked again if that failed
  } else if (released) {
    if (released->status.ok() || absl::IsNotFound(released->status)) {
      // The next attempt starts when the group is placed again, from the
      // latest checkpoint; nothing of this one is left.
      processes_.clear();
      ++attempt_;
      release_retry_.Reset();
      phase_ = Phase::kAwaitPlacement;
    } else {
      deadline_ = now + release_retry_.Next();  // in two-phase commit: ask again
    }
  } else if (std::holds_alternative<GroupRemoved>(result) && dropping_elastic_) {
    dropping_elastic_ = false;
    info_.mutable_elastic_group_ids()->RemoveLast();
    persist_ = true;
  } else if (std::holds_alternative<GroupRemoved>(result)) {
    to_remove_.pop_back();
    if (!to_remove_.empty()) return;
    SetState(now, final_state_, final_message_);
    phase_ = Phase::kDone;
  }
}

void JobReconciler::OnPort(absl::Time now, const PortAllocated& port) {
  if (!port.endpoint.ok()) {
    LaunchFailed(std::string(port.endpoint.status().message()));
    return;
  }
  const auto& [host, master_port] = *port.endpoint;
  AttemptInputs in;
  in.job_id = info_.job_id();
  in.spec = info_.spec();
  in.placement_group_id = info_.placement_group_id();
  in.attempt = attempt_;
  in.ranks = ranks_;
  in.master_addr = host;
  in.master_port = master_port;
  in.job_dir = absl::StrCat(
      info_.spec().storage_path().empty() ? options_.checkpoint_root : info_.spec().storage_path(),
      "/", info_.job_id());
  in.latest_checkpoint = info_.latest_checkpoint();
  in.head_address = options_.head_address;
  in.worker_binary = options_.worker_binary;
  in.relay_binary = options_.relay_binary;
  in.cluster_token = options_.cluster_token;
  exits_.clear();
  logs_.erase(std::remove_if(logs_.begin(), logs_.end(),
                             [&](const RankLog& l) {
                               return l.attempt + 1 < attempt_ || l.attempt == attempt_;
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
    logs_.push_back({rank.world_rank(), rank.node_id(), rank.worker_id(), attempt_});
  }
  to_start_ = std::move(plan->by_node);
  phase_ = Phase::kStartProcesses;
}

void JobReconciler::OnListed(absl::Time now, const WorkersListed& listed) {
  switch (listing_) {
    case Listing::kRecordExits: {
      for (const auto& [worker, node] : processes_) {
        auto on_node = listed.by_node.find(node);
        // A dead node ends the attempt by itself; an unreachable one's
        // heartbeats decide.
        if (on_node == listed.by_node.end() || !on_node->second.ok()) continue;
        if (exits_.count(worker) > 0) continue;
        const v1::WorkerStatus* known = nullptr;
        for (const v1::WorkerStatus& w : on_node->second->workers()) {
          if (w.worker_id() == worker) known = &w;
        }
        if (known == nullptr) {
          // Its exit can never be reported: the raylet lost it (a raylet of
          // a new life, which killed the old one's workers with it).
          v1::WorkerStatus lost;
          lost.set_worker_id(worker);
          lost.set_state(v1::WORKER_STATE_FAILED);
          lost.set_signal(SIGKILL);
          lost.set_error(absl::StrCat("its raylet on node ", node,
                                      " no longer knows it (the raylet restarted)"));
          lost.set_failed_unix_us(absl::ToUnixMicros(now));
          exits_[worker] = std::move(lost);
        } else if (!Runs(*known)) {
          exits_[worker] = *known;
        }
      }
      return;  // kWatch goes on
    }
    case Listing::kUnreachable:
    case Listing::kLaunchFailed: {
      unreachable_.clear();
      for (const auto& [node, workers] : listed.by_node) {
        if (!workers.ok()) {
          unreachable_.insert(node);
          continue;
        }
        // Exits the raylets know and whose reports have not come yet.
        for (const v1::WorkerStatus& w : workers->workers()) {
          if (processes_.count(w.worker_id()) > 0 && !Runs(w)) exits_.emplace(w.worker_id(), w);
        }
      }
      if (listing_ == Listing::kUnreachable) {
        phase_ = Phase::kSettle;
        deadline_ = now + kFailureSettle;
      } else {
        // A raylet that died while its processes were being started: the
        // node's death is the cause.
        stop_after_node_wait_ = false;
        AwaitNodeDeath(now);
      }
      return;
    }
    case Listing::kResumeScan: {
      uint32_t next = attempt_;
      for (const auto& [node, workers] : listed.by_node) {
        if (!workers.ok()) continue;
        for (const v1::WorkerStatus& w : workers->workers()) {
          if (std::optional<uint32_t> a = AttemptOf(info_.job_id(), w.worker_id())) {
            next = std::max(next, *a + 1);
          }
          if (Runs(w)) processes_[w.worker_id()] = node;
        }
      }
      attempt_ = next;
      Stop(std::move(processes_), AfterStop::kAwaitPlacement);
      processes_.clear();
      return;
    }
  }
}

}  // namespace berth
