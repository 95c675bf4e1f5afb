// JobReconciler (job_reconciler.h) from an attempt's processes started to
// the attempt's end: the watch, the finish, a failure's probe, settle and
// wait for a node's death, the stop, a preemption's release, and what
// follows: the verdict of failure_triage.h or the resize of
// elastic_membership.h. The job's creation, placement and launch are in
// job_reconciler.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "train/job_reconciler.h"

namespace berth {
namespace {

// How long the peers of a failed process get to fail too before the
// attempt's cause is chosen, when a node of the attempt does not answer
// (its processes' exits may come late). With every node answering, the
// probe's listing has every exit so far and the peers are stopped at once.
constexpr absl::Duration kFailureSettle = absl::Seconds(2);
// How long a GPU job's failed process waits for its node to report a fault
// of its GPU (the node looks every second and heartbeats at once).
constexpr absl::Duration kGpuFaultSettle = absl::Seconds(2);
// The longest a finished command job waits for its report relay to be up.
constexpr absl::Duration kRelayStartup = absl::Seconds(10);
// The longest the built-in trainer gets to write its last checkpoint once
// its ranks finished.
constexpr absl::Duration kTrainerFinish = absl::Seconds(3);
// How often a running attempt asks its raylets for exits it was not told
// of (a report lost with a head restart, a worker its raylet no longer has);
// also the longest it goes without looking at its group and nodes.
constexpr absl::Duration kReconcileEvery = absl::Seconds(2);

}  // namespace

void JobReconciler::OnStarted(absl::Time now, ProcessesStarted started) {
  if (!started.status.ok()) {
    failure_ = StartFailure(started.status);
    Stop(std::move(started.started), AfterStop::kLaunchFailed);
    return;
  }
  info_.mutable_startup()->set_workers_started_unix_us(absl::ToUnixMicros(now));
  processes_ = std::move(started.started);
  failure_.launch_failed = false;
  timers_.AttemptStarted(now);
  SetState(now, v1::TRAIN_JOB_STATE_RUNNING, "");
  reconcile_at_ = now + kReconcileEvery;
  phase_ = Phase::kWatch;
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
  if (OnTimers(now)) return std::nullopt;
  if (OnPreempting(now, world)) return std::nullopt;
  if (std::string id = membership_.ToRelease(info_, world, /*running=*/true); !id.empty()) {
    releasing_ = id;
    return Act(ReleaseGroup{std::move(id)});
  }
  if (OnMoving(now, world)) return std::nullopt;
  const std::set<std::string> nodes = NodesOf(processes_);
  if (std::string loss = membership_.Loss(info_, world, nodes, placed_unix_ms_); !loss.empty()) {
    resize_reason_ = std::move(loss);
    Stop(processes_, AfterStop::kResize);
    return std::nullopt;
  }
  if (std::string change = PlacementChange(world, nodes, placed_unix_ms_, elastic());
      !change.empty()) {
    failure_.cause = std::move(change);
    failure_.node_failure = true;
    Stop(processes_, AfterStop::kCountFailure);
    return std::nullopt;
  }
  return WatchExits(now, world);
}

bool JobReconciler::OnTimers(absl::Time now) {
  if (std::optional<std::string> timed_out = timers_.TimedOut(now, info_)) {
    final_message_ = *std::move(timed_out);
    info_.set_message(absl::StrCat("stopping: ", final_message_));
    persist_ = true;
    Stop(processes_, AfterStop::kEndTimedOut);
    return true;
  }
  if (std::optional<std::string> hung = timers_.Hung(now)) {
    failure_.cause = *std::move(hung);
    failure_.node_failure = false;
    Stop(processes_, AfterStop::kCountFailure);
    return true;
  }
  return false;
}

std::optional<JobStep> JobReconciler::WatchExits(absl::Time now, const JobWorld& world) {
  const ExitTally tally = TallyExits(processes_, exits_);
  if (!tally.any_failed && tally.ranks_done == tally.ranks) {
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
  if (!tally.any_failed) {
    if (std::string grow = membership_.GrowReason(info_, world); !grow.empty()) {
      resize_reason_ = std::move(grow);
      Stop(processes_, AfterStop::kResize);
      return std::nullopt;
    }
    return WaitUntil(std::min(
        {reconcile_at_, JobTimers::LimitEnds(info_), timers_.ProgressDue(), move_deadline_}));
  }
  // A node that died takes its workers with it (the raylet's keepers), and
  // their peers fail of the broken connections before the head declares it
  // DEAD: then the node's death is the cause, not theirs. Which of the
  // nodes with processes that reported nothing still answer?
  to_list_ = NodesOwingExits(processes_, exits_);
  listing_ = Listing::kUnreachable;
  phase_ = Phase::kProbe;
  return std::nullopt;
}

std::optional<JobStep> JobReconciler::Finishing(absl::Time now) {
  if (info_.spec().entrypoint().has_command()) {
    if (!trainer_reported_ && now < deadline_) return WaitUntil(deadline_);
    Stop(processes_, AfterStop::kEndSucceeded);  // the relay; exited ones are no-ops
    return std::nullopt;
  }
  const std::string trainer_id = AttemptProcessId(info_.job_id(), attempt_, "trainer");
  auto exit = exits_.find(trainer_id);
  if (exit == exits_.end() && now < deadline_) return WaitUntil(deadline_);
  if (exit != exits_.end() && ExitedWithFailure(exit->second) && processes_.count(trainer_id) > 0) {
    failure_.cause = DescribeFailure(trainer_id, processes_.at(trainer_id), exit->second);
    failure_.node_failure = false;
    Stop(processes_, AfterStop::kCountFailure);
  } else {
    Stop(processes_, AfterStop::kEndSucceeded);
  }
  return std::nullopt;
}

std::optional<JobStep> JobReconciler::Probe(absl::Time now, const JobWorld& world) {
  if (listing_ == Listing::kLaunchFailed && world.group.ok()) {
    for (const v1::BundleLocation& l : world.group->locations()) to_list_.insert(l.node_id());
  }
  if (to_list_.empty()) {
    OnListed(now, {});
    return std::nullopt;
  }
  return Act(ListWorkers{std::move(to_list_)});
}

void JobReconciler::OnListed(absl::Time now, const WorkersListed& listed) {
  switch (listing_) {
    case Listing::kRecordExits:
      RecordListedExits(now, processes_, listed, &exits_);
      return;  // kWatch goes on
    case Listing::kUnreachable:
      unreachable_ = TakeListedExits(processes_, listed, &exits_);
      phase_ = Phase::kSettle;
      deadline_ = now + kFailureSettle;
      gpu_settle_until_ = now + kGpuFaultSettle;
      return;
    case Listing::kLaunchFailed:
      unreachable_ = TakeListedExits(processes_, listed, &exits_);
      // A raylet that died while its processes were being started: the
      // node's death is the cause.
      stop_after_node_wait_ = false;
      AwaitNodeDeath(now);
      return;
    case Listing::kResumeScan:
      // The recorded processes a raylet says ended (or no longer has) are
      // not waited for: their exits were told to the head before.
      RecordListedExits(now, processes_, listed, &exits_);
      attempt_ = ScanForResume(info_.job_id(), attempt_, listed, &processes_);
      Stop(std::move(processes_), AfterStop::kAwaitPlacement);
      processes_.clear();
      return;
  }
}

std::optional<JobStep> JobReconciler::Settle(absl::Time now, const JobWorld& world) {
  // A GPU of the attempt found unhealthy by now is the cause: its rank's
  // exit, and its peers', followed from it.
  if (const v1::PlacementGroupInfo* moving = MovingGroup(world);
      moving != nullptr && moving->move_cause() == v1::MOVE_CAUSE_UNHEALTHY_GPU) {
    failure_ = GpuFailure(*moving);
    Stop(processes_, AfterStop::kCountFailure);
    return std::nullopt;
  }
  // Every node answered the probe, so every exit so far is known (a root
  // cause exits before its peers see the broken connections): stop the
  // rest now rather than wait for them to fail on their own; but a GPU that
  // fails takes its rank down at once, and its node's report of the fault
  // comes a moment later, so a GPU job waits that long for it. Otherwise
  // the peers on the nodes that answered get a moment to report.
  if (unreachable_.empty()) {
    if (info_.spec().scaling_config().use_gpu() && !stop_requested_ && now < gpu_settle_until_) {
      return WaitUntil(gpu_settle_until_);
    }
    failure_.cause = FirstObservedFailure(processes_, exits_);
    failure_.node_failure = false;
    Stop(processes_, AfterStop::kCountFailure);
    return std::nullopt;
  }
  if (!ReachableRanksExited(processes_, unreachable_, exits_) && !stop_requested_ &&
      now < deadline_) {
    return WaitUntil(deadline_);
  }
  failure_.cause = FirstObservedFailure(processes_, exits_);
  failure_.node_failure = false;
  stop_after_node_wait_ = true;
  AwaitNodeDeath(now);
  return std::nullopt;
}

void JobReconciler::AwaitNodeDeath(absl::Time now) {
  // The heartbeats stopped at most node_dead_after ago.
  phase_ = Phase::kAwaitNodeDeath;
  deadline_ = now + (unreachable_.empty() ? absl::ZeroDuration() : options_.node_dead_after);
}

std::optional<JobStep> JobReconciler::AwaitingNodeDeath(absl::Time now, const JobWorld& world) {
  if (std::optional<std::string> dead = FirstLostNode(unreachable_, world)) {
    failure_.cause = NodeDeathCause(*dead);
    failure_.node_failure = true;
    failure_.dead_node = *dead;
    deadline_ = now;
  }
  if (now < deadline_ && !stop_requested_) return WaitUntil(deadline_);
  if (stop_after_node_wait_) {
    Stop(processes_, AfterStop::kCountFailure);
  } else {
    CountFailure(now);
  }
  return std::nullopt;
}

void JobReconciler::Stop(JobProcesses processes, AfterStop after) {
  to_stop_ = std::move(processes);
  after_stop_ = after;
  phase_ = Phase::kStopping;
}

std::optional<JobStep> JobReconciler::AwaitStopped(absl::Time now) {
  if (!AllExited(awaited_, exits_) && now < deadline_) return WaitUntil(deadline_);
  AfterStopped(now);
  return std::nullopt;
}

void JobReconciler::AfterStopped(absl::Time now) {
  switch (after_stop_) {
    case AfterStop::kEndStopped:
      End(v1::TRAIN_JOB_STATE_STOPPED, "stopped");
      return;
    case AfterStop::kEndSucceeded:
      End(v1::TRAIN_JOB_STATE_SUCCEEDED, "");
      return;
    case AfterStop::kEndTimedOut:
      End(v1::TRAIN_JOB_STATE_TIMED_OUT, final_message_);
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
    case AfterStop::kMoved:
      // The moving groups let go of what is on draining nodes as the job
      // waits for them (AwaitPlacement), then it starts on what is placed.
      processes_.clear();
      ++attempt_;
      phase_ = Phase::kAwaitPlacement;
      return;
    case AfterStop::kResize:
      Resize(now);
      return;
  }
}

bool JobReconciler::OnPreempting(absl::Time now, const JobWorld& world) {
  if (!world.group.ok() || !world.group->preempting()) return false;
  // A job already PENDING for this preemption was told before (a restarted
  // head finds it under way): counted once.
  const bool told = info_.state() == v1::TRAIN_JOB_STATE_PENDING &&
                    info_.message() == world.group->preempted_by();
  if (!told) info_.set_preemptions(info_.preemptions() + 1);
  JobTimers::Preempted(&info_);
  SetState(now, v1::TRAIN_JOB_STATE_PENDING, world.group->preempted_by());
  if (processes_.empty()) {
    phase_ = Phase::kReleaseGroup;
    deadline_ = now;
  } else {
    Stop(processes_, AfterStop::kPreempted);
  }
  return true;
}

bool JobReconciler::OnMoving(absl::Time now, const JobWorld& world) {
  const v1::PlacementGroupInfo* moving = MovingGroup(world);
  if (moving == nullptr) {  // none, or the drain ended (undrain)
    if (move_checkpoint_) info_.set_message("");
    move_checkpoint_.reset();
    move_deadline_ = absl::InfiniteFuture();
    return false;
  }
  if (moving->move_cause() == v1::MOVE_CAUSE_UNHEALTHY_GPU) {
    // Whatever ran on the GPU is lost: the attempt fails by the GPU.
    move_checkpoint_.reset();
    move_deadline_ = absl::InfiniteFuture();
    failure_ = GpuFailure(*moving);
    Stop(processes_, AfterStop::kCountFailure);
    return true;
  }
  if (!move_checkpoint_) move_checkpoint_ = info_.latest_checkpoint();
  move_deadline_ = moving->move_deadline_unix_ms() == 0
                       ? absl::InfiniteFuture()
                       : absl::FromUnixMillis(moving->move_deadline_unix_ms());
  const bool checkpointed = info_.latest_checkpoint() != *move_checkpoint_;
  if (!checkpointed && now < move_deadline_) {
    info_.set_message(absl::StrCat(
        moving->moving_reason(), "; the job moves at its next checkpoint",
        move_deadline_ == absl::InfiniteFuture()
            ? ""
            : absl::StrCat(" or at ",
                           absl::FormatTime("%H:%M:%S UTC", move_deadline_, absl::UTCTimeZone()))));
    return false;
  }
  info_.set_moves(info_.moves() + 1);
  SetState(now, v1::TRAIN_JOB_STATE_RESTARTING,
           absl::StrCat("moving: ", moving->moving_reason(),
                        checkpointed ? " (at its checkpoint)" : " (the drain's deadline came)"));
  move_checkpoint_.reset();
  move_deadline_ = absl::InfiniteFuture();
  Stop(processes_, AfterStop::kMoved);
  return true;
}

std::optional<JobStep> JobReconciler::ReleasingGroup(absl::Time now) {
  if (now < deadline_) return WaitUntil(deadline_);
  return Act(ReleaseGroup{info_.placement_group_id()});
}

void JobReconciler::Resize(absl::Time now) {
  restart_pending_ = true;
  restart_at_ = now;
  info_.mutable_startup()->set_restarted_unix_us(absl::ToUnixMicros(now));
  SetState(now, v1::TRAIN_JOB_STATE_RESTARTING, absl::StrCat("resizing: ", resize_reason_));
  ++attempt_;
  phase_ = Phase::kAwaitPlacement;
}

void JobReconciler::LaunchFailed(const std::string& cause) {
  failure_.launch_failed = true;
  failure_.cause = cause;
  failure_.node_failure = false;
  to_list_.clear();
  listing_ = Listing::kLaunchFailed;
  phase_ = Phase::kProbe;
}

void JobReconciler::CountFailure(absl::Time now) {
  const FailureVerdict verdict =
      TriageFailure(failure_, info_.spec().failure_config(), info_.failures(), elastic());
  failure_.dead_node.clear();
  if (verdict.action == FailureAction::kShrink) {
    // A lost node: the job shrinks rather than fails.
    resize_reason_ = failure_.cause;
    Resize(now);
    return;
  }
  // The causes list every restart; failures counts those max_failures is
  // about.
  if (verdict.charged) info_.set_failures(info_.failures() + 1);
  info_.add_failure_causes(failure_.cause);
  persist_ = true;
  if (verdict.action == FailureAction::kFail) {
    End(v1::TRAIN_JOB_STATE_FAILED, absl::StrCat("failed: ", failure_.cause));
    return;
  }
  restarted_ = true;
  restart_pending_ = true;
  const absl::Duration delay = verdict.back_off ? timers_.RestartDelay(now) : absl::ZeroDuration();
  restart_at_ = now + delay;
  info_.mutable_startup()->set_restarted_unix_us(absl::ToUnixMicros(now));
  SetState(
      now, v1::TRAIN_JOB_STATE_RESTARTING,
      absl::StrCat(
          "restarting",
          delay > absl::ZeroDuration() ? absl::StrCat(" in ", absl::FormatDuration(delay)) : "",
          " after: ", failure_.cause));
  ++attempt_;
  phase_ = Phase::kAwaitPlacement;
}

}  // namespace berth
