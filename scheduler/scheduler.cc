#include "scheduler/scheduler.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_join.h"
#include "common/log.h"
#include "wire/proto_convert.h"

namespace berth {

Scheduler::Scheduler(HeadState* state, RayletClients* raylets)
    : state_(state),
      raylets_(raylets),
      batcher_(
          raylets, [this](std::function<void()> work) { Submit(std::move(work)); },
          [this](uint64_t seq) { state_->Durable(seq).IgnoreError(); }) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start(uint64_t head_epoch) {
  head_epoch_ = head_epoch;
  for (int i = 0; i < state_->config().committer_threads; ++i) {
    committer_threads_.emplace_back([this] { CommitterLoop(); });
  }
  scheduling_thread_ = std::thread([this] { SchedulingLoop(); });
  liveness_thread_ = std::thread([this] { LivenessLoop(); });
}

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&liveness_mu_);
    liveness_stopping_ = true;
  }
  if (liveness_thread_.joinable()) liveness_thread_.join();
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
  }
  if (scheduling_thread_.joinable()) scheduling_thread_.join();
  {
    absl::MutexLock lock(&work_mu_);
    work_stopping_ = true;
  }
  for (std::thread& t : committer_threads_) t.join();
  committer_threads_.clear();
}

void Scheduler::Submit(std::function<void()> work) {
  absl::MutexLock lock(&work_mu_);
  work_.push_back(std::move(work));
}

v1::BundleOp Scheduler::OfThisHead(v1::BundleOp op) const {
  const std::string epoch = absl::StrCat("e", head_epoch_, "/");
  switch (op.op_case()) {
    case v1::BundleOp::kPrepare:
      op.mutable_prepare()->set_request_id(epoch + op.prepare().request_id());
      break;
    case v1::BundleOp::kCommit:
      op.mutable_commit()->set_request_id(epoch + op.commit().request_id());
      break;
    case v1::BundleOp::kCancel:
      op.mutable_cancel()->set_request_id(epoch + op.cancel().request_id());
      break;
    case v1::BundleOp::OP_NOT_SET:
      break;
  }
  return op;
}

void Scheduler::SubmitCancels(std::vector<CancelTask> cancels, uint64_t durable_first) {
  for (CancelTask& c : cancels) {
    v1::BundleOp op;
    v1::CancelResourceReserveRequest* request = op.mutable_cancel();
    request->set_placement_group_id(std::move(c.placement_group_id));
    request->set_request_id(std::move(c.request_id));
    for (uint32_t b : c.bundle_indices) request->add_bundle_indices(b);
    batcher_.Enqueue(c.address, OfThisHead(std::move(op)), nullptr, durable_first);
  }
}

void Scheduler::CommitterLoop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&work_mu_);
      work_mu_.Await(absl::Condition(
          +[](Scheduler* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->work_mu_) {
            return !s->work_.empty() || s->work_stopping_;
          },
          this));
      if (work_.empty()) return;  // stopping, and nothing left to do
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

void Scheduler::StartCommit(CommitTask task) {
  auto commit = std::make_shared<TwoPhaseCommit>(std::move(task));
  for (size_t i = 0; i < commit->task().nodes.size(); ++i) {
    batcher_.Enqueue(commit->task().nodes[i].address, OfThisHead(commit->Prepare(i)),
                     [this, commit, i](const BundleOpBatcher::Result& r) -> uint64_t {
                       if (!commit->OnPrepareAnswer(i, r.status, r.prepare)) return 0;
                       return AfterPrepares(commit);
                     });
  }
}

