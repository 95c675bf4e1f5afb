#include "scheduler/placement_group_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "queueing/queue_config.h"

namespace berth {

CapacityModel::GangRef PlacementGroupManager::PlacementOf(const Group& g) const {
  if (g.commit != nullptr && g.commit->removed_placement != nullptr)
    return {&g.id, g.commit->removed_placement.get()};
  return queues_.Ref(g.id);
}

bool PlacementGroupManager::Infeasible(const Group& g) const {
  return waiting_.count(g.id) != 0 ? capacity_.Infeasible(PlacementOf(g))
                                   : queues_.LacksInfeasibly(g.id);
}

void PlacementGroupManager::IndexRequestId(const Group& g) {
  // The key views g.request_id: replace any entry whose key views another group's.
  by_request_id_.erase(g.request_id);
  by_request_id_.emplace(g.request_id, &g);
}

absl::Status PlacementGroupManager::Reconfigure(QueueConfig config) {
  if (absl::Status s = queues_.Reconfigure(std::move(config)); !s.ok()) return s;
  pass_due_ = true;
  return absl::OkStatus();
}

QueueView PlacementGroupManager::Queue(const std::string& name) const {
  return queues_.Queue(name, capacity_.Capacity());
}

std::vector<const BundlePlacement*> PlacementGroupManager::Placed(const Group& g) const {
  std::vector<const BundlePlacement*> placed;
  for (const BundlePlacement& p : PlacerCapacity::Held(PlacementOf(g))) placed.push_back(&p);
  std::sort(placed.begin(), placed.end(), [](const BundlePlacement* a, const BundlePlacement* b) {
    return a->bundle_index < b->bundle_index;
  });
  return placed;
}

std::vector<uint32_t> PlacementGroupManager::PlacedBundles(const Group& g) const {
  std::vector<uint32_t> out;
  for (const BundlePlacement& p : PlacerCapacity::Held(PlacementOf(g)))
    out.push_back(p.bundle_index);
  std::sort(out.begin(), out.end());
  return out;
}

void PlacementGroupManager::SetReason(Group& g, Reason reason, std::string detail) {
  g.reason = reason;
  g.detail = detail.empty() ? nullptr : std::make_unique<const std::string>(std::move(detail));
}

std::vector<CancelTask> PlacementGroupManager::CancelsFor(const Group& g,
                                                          const std::vector<uint32_t>& bundles,
                                                          absl::string_view why) const {
  std::vector<uint32_t> sorted = bundles;
  std::sort(sorted.begin(), sorted.end());
  std::vector<BundlePlacement> placed;
  for (const BundlePlacement& p : PlacerCapacity::Held(PlacementOf(g))) {
    if (std::binary_search(sorted.begin(), sorted.end(), p.bundle_index)) placed.push_back(p);
  }
  return CancelsFor(g, placed, why);
}

std::vector<CancelTask> PlacementGroupManager::CancelsFor(
    const Group& g, const std::vector<BundlePlacement>& placed, absl::string_view why) const {
  std::map<NodeIndex, std::vector<uint32_t>> by_node;
  for (const BundlePlacement& p : placed) by_node[p.allocation.node].push_back(p.bundle_index);
  for (auto& [node, indices] : by_node) std::sort(indices.begin(), indices.end());
  std::vector<CancelTask> cancels;
  for (auto& [node, indices] : by_node) {
    const std::string address = nodes_->Address(node);
    if (address.empty()) continue;  // a DEAD node holds nothing any more
    // A group is removed once, and preempted once per count: the id is unique.
    cancels.push_back({g.id, address, std::move(indices),
                       absl::StrCat(g.id, "/", why, "/", table_->node(node).id)});
  }
  return cancels;
}

void PlacementGroupManager::ReleaseBundles(Group& g, const std::vector<uint32_t>& bundles) {
  capacity_.ReleaseBundles(PlacementOf(g), bundles);
}

void PlacementGroupManager::Forget(const std::string& id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  auto by_request = by_request_id_.find(it->second.request_id);
  if (by_request != by_request_id_.end() && by_request->second == &it->second)
    by_request_id_.erase(by_request);
  groups_.erase(it);
}

absl::StatusOr<std::vector<CancelTask>> PlacementGroupManager::Remove(const std::string& id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  Group& g = it->second;
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) return std::vector<CancelTask>{};
  changed_.insert(id);
  waiting_.erase(id);
  if (!g.name.empty()) by_name_.erase(g.name);
  g.state = v1::PLACEMENT_GROUP_STATE_REMOVED;
  SetReason(g, Reason::kRemoved);
  // What Get and List show of it from now on: the queue scheduler forgets
  // it, and it holds nothing (what a commit in flight placed is released
  // when the commit ends).
  auto removed = std::make_unique<Group::Removed>();
  removed->arrival = ViewOf(g).arrival;
  ToProto(g, &removed->info);
  removed->info.clear_locations();
  removed->info.clear_topology_domain();
  g.removed = std::move(removed);
  std::vector<CancelTask> cancels;
  if (!g.in_flight()) cancels = CancelsFor(g, PlacedBundles(g));
  // Its placement record goes with the queue scheduler's gang, releasing
  // what it holds; a commit in flight keeps it until the commit ends.
  std::unique_ptr<CapacityModel::Gang> placement = queues_.Finish(id);
  if (g.in_flight()) {
    g.commit->removed_placement = std::move(placement);
  } else {
    placement.reset();
    // Freed resources may let waiting groups in now: the next Schedule
    // tries them all (once, however many groups a batch removed).
    freed_ = true;
  }
  pass_due_ = true;
  removed_order_.push_back(id);
  while (removed_order_.size() > config_.max_removed_kept) {
    const std::string old = removed_order_.front();
    removed_order_.pop_front();
    if (!groups_.at(old).in_flight()) Forget(old);
  }
  return cancels;
}