uint64_t Scheduler::AfterPrepares(const std::shared_ptr<TwoPhaseCommit>& commit) {
  const CommitTask& task = commit->task();
  if (!commit->status().ok()) return FailCommit(*commit, /*prepared=*/false);
  {
    absl::MutexLock lock(&state_->mu);
    state_->groups.OnPrepared(task.placement_group_id, task.attempt);
  }
  if (commit->single_node())
    return FinishCommit(task, absl::OkStatus(), true);  // committed with the prepare
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    batcher_.Enqueue(task.nodes[i].address, OfThisHead(commit->Commit(i)),
                     [this, commit, i](const BundleOpBatcher::Result& r) -> uint64_t {
                       if (!commit->OnCommitAnswer(i, r.status)) return 0;
                       if (!commit->status().ok()) return FailCommit(*commit, /*prepared=*/true);
                       return FinishCommit(commit->task(), absl::OkStatus(), true);
                     });
  }
  return 0;
}

uint64_t Scheduler::FailCommit(const TwoPhaseCommit& commit, bool prepared) {
  // Queued before the group can be placed again: each node's ops go in
  // order, so these cannot release a later attempt's bundles.
  SubmitCancels(commit.CancelAll());
  return FinishCommit(commit.task(), commit.status(), prepared);
}

uint64_t Scheduler::FinishCommit(const CommitTask& task, const absl::Status& result,
                                 bool prepared) {
  uint64_t seq = 0;
  std::vector<GroupSnapshot> told;  // CREATED, or waiting again
  {
    absl::MutexLock lock(&state_->mu);
    if (!result.ok()) state_->metrics().OnCommitFailed(prepared);
    // What the group held, when it was removed meanwhile.
    std::vector<CancelTask> released =
        state_->groups.OnCommitDone(task.placement_group_id, task.attempt, result, HeadNowMs());
    seq = state_->PersistLocked();
    SubmitCancels(std::move(released), seq);
    state_->kick = true;
    told = state_->JobSnapshotsLocked({task.placement_group_id});
  }
  if (!result.ok()) {
    LogWarning(task.placement_group_id, " attempt ", task.attempt, ": ", result.message());
  }
  state_->TellJobs(std::move(told));
  return seq;  // the batcher waits once for its whole call
}

void Scheduler::SchedulingLoop() {
  // A pass at least this often: what comes due with time alone (a gang
  // starving, a reservation's start) is seen by the next pass.
  const int64_t most_between_passes = state_->config().liveness.check_every_ms();
  while (true) {
    std::vector<CommitTask> tasks;
    std::vector<GroupSnapshot> preempted_jobs;  // told to stop
    absl::Time wake;
    uint64_t seq = 0;
    {
      absl::MutexLock lock(&state_->mu);
      if (state_->stopping) return;
      const int64_t now = HeadNowMs();
      tasks = state_->groups.Schedule(now);
      PreemptionWork preempted = state_->groups.TakePreemptions();
      std::vector<CancelTask> moved = state_->groups.MoveAtDrainDeadlines(now);
      // Moved bundles are placed elsewhere by the next pass, at once.
      const bool pass_again = !moved.empty();
      if (!preempted.cancels.empty() || !preempted.job_groups.empty() || pass_again)
        seq = state_->PersistLocked();
      SubmitCancels(std::move(preempted.cancels), seq);
      SubmitCancels(std::move(moved), seq);
      preempted_jobs = state_->JobSnapshotsLocked(preempted.job_groups);
      int64_t wake_ms = pass_again ? now + 1 : now + most_between_passes;
      if (std::optional<int64_t> due = state_->groups.NextDue())
        wake_ms = std::min(wake_ms, std::max(*due, now + 1));
      wake = absl::FromUnixMillis(wake_ms);
      state_->kick = false;
    }
    if (seq != 0) state_->Durable(seq).IgnoreError();  // logged
    for (CommitTask& task : tasks) StartCommit(std::move(task));
    state_->TellJobs(std::move(preempted_jobs));
    absl::MutexLock lock(&state_->mu);
    state_->mu.AwaitWithDeadline(absl::Condition(
                                     +[](HeadState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
                                       return s->kick || s->stopping;
                                     },
                                     state_),
                                 wake);
  }
}