std::vector<CommitTask> PlacementGroupManager::Schedule(int64_t now_ms) {
  std::vector<CommitTask> tasks;
  // Before a pass admits anyone, every admitted group that lacks bundles
  // has its turn, due or not: room freed while it waited (a commit that
  // failed as a raylet was still letting go of a removed group's bundle)
  // is its own first.
  const bool pass = pass_due_ || now_ms >= next_pass_ms_;
  PlaceLacking(now_ms, pass, &tasks);
  if (pass && in_flight_ < config_.max_in_flight) RunPass(now_ms, &tasks);
  return tasks;
}

void PlacementGroupManager::PlaceLacking(int64_t now_ms, bool all, std::vector<CommitTask>* tasks) {
  const bool freed = std::exchange(freed_, false);
  if (in_flight_ >= config_.max_in_flight) {
    freed_ = freed;
    return;
  }
  for (QueueScheduler::Remainder& r :
       queues_.PlaceLacking(now_ms, capacity_, config_.max_in_flight - in_flight_, freed || all)) {
    Group& g = groups_.at(r.id);
    ++g.attempts;
    if (!r.placement.let_go.empty()) {
      // It moves whole: what it kept is let go of on the raylets too.
      std::vector<CancelTask> cancels =
          CancelsFor(g, r.placement.let_go, absl::StrCat("move-", g.attempt, "-", g.attempts));
      preemption_work_.cancels.insert(preemption_work_.cancels.end(), cancels.begin(),
                                      cancels.end());
      changed_.insert(g.id);
    }
    if (r.placement.outcome == PlacementOutcome::kPlaced) {
      // Reserved in the table and held by capacity_: hand the commit on.
      tasks->push_back(StartCommit(g, r.placement.placed));
    } else {
      SetReason(g, Reason::kPlacer);
    }
  }
  // Stopped at max_in_flight: the groups not reached keep their turn.
  freed_ = freed && in_flight_ >= config_.max_in_flight;
}

CommitTask PlacementGroupManager::StartCommit(Group& g,
                                              absl::Span<const BundlePlacement> placements) {
  g.commit = std::make_unique<Group::Commit>();
  ++in_flight_;
  ++g.attempt;
  SetReason(g, Reason::kCommitting);
  CommitTask task{g.id, g.attempt, {}};
  std::map<NodeIndex, size_t> node_slot;
  for (const BundlePlacement& p : placements) {
    const NodeIndex node = p.allocation.node;
    auto [slot, fresh] = node_slot.try_emplace(node, task.nodes.size());
    if (fresh) task.nodes.push_back({table_->node(node).id, nodes_->Address(node), {}});
    task.nodes[slot->second].bundles.push_back(
        {p.bundle_index, p.allocation.resources, p.allocation.gpus});
    g.commit->bundles.push_back(p.bundle_index);
  }
  return task;
}

void PlacementGroupManager::RunPass(int64_t now_ms, std::vector<CommitTask>* tasks) {
  PassResult result = queues_.Pass(now_ms, capacity_);
  pass_due_ = false;
  next_pass_ms_ = now_ms + config_.max_backoff_ms;
  for (const std::string& id : result.admitted) {
    Group& g = groups_.at(id);
    if (observer_) observer_->OnAdmitted(RequestOf(g).queue, now_ms - g.waiting_since_ms);
    waiting_.erase(id);
    tasks->push_back(StartCommit(g, PlacerCapacity::Held(PlacementOf(g))));
  }
  for (const Preemption& p : result.preempted) StartPreemption(p, now_ms);
  waiting_feasible_ = 0;
  for (const std::string& id : waiting_) {
    Group& g = groups_.at(id);
    ++g.attempts;
    if (queues_.Find(id) != nullptr) SetReason(g, Reason::kQueue);
    if (!capacity_.Infeasible(PlacementOf(g))) ++waiting_feasible_;
  }
}

void PlacementGroupManager::StartPreemption(const Preemption& p, int64_t now_ms) {
  auto it = groups_.find(p.victim);
  if (it == groups_.end()) return;
  Group& v = it->second;
  if (observer_) observer_->OnPreempted(RequestOf(v).queue);
  SetReason(v, Reason::kStopping);
  changed_.insert(v.id);
  if (!v.job_id.empty()) {
    preemption_work_.job_groups.push_back(v.id);
  } else if (!v.in_flight()) {
    std::vector<CancelTask> cancels = FinishPreemption(v, now_ms);
    preemption_work_.cancels.insert(preemption_work_.cancels.end(), cancels.begin(), cancels.end());
  }
}

std::vector<CancelTask> PlacementGroupManager::FinishPreemption(Group& g, int64_t now_ms) {
  const std::vector<uint32_t> placed = PlacedBundles(g);
  std::vector<CancelTask> cancels =
      CancelsFor(g, placed, absl::StrCat("preempt-", ViewOf(g).preemptions));
  ReleaseBundles(g, placed);
  g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
  g.waiting_since_ms = now_ms;
  SetReason(g, Reason::kWaitingReadmission);
  waiting_.insert(g.id);
  queues_.Preempted(g.id, now_ms);
  pass_due_ = true;
  changed_.insert(g.id);
  return cancels;
}

PreemptionWork PlacementGroupManager::TakePreemptions() {
  return std::exchange(preemption_work_, {});
}

absl::StatusOr<std::vector<CancelTask>> PlacementGroupManager::LetGo(const std::string& id,
                                                                     int64_t now_ms) {
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  Group& g = it->second;
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) {
    return absl::FailedPreconditionError(absl::StrCat("placement_group_id: ", id, " is removed"));
  }
  if (g.in_flight()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "placement_group_id: ", id, " is in two-phase commit; ask again when it ends"));
  }
  if (Preempting(g)) return FinishPreemption(g, now_ms);
  const Move move = MoveOf(g);
  if (move.bundles.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("placement_group_id: ", id, " is neither preempted nor on a draining node"));
  }
  return FinishMove(g, move, now_ms);
}

std::optional<int64_t> PlacementGroupManager::NextDue() const {
  std::optional<int64_t> due;
  if (in_flight_ >= config_.max_in_flight) return due;
  if (freed_ && queues_.lacking() > 0) return 0;
  // Infeasible groups wait for a change (which makes a pass due).
  if (!waiting_.empty() && (pass_due_ || waiting_feasible_ > 0))
    due = pass_due_ ? 0 : next_pass_ms_;
  if (std::optional<int64_t> t = queues_.NextLackingDue(); t && (!due || *t < *due)) due = t;
  return due;
}

void PlacementGroupManager::OnPrepared(const std::string& id, uint64_t attempt) {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.attempt != attempt || !it->second.in_flight()) return;
  if (it->second.state == v1::PLACEMENT_GROUP_STATE_PENDING) {
    it->second.state = v1::PLACEMENT_GROUP_STATE_PREPARED;
  }
}

std::vector<CancelTask> PlacementGroupManager::OnCommitDone(const std::string& id, uint64_t attempt,
                                                            const absl::Status& result,
                                                            int64_t now_ms) {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.attempt != attempt || !it->second.in_flight()) return {};
  Group& g = it->second;
  const std::unique_ptr<Group::Commit> commit = std::move(g.commit);
  const std::vector<uint32_t>& committing = commit->bundles;
  --in_flight_;
  changed_.insert(id);
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) {
    // Removed during the commit: release everything it holds (its record
    // goes with `commit`). A failed commit's own bundles were cancelled by
    // the committer already.
    std::vector<BundlePlacement> to_cancel;
    for (const BundlePlacement& p :
         PlacerCapacity::Held({&g.id, commit->removed_placement.get()})) {
      const bool cancelled = !result.ok() && std::find(committing.begin(), committing.end(),
                                                       p.bundle_index) != committing.end();
      if (!cancelled) to_cancel.push_back(p);
    }
    return CancelsFor(g, to_cancel, "remove");
  }
  // A victim chosen during its commit: one created directly lets go now;
  // a job's group waits for its job (LetGo).
  if (Preempting(g)) {
    if (!result.ok()) ReleaseBundles(g, committing);
    if (g.job_id.empty()) return FinishPreemption(g, now_ms);
    if (g.state == v1::PLACEMENT_GROUP_STATE_PREPARED) g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
    return {};
  }
  // Bundles on nodes that died during the commit are lost, the ones kept
  // from before as well as the ones committing: OnNodeDead skipped the group
  // while it was in flight.
  std::vector<uint32_t> lost;
  for (const BundlePlacement* p : Placed(g)) {
    const std::vector<uint32_t>& released = commit->released;
    if (table_->node(p->allocation.node).state == NodeState::kDead ||
        std::find(released.begin(), released.end(), p->bundle_index) != released.end()) {
      lost.push_back(p->bundle_index);
    }
  }
  ReleaseBundles(g, lost);
  if (!result.ok()) {
    ReleaseBundles(g, committing);
    SetReason(g, Reason::kCommitFailed, std::string(result.message()));
    if (!lost.empty()) {
      g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
      g.waiting_since_ms = now_ms;
    } else if (g.state == v1::PLACEMENT_GROUP_STATE_PREPARED) {
      g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
    }
    queues_.Lacks(id, now_ms, g.state == v1::PLACEMENT_GROUP_STATE_RESCHEDULING,
                  /*after_backoff=*/true);
    return {};
  }
  if (lost.empty() && PlacedBundles(g).size() == g.spec->bundles().size()) {
    g.state = v1::PLACEMENT_GROUP_STATE_CREATED;
    SetReason(g, Reason::kNone);
    g.placed_ms = now_ms;
    if (observer_) observer_->OnCreated(now_ms - g.waiting_since_ms);
  } else {
    g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
    g.waiting_since_ms = now_ms;
    SetReason(g, Reason::kNodeDiedInCommit);
    queues_.Lacks(id, now_ms, /*lost=*/true, /*after_backoff=*/false);
  }
  return {};
}