void Scheduler::LivenessLoop() {
  const absl::Duration every = absl::Milliseconds(state_->heartbeats.config().check_every_ms());
  while (true) {
    {
      absl::MutexLock lock(&liveness_mu_);
      if (liveness_mu_.AwaitWithTimeout(absl::Condition(&liveness_stopping_), every)) return;
    }
    // Judged without the head's mutex: a pass does not delay it.
    const LivenessVerdict verdict = state_->heartbeats.Check(HeadMonotonicMs());
    ReportLiveness(verdict);
    if (!verdict.dead.empty()) DeclareDead(verdict.dead);
  }
}

void Scheduler::DeclareDead(const std::vector<std::string>& dead) {
  std::vector<std::string> declared;
  std::vector<GroupSnapshot> told;  // the jobs' groups that lost bundles
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    const int64_t now = HeadNowMs();
    for (const std::string& id : dead) {
      if (!state_->nodes.MarkDead(id)) continue;
      LogWarning("node ", id, " missed its heartbeats: DEAD");
      for (GroupSnapshot& group : state_->JobSnapshotsLocked(state_->groups.OnNodeDead(id, now))) {
        told.push_back(std::move(group));
      }
      state_->metrics().OnNodeDead();
      state_->PersistNodeLocked(id);
      declared.push_back(id);
    }
    if (declared.empty()) return;
    seq = state_->PersistLocked();
    state_->kick = true;  // their groups are placed again
  }
  state_->Durable(seq).IgnoreError();  // logged
  state_->TellJobs(std::move(told));
  if (TrainJobController* jobs = state_->jobs()) {
    for (const std::string& id : declared) jobs->OnNodeDead(id);  // their attempts are over
  }
}

void Scheduler::ReportLiveness(const LivenessVerdict& verdict) {
  if (verdict.head_stall_ms > 0) {
    state_->metrics().OnHeadStall(verdict.head_stall_ms);
    if (verdict.head_stall_ms >= 1000) {
      LogWarning("the head did not run for ", verdict.head_stall_ms,
                 " ms (paused, swapped or starved of CPU): no node's heartbeats are counted "
                 "missing for that time");
    }
  }
  if (verdict.suspicion_began) {
    LogWarning(verdict.suspected.size(), " nodes missed their heartbeats at once (",
               absl::StrJoin(verdict.suspected, ", "),
               "): the head or its network is suspected first; those still silent after ",
               state_->config().liveness.timeout_ms(), " ms more are declared DEAD");
  }
}

absl::Status Scheduler::CheckJobGroup(v1::TrainJobSpec* spec) {
  absl::MutexLock lock(&state_->mu);
  if (absl::Status s = state_->groups.CheckQueueing(
          spec->queue(), spec->priority_class(), 0,
          TopologyFromProto(spec->scaling_config().topology()),
          {"spec.queue", "spec.priority_class", "spec.scaling_config.topology"});
      !s.ok()) {
    return s;
  }
  const std::string queue = spec->queue().empty() ? std::string(kDefaultQueue) : spec->queue();
  auto found = state_->groups.queue_config().queues().find(queue);
  if (found == state_->groups.queue_config().queues().end()) return absl::OkStatus();
  const QueueSpec& limits = found->second;
  if (spec->time_limit_s() == 0) spec->set_time_limit_s(limits.default_time_limit_s);
  if (limits.max_time_limit_s > 0 &&
      (spec->time_limit_s() == 0 || spec->time_limit_s() > limits.max_time_limit_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.time_limit_s: ",
        spec->time_limit_s() == 0 ? "none" : absl::StrCat(spec->time_limit_s(), " s"),
        " is above queue ", queue, "'s max_time_limit_s (", limits.max_time_limit_s, " s)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scheduler::CreateGroup(PlacementGroupSpec spec,
                                                   const v1::CreatePlacementGroupRequest& meta) {
  absl::StatusOr<std::string> id;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    id = state_->groups.CreateFromSpec(std::move(spec), meta, HeadState::NewPlacementGroupId(),
                                       HeadNowMs());
    if (!id.ok()) return id;
    state_->kick = true;
    seq = state_->PersistLocked();
  }
  if (absl::Status s = state_->Durable(seq); !s.ok()) return s;
  return id;
}

GroupSnapshot Scheduler::GetGroup(const std::string& id) {
  absl::MutexLock lock(&state_->mu);
  return state_->SnapshotLocked(id);
}

void Scheduler::RemoveGroup(const std::string& id) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    absl::StatusOr<std::vector<CancelTask>> cancels = state_->groups.Remove(id);
    state_->kick = true;
    seq = state_->PersistLocked();
    if (cancels.ok()) SubmitCancels(*std::move(cancels), seq);
  }
  state_->Durable(seq).IgnoreError();  // logged; the writer retries it with the next batch
}

void Scheduler::GroupCheckpointed(const std::string& id) {
  absl::MutexLock lock(&state_->mu);
  state_->groups.OnCheckpoint(id, HeadNowMs());
}

absl::Status Scheduler::LetGo(const std::string& id) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    absl::StatusOr<std::vector<CancelTask>> cancels = state_->groups.LetGo(id, HeadNowMs());
    if (!cancels.ok()) return cancels.status();
    state_->kick = true;
    seq = state_->PersistLocked();
    SubmitCancels(*std::move(cancels), seq);
  }
  state_->Durable(seq).IgnoreError();  // logged; the writer retries it with the next batch
  return absl::OkStatus();
}

void Scheduler::BundleNotOnNode(const std::string& node_id, const std::string& group_id,
                                uint32_t bundle_index) {
  // The node lost the bundle with a restart the head did not see, and with
  // it, as likely, the group's other bundles there (a worker may be given
  // their GPUs too): the node lets go of any it still holds, then the group
  // places them all again. The cancel is answered first, so that it cannot
  // reach the node after the group's new prepares.
  google::protobuf::RepeatedPtrField<v1::BundleKey> keys;
  std::string address;
  {
    absl::MutexLock lock(&state_->mu);
    for (const v1::HeldBundle& h : state_->groups.BundlesOn(node_id)) {
      if (h.key().placement_group_id() == group_id) *keys.Add() = h.key();
    }
    std::optional<NodeIndex> index = state_->table.FindNode(node_id);
    if (keys.empty() || !index) return;
    address = state_->nodes.Address(*index);
  }
  v1::CancelResourceReserveRequest cancel;
  cancel.set_placement_group_id(group_id);
  for (const v1::BundleKey& k : keys) cancel.add_bundle_indices(k.bundle_index());
  cancel.set_request_id(
      absl::StrCat(group_id, "/lost-", HeadState::NewPlacementGroupId(), "/", node_id, "/cancel"));
  if (absl::Status s = raylets_->Cancel(address, cancel); !s.ok()) {
    // Unreachable: it lets go of what the head no longer lists when it
    // registers again.
    LogWarning("node ", node_id, ": cancelling the bundles of group ", group_id, ": ", s.message());
  }
  HeadState::BundleLoss lost;
  {
    absl::MutexLock lock(&state_->mu);
    lost = state_->LoseBundlesLocked(node_id, keys);
  }
  if (lost.groups.empty()) return;
  LogWarning("node ", node_id, " does not hold bundle ", bundle_index, " of group ", group_id,
             ": its ", keys.size(), " bundle(s) there are placed again");
  state_->TellJobs(std::move(lost.told));
  state_->Durable(lost.seq).IgnoreError();  // logged; the writer retries it with the next batch
}

std::string Scheduler::RayletAddress(const std::string& node_id) {
  // Without the head's mutex: a job's calls to its raylets do not wait for a pass.
  return state_->heartbeats.Address(node_id);
}

}  // namespace berth