void PlacementGroupManager::OnNodesChanged(int64_t now_ms) {
  queues_.NodesChanged(now_ms);
  capacity_.NodesChanged();
  pass_due_ = true;
}

std::vector<std::string> PlacementGroupManager::OnNodeDead(const std::string& node_id,
                                                           int64_t now_ms) {
  std::vector<std::string> changed;
  std::optional<NodeIndex> index = table_->FindNode(node_id);
  if (!index) return changed;
  for (auto& [id, g] : groups_) {
    if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED || g.in_flight()) continue;
    std::vector<uint32_t> lost;
    for (const BundlePlacement& p : PlacerCapacity::Held(PlacementOf(g))) {
      if (p.allocation.node == *index) lost.push_back(p.bundle_index);
    }
    std::sort(lost.begin(), lost.end());
    if (lost.empty()) continue;
    LoseBundles(g, lost, Reason::kLostWithNode, node_id, now_ms);
    changed.push_back(id);
  }
  return changed;
}

std::vector<std::string> PlacementGroupManager::OnBundlesReleased(
    const std::string& node_id, const google::protobuf::RepeatedPtrField<v1::BundleKey>& released,
    int64_t now_ms) {
  std::optional<NodeIndex> index = table_->FindNode(node_id);
  if (!index) return {};
  // The released bundles by group, then those the books put on this node
  // (one look at each group's bundles, however many it released).
  std::map<std::string, std::vector<uint32_t>> by_group;
  for (const v1::BundleKey& key : released)
    by_group[key.placement_group_id()].push_back(key.bundle_index());
  std::map<std::string, std::vector<uint32_t>> lost;  // by group
  for (auto& [id, bundles] : by_group) {
    auto it = groups_.find(id);
    if (it == groups_.end() || it->second.state == v1::PLACEMENT_GROUP_STATE_REMOVED) continue;
    Group& g = it->second;
    std::sort(bundles.begin(), bundles.end());
    for (const BundlePlacement& p : PlacerCapacity::Held(PlacementOf(g))) {
      const uint32_t b = p.bundle_index;
      if (p.allocation.node != *index || !std::binary_search(bundles.begin(), bundles.end(), b))
        continue;
      if (!g.in_flight()) {
        lost[id].push_back(b);
      } else if (std::find(g.commit->released.begin(), g.commit->released.end(), b) ==
                 g.commit->released.end()) {
        g.commit->released.push_back(b);
      }
    }
    if (auto l = lost.find(id); l != lost.end()) std::sort(l->second.begin(), l->second.end());
  }
  std::vector<std::string> changed;
  for (const auto& [id, bundles] : lost) {
    LoseBundles(groups_.at(id), bundles, Reason::kReleasedByNode, node_id, now_ms);
    changed.push_back(id);
  }
  return changed;
}

void PlacementGroupManager::LoseBundles(Group& g, const std::vector<uint32_t>& lost, Reason why,
                                        const std::string& node_id, int64_t now_ms) {
  changed_.insert(g.id);
  ReleaseBundles(g, lost);
  g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
  g.waiting_since_ms = now_ms;
  if (Preempting(g)) return;  // its job lets go of the rest
  SetReason(g, why, node_id);
  g.lost = static_cast<uint32_t>(lost.size());
  queues_.Lacks(g.id, now_ms, /*lost=*/true, /*after_backoff=*/false);
}

}  // namespace berth
