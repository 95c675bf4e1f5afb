#include "scheduler/placement_group_manager.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "queueing/queue_config.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// What identifies a create request for the request_id check: a 64-bit
// FNV-1a of its deterministic serialization (map order fixed), kept with
// every group instead of the request itself (a third of a small group's
// memory).
uint64_t RequestFingerprint(const v1::CreatePlacementGroupRequest& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&out);
  }
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

PlacementGroupManager::QueueKey PlacementGroupManager::KeyOf(const Group& g) const {
  return {g.state == v1::PLACEMENT_GROUP_STATE_RESCHEDULING ? 0 : 1, -g.priority, g.arrival};
}

void PlacementGroupManager::Enqueue(Group& g, int64_t due_ms) {
  g.next_try_ms = due_ms;
  queue_[KeyOf(g)] = g.id;
}

void PlacementGroupManager::IndexRequestId(const Group& g) {
  // The key views g.request_id: replace any entry whose key views another group's.
  by_request_id_.erase(g.request_id);
  by_request_id_.emplace(g.request_id, g.id);
}

void PlacementGroupManager::Dequeue(const Group& g) {
  queue_.erase(KeyOf(g));
  infeasible_.erase(g.id);
}

std::optional<std::string> PlacementGroupManager::Existing(
    const v1::CreatePlacementGroupRequest& request, absl::Status* status) const {
  auto it = by_request_id_.find(request.request_id());
  if (it == by_request_id_.end()) return std::nullopt;
  auto group = groups_.find(it->second);
  if (group != groups_.end() && group->second.fingerprint != RequestFingerprint(request)) {
    *status = absl::InvalidArgumentError(
        absl::StrCat("request_id: '", request.request_id(), "' was used for a different request"));
  }
  return it->second;
}

absl::StatusOr<std::string> PlacementGroupManager::Create(
    const v1::CreatePlacementGroupRequest& request, const std::string& new_id, int64_t now_ms) {
  if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  absl::Status retry;
  if (std::optional<std::string> id = Existing(request, &retry)) {
    if (!retry.ok()) return retry;
    return *id;
  }
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpecFromProto(request.bundles(), request.strategy(), false, request.topology());
  if (!spec.ok()) return spec.status();
  return CreateFromSpec(*std::move(spec), request, new_id, now_ms);
}

absl::StatusOr<std::vector<std::string>> PlacementGroupManager::CreateBatch(
    const google::protobuf::RepeatedPtrField<v1::CreatePlacementGroupRequest>& requests,
    const std::vector<std::string>& new_ids, int64_t now_ms) {
  // Check everything first: a batch is created whole or not at all.
  std::vector<std::string> ids(requests.size());
  std::vector<std::optional<PlacementGroupSpec>> specs(requests.size());
  absl::flat_hash_map<std::string, int> request_ids, names;
  size_t new_groups = 0;
  for (int i = 0; i < requests.size(); ++i) {
    const v1::CreatePlacementGroupRequest& request = requests[i];
    auto in_request = [i](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("requests[", i, "].", s.message()));
    };
    if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
      return in_request(s);
    }
    if (auto [it, inserted] = request_ids.emplace(request.request_id(), i); !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("requests[", i, "].request_id: repeats requests[", it->second, "]'s"));
    }
    absl::Status retry;
    if (std::optional<std::string> id = Existing(request, &retry)) {
      if (!retry.ok()) return in_request(retry);
      ids[i] = *id;
      continue;
    }
    absl::StatusOr<PlacementGroupSpec> spec = PlacementGroupSpecFromProto(
        request.bundles(), request.strategy(), false, request.topology());
    if (!spec.ok()) return in_request(spec.status());
    if (absl::Status s = CheckNew(*spec, request, new_groups); !s.ok()) return in_request(s);
    if (groups_.count(new_ids.at(i)) != 0) {
      return absl::AlreadyExistsError(absl::StrCat("placement group id ", new_ids[i]));
    }
    if (!request.name().empty()) {
      if (auto [it, inserted] = names.emplace(request.name(), i); !inserted) {
        return absl::AlreadyExistsError(absl::StrCat("requests[", i, "].name: '", request.name(),
                                                     "' is also requests[", it->second, "]'s"));
      }
    }
    specs[i] = *std::move(spec);
    ++new_groups;
  }
  for (int i = 0; i < requests.size(); ++i) {
    if (specs[i]) ids[i] = Insert(*std::move(specs[i]), requests[i], new_ids.at(i), now_ms);
  }
  return ids;
}

absl::StatusOr<std::string> PlacementGroupManager::CreateFromSpec(
    PlacementGroupSpec spec, const v1::CreatePlacementGroupRequest& meta, const std::string& new_id,
    int64_t now_ms) {
  if (auto it = by_request_id_.find(meta.request_id());
      it != by_request_id_.end() && !meta.job_id().empty()) {
    auto group = groups_.find(it->second);
    if (group != groups_.end() && group->second.job_id == meta.job_id()) return group->first;
  }
  if (absl::Status s = CheckNew(spec, meta, 0); !s.ok()) return s;
  if (groups_.count(new_id) != 0)
    return absl::AlreadyExistsError(absl::StrCat("placement group id ", new_id));
  return Insert(std::move(spec), meta, new_id, now_ms);
}

absl::Status PlacementGroupManager::CheckNew(const PlacementGroupSpec& spec,
                                             const v1::CreatePlacementGroupRequest& meta,
                                             size_t also_pending) const {
  if (absl::Status s = ValidateString(meta.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(meta.name(), "name", config_.max_name_length, false);
      !s.ok()) {
    return s;
  }
  if (spec.bundles().size() > config_.max_bundles_per_group) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bundles: ", spec.bundles().size(), " bundles; at most ", config_.max_bundles_per_group,
        " per group (berth-head --max-bundles-per-group)"));
  }
  if (absl::StatusOr<const QueueSpec*> q = queues_.config().Resolve(meta.queue(), "queue");
      !q.ok()) {
    return q.status();
  }
  if (absl::StatusOr<int32_t> p =
          queues_.config().PriorityOf(meta.priority_class(), meta.priority(), "priority_class");
      !p.ok()) {
    return p.status();
  }
  if (meta.time_limit_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_limit_s: ", meta.time_limit_s(), " is negative; 0 means no limit"));
  }
  const size_t pending = waiting_.size() + queue_.size() + infeasible_.size() + also_pending;
  if (pending >= config_.max_pending_groups) {
    return absl::ResourceExhaustedError(
        absl::StrCat(pending,
                     " placement groups are already waiting to be placed (berth-head "
                     "--max-pending-groups ",
                     config_.max_pending_groups, "); remove some or retry later"));
  }
  if (absl::Status s = ValidateString(meta.job_id(), "job_id", 128, false); !s.ok()) return s;
  if (absl::Status s = CheckTopologyKeys(spec.topology(), "topology"); !s.ok()) return s;
  if (by_request_id_.contains(meta.request_id())) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id: '", meta.request_id(), "' was already used"));
  }
  if (!meta.name().empty() && by_name_.contains(meta.name())) {
    return absl::AlreadyExistsError(absl::StrCat("name: a placement group named '", meta.name(),
                                                 "' exists (", by_name_.at(meta.name()), ")"));
  }
  return absl::OkStatus();
}

absl::Status PlacementGroupManager::CheckTopologyKeys(const Topology& topology,
                                                      absl::string_view field) const {
  // A key no node has carried is most likely a typo; the well-known ones
  // may name nodes an autoscaler has yet to start.
  auto known = [&](const std::string& key) {
    return table_->HasLabelKey(key) ||
           std::find(std::begin(kTopologyLabels), std::end(kTopologyLabels), key) !=
               std::end(kTopologyLabels);
  };
  const std::vector<std::string> keys = topology.keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (known(keys[i])) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        field, topology.required.empty() ? absl::StrCat(".preferred[", i, "]") : ".required",
        ": no node carries label '", keys[i], "'; label nodes with berth start --labels ", keys[i],
        "=<domain>, or use one of ", absl::StrJoin(kTopologyLabels, ", ")));
  }
  return absl::OkStatus();
}

std::string PlacementGroupManager::Insert(PlacementGroupSpec spec,
                                          const v1::CreatePlacementGroupRequest& meta,
                                          const std::string& new_id, int64_t now_ms) {
  auto shared = std::make_shared<const PlacementGroupSpec>(std::move(spec));
  capacity_.Add(new_id, shared);  // the scorer observes it there
  Group g(new_id, std::move(shared), config_.backoff());
  g.name = meta.name();
  g.job_id = meta.job_id();
  g.request_id = meta.request_id();
  g.queue = meta.queue().empty() ? std::string(kDefaultQueue) : meta.queue();
  g.fingerprint = RequestFingerprint(meta);
  // CheckNew resolved its class.
  g.priority = queues_.config()
                   .PriorityOf(meta.priority_class(), meta.priority(), "priority_class")
                   .value_or(meta.priority());
  g.preemptible = !meta.has_preemptible() || meta.preemptible();
  g.time_limit_ms = meta.time_limit_s() * 1000;
  g.arrival = next_arrival_++;
  g.created_ms = now_ms;
  g.waiting_since_ms = now_ms;
  Group& inserted = groups_.emplace(new_id, std::move(g)).first->second;
  IndexRequestId(inserted);
  if (!meta.name().empty()) by_name_[meta.name()] = new_id;
  // CheckNew resolved its queue, and its id is new.
  queues_.Submit(GangOf(inserted), now_ms).IgnoreError();
  waiting_.insert(new_id);
  pass_due_ = true;
  changed_.insert(new_id);
  return new_id;
}

GangRequest PlacementGroupManager::GangOf(const Group& g) const {
  GangRequest r;
  r.id = g.id;
  r.name =
      g.job_id.empty() ? absl::StrCat("placement group ", g.id) : absl::StrCat("job ", g.job_id);
  r.queue = g.queue;
  r.priority = g.priority;
  r.demand = g.spec->total();
  r.preemptible = g.preemptible;
  if (g.time_limit_ms > 0) r.time_limit_ms = g.time_limit_ms;
  r.shape = absl::HashOf(*g.spec);
  return r;
}

absl::Status PlacementGroupManager::Reconfigure(QueueConfig config) {
  if (absl::Status s = queues_.Reconfigure(std::move(config)); !s.ok()) return s;
  pass_due_ = true;
  return absl::OkStatus();
}

QueueView PlacementGroupManager::Queue(const std::string& name) const {
  return queues_.Queue(name, capacity_.Capacity());
}

std::vector<v1::QueueStatus> PlacementGroupManager::QueueStatuses(
    const std::optional<std::string>& only) const {
  constexpr size_t kPendingShown = 20;
  // Each queue's waiting groups in the order it tries them.
  std::map<std::string, std::vector<const Group*>> waiting;
  for (const std::string& id : waiting_) {
    const Group& g = groups_.at(id);
    if (!only || g.queue == *only) waiting[g.queue].push_back(&g);
  }
  const ResourceSet totals = capacity_.Capacity();
  std::vector<v1::QueueStatus> out;
  for (const auto& [name, spec] : queues_.config().queues()) {
    if (only && name != *only) continue;
    v1::QueueStatus& status = out.emplace_back();
    status.set_name(name);
    for (const auto& [resource, amount] : spec.nominal)
      (*status.mutable_nominal_quota())[resource] = amount.ToDouble();
    const QueueView view = queues_.Queue(name, totals);
    for (const auto& [resource, amount] : view.usage.entries())
      (*status.mutable_usage())[resource] = amount.ToDouble();
    for (const auto& [resource, amount] : view.borrowed.entries())
      (*status.mutable_borrowed())[resource] = amount.ToDouble();
    status.set_fair_share(view.share);
    status.set_pending(static_cast<uint32_t>(view.pending));
    status.set_running(static_cast<uint32_t>(view.running));
    std::vector<const Group*>& mine = waiting[name];
    const size_t shown = std::min(mine.size(), kPendingShown);
    std::partial_sort(mine.begin(), mine.begin() + shown, mine.end(),
                      [](const Group* a, const Group* b) {
                        return std::make_pair(-int64_t{a->priority}, a->arrival) <
                               std::make_pair(-int64_t{b->priority}, b->arrival);
                      });
    for (size_t i = 0; i < shown; ++i) {
      v1::PendingGang* gang = status.add_pending_gangs();
      gang->set_placement_group_id(mine[i]->id);
      gang->set_job_id(mine[i]->job_id);
      gang->set_reason(ReasonText(*mine[i]));
      gang->set_waiting_since_unix_ms(mine[i]->waiting_since_ms);
    }
  }
  return out;
}

std::vector<BundlePlacement> PlacementGroupManager::Placed(const Group& g) const {
  std::vector<BundlePlacement> placed = capacity_.Held(g.id);
  std::sort(placed.begin(), placed.end(), [](const BundlePlacement& a, const BundlePlacement& b) {
    return a.bundle_index < b.bundle_index;
  });
  return placed;
}

const BundlePlacement* PlacementGroupManager::PlacedAt(const Group& g, uint32_t bundle) const {
  for (const BundlePlacement& p : capacity_.Held(g.id)) {
    if (p.bundle_index == bundle) return &p;
  }
  return nullptr;
}

std::vector<uint32_t> PlacementGroupManager::PlacedBundles(const Group& g) const {
  std::vector<uint32_t> out;
  for (const BundlePlacement& p : capacity_.Held(g.id)) out.push_back(p.bundle_index);
  std::sort(out.begin(), out.end());
  return out;
}

void PlacementGroupManager::SetReason(Group& g, Reason reason, std::string detail) {
  g.reason = reason;
  g.detail = std::move(detail);  // a move: an emptied detail lets go of its buffer
}

std::string PlacementGroupManager::ReasonText(const Group& g) const {
  switch (g.reason) {
    case Reason::kNone:
      return "";
    case Reason::kToBeScheduled:
      return "waiting to be scheduled";
    case Reason::kRestarted:
      return "waiting to be scheduled (head restarted)";
    case Reason::kRestartedLost:
      return absl::StrCat(g.detail,
                          " bundle(s) not found on their nodes after a head restart; rescheduling");
    case Reason::kQueue: {
      const GangView* view = queues_.Find(g.id);
      return view == nullptr ? "" : view->reason;
    }
    case Reason::kPlacer:
      return g.detail;
    case Reason::kCommitting:
      return "reserving bundles on the raylets (two-phase commit)";
    case Reason::kCommitFailed:
      return absl::StrCat("two-phase commit failed, retrying: ", g.detail);
    case Reason::kNodeDiedInCommit:
      return "a node holding some of its bundles died during the commit";
    case Reason::kLost:
      return absl::StrCat(g.detail, "; rescheduling");
    case Reason::kStopping:
      return absl::StrCat(g.preempted_by, "; stopping what runs in its bundles");
    case Reason::kWaitingReadmission:
      return absl::StrCat(g.preempted_by, "; waiting to be admitted again");
    case Reason::kRemoved:
      return "removed";
  }
  return "";
}

std::vector<CancelTask> PlacementGroupManager::CancelsFor(const Group& g,
                                                          const std::vector<uint32_t>& bundles,
                                                          absl::string_view why) const {
  std::map<NodeIndex, std::vector<uint32_t>> by_node;
  for (uint32_t b : bundles) {
    if (const BundlePlacement* p = PlacedAt(g, b)) by_node[p->allocation.node].push_back(b);
  }
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
  capacity_.ReleaseBundles(g.id, bundles);
}

void PlacementGroupManager::Forget(const std::string& id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  auto by_request = by_request_id_.find(it->second.request_id);
  if (by_request != by_request_id_.end() && by_request->second == id)
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
  Dequeue(g);
  waiting_.erase(id);
  queues_.Finish(id);
  pass_due_ = true;
  if (!g.name.empty()) by_name_.erase(g.name);
  g.state = v1::PLACEMENT_GROUP_STATE_REMOVED;
  SetReason(g, Reason::kRemoved);
  removed_order_.push_back(id);
  std::vector<CancelTask> cancels;
  if (!g.in_flight) {
    const std::vector<uint32_t> placed = PlacedBundles(g);
    cancels = CancelsFor(g, placed);
    capacity_.Remove(id);  // releases what it holds
    // Freed resources may let waiting groups in now: the next Schedule
    // tries them all (once, however many groups a batch removed).
    freed_ = true;
  }
  while (removed_order_.size() > config_.max_removed_kept) {
    const std::string old = removed_order_.front();
    removed_order_.pop_front();
    if (!groups_.at(old).in_flight) Forget(old);
  }
  return cancels;
}

std::vector<CommitTask> PlacementGroupManager::Schedule(int64_t now_ms) {
  std::vector<CommitTask> tasks;
  PlaceAdmitted(now_ms, &tasks);
  if (in_flight_ < config_.max_in_flight && (pass_due_ || now_ms >= next_pass_ms_))
    RunPass(now_ms, &tasks);
  return tasks;
}

void PlacementGroupManager::PlaceAdmitted(int64_t now_ms, std::vector<CommitTask>* tasks) {
  BundlePlacer placer(table_, scorer_.current());
  const bool freed = std::exchange(freed_, false);
  for (auto it = queue_.begin(); it != queue_.end() && in_flight_ < config_.max_in_flight;) {
    Group& g = groups_.at(it->second);
    if (!freed && g.next_try_ms > now_ms) {
      ++it;
      continue;
    }
    const std::vector<BundlePlacement> kept = Placed(g);
    ++g.attempts;
    if (observer_) observer_->BeforeDecision();
    absl::StatusOr<PlacementDecision> d = placer.Place(*g.spec, kept);
    if (observer_ && d.ok()) observer_->AfterDecision(*d);
    if (!d.ok()) {  // cannot happen for a validated group; keep it waiting
      SetReason(g, Reason::kPlacer, std::string(d.status().message()));
      g.next_try_ms = now_ms + config_.max_backoff_ms;
      ++it;
      continue;
    }
    if (d->outcome == PlacementOutcome::kInfeasible && !kept.empty() &&
        !g.spec->topology().required.empty()) {
      // Its domain can never take its lost bundles back: the gang moves
      // whole. What it kept is let go of (on the raylets too), and it is
      // placed again, anywhere the topology allows.
      const std::vector<uint32_t> bundles = PlacedBundles(g);
      std::vector<CancelTask> cancels =
          CancelsFor(g, bundles, absl::StrCat("move-", g.attempt, "-", g.attempts));
      preemption_work_.cancels.insert(preemption_work_.cancels.end(), cancels.begin(),
                                      cancels.end());
      ReleaseBundles(g, bundles);
      SetReason(g, Reason::kPlacer, d->reason);
      changed_.insert(g.id);
      continue;  // tried again at once, from nothing
    }
    if (d->outcome == PlacementOutcome::kInfeasible) {
      g.infeasible = true;
      SetReason(g, Reason::kPlacer, d->reason);
      it = queue_.erase(it);
      infeasible_.insert(g.id);
      continue;
    }
    g.infeasible = false;
    if (d->outcome == PlacementOutcome::kRetryLater) {
      SetReason(g, Reason::kPlacer, d->reason);
      g.next_try_ms = now_ms + absl::ToInt64Milliseconds(g.backoff.Next());
      ++it;
      continue;
    }
    // Placed: reserved in the table; hand the commit to the caller.
    it = queue_.erase(it);
    for (const BundlePlacement& p : d->placements) capacity_.Hold(g.id, p);
    tasks->push_back(StartCommit(g, std::move(d->placements)));
  }
  // Stopped at max_in_flight: the groups not reached keep their turn.
  freed_ = freed && in_flight_ >= config_.max_in_flight;
}

CommitTask PlacementGroupManager::StartCommit(Group& g, std::vector<BundlePlacement> placements) {
  g.in_flight = true;
  ++in_flight_;
  ++g.attempt;
  g.committing.clear();
  SetReason(g, Reason::kCommitting);
  CommitTask task{g.id, g.attempt, {}};
  std::map<NodeIndex, size_t> node_slot;
  for (BundlePlacement& p : placements) {
    const NodeIndex node = p.allocation.node;
    auto [slot, fresh] = node_slot.try_emplace(node, task.nodes.size());
    if (fresh) task.nodes.push_back({table_->node(node).id, nodes_->Address(node), {}});
    task.nodes[slot->second].bundles.push_back(
        {p.bundle_index, p.allocation.resources, p.allocation.gpus});
    g.committing.push_back(p.bundle_index);
  }
  return task;
}

void PlacementGroupManager::RunPass(int64_t now_ms, std::vector<CommitTask>* tasks) {
  PassResult result = queues_.Pass(now_ms, capacity_);
  pass_due_ = false;
  next_pass_ms_ = now_ms + config_.max_backoff_ms;
  for (const std::string& id : result.admitted) {
    Group& g = groups_.at(id);
    if (observer_) observer_->OnAdmitted(g.queue, now_ms - g.waiting_since_ms);
    waiting_.erase(id);
    g.admitted = true;
    g.infeasible = false;
    tasks->push_back(StartCommit(g, capacity_.Held(id)));
  }
  for (const Preemption& p : result.preempted) StartPreemption(p, now_ms);
  waiting_feasible_ = 0;
  for (const std::string& id : waiting_) {
    Group& g = groups_.at(id);
    ++g.attempts;
    if (queues_.Find(id) != nullptr) SetReason(g, Reason::kQueue);
    g.infeasible = capacity_.Infeasible(id);
    if (!g.infeasible) ++waiting_feasible_;
  }
}

void PlacementGroupManager::StartPreemption(const Preemption& p, int64_t now_ms) {
  auto it = groups_.find(p.victim);
  if (it == groups_.end()) return;
  Group& v = it->second;
  v.preempted_by = p.reason;
  v.preempting = true;
  ++v.preemptions;
  if (observer_) observer_->OnPreempted(v.queue);
  SetReason(v, Reason::kStopping);
  changed_.insert(v.id);
  Dequeue(v);  // it no longer places lost bundles
  if (!v.job_id.empty()) {
    preemption_work_.job_groups.push_back(v.id);
  } else if (!v.in_flight) {
    std::vector<CancelTask> cancels = FinishPreemption(v, now_ms);
    preemption_work_.cancels.insert(preemption_work_.cancels.end(), cancels.begin(), cancels.end());
  }
}

std::vector<CancelTask> PlacementGroupManager::FinishPreemption(Group& g, int64_t now_ms) {
  const std::vector<uint32_t> placed = PlacedBundles(g);
  std::vector<CancelTask> cancels = CancelsFor(g, placed, absl::StrCat("preempt-", g.preemptions));
  ReleaseBundles(g, placed);
  Dequeue(g);
  g.preempting = false;
  g.admitted = false;
  g.infeasible = false;
  g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
  g.waiting_since_ms = now_ms;
  SetReason(g, Reason::kWaitingReadmission);
  g.backoff.Reset();
  waiting_.insert(g.id);
  queues_.Preempted(g.id, now_ms);
  pass_due_ = true;
  changed_.insert(g.id);
  return cancels;
}

PreemptionWork PlacementGroupManager::TakePreemptions() {
  return std::exchange(preemption_work_, {});
}

absl::StatusOr<std::vector<CancelTask>> PlacementGroupManager::ReleasePreempted(
    const std::string& id, int64_t now_ms) {
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  Group& g = it->second;
  if (!g.preempting) {
    return absl::FailedPreconditionError(
        absl::StrCat("placement_group_id: ", id, " is not being preempted"));
  }
  if (g.in_flight) {
    return absl::FailedPreconditionError(absl::StrCat(
        "placement_group_id: ", id, " is in two-phase commit; ask again when it ends"));
  }
  return FinishPreemption(g, now_ms);
}

std::optional<int64_t> PlacementGroupManager::NextDue() const {
  std::optional<int64_t> due;
  if (in_flight_ >= config_.max_in_flight) return due;
  if (freed_ && !queue_.empty()) return 0;
  // Infeasible groups wait for a change (which makes a pass due).
  if (!waiting_.empty() && (pass_due_ || waiting_feasible_ > 0))
    due = pass_due_ ? 0 : next_pass_ms_;
  for (const auto& [key, id] : queue_) {
    const int64_t t = groups_.at(id).next_try_ms;
    if (!due || t < *due) due = t;
  }
  return due;
}

void PlacementGroupManager::OnPrepared(const std::string& id, uint64_t attempt) {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.attempt != attempt || !it->second.in_flight) return;
  if (it->second.state == v1::PLACEMENT_GROUP_STATE_PENDING) {
    it->second.state = v1::PLACEMENT_GROUP_STATE_PREPARED;
  }
}

std::vector<CancelTask> PlacementGroupManager::OnCommitDone(const std::string& id, uint64_t attempt,
                                                            const absl::Status& result,
                                                            int64_t now_ms) {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.attempt != attempt || !it->second.in_flight) return {};
  Group& g = it->second;
  g.in_flight = false;
  --in_flight_;
  changed_.insert(id);
  const std::vector<uint32_t> committing = std::move(g.committing);
  g.committing.clear();
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) {
    // Removed during the commit: release everything it holds. A failed
    // commit's own bundles were cancelled by the committer already.
    std::vector<uint32_t> to_cancel;
    for (uint32_t b : PlacedBundles(g)) {
      const bool cancelled =
          !result.ok() && std::find(committing.begin(), committing.end(), b) != committing.end();
      if (!cancelled) to_cancel.push_back(b);
    }
    std::vector<CancelTask> cancels = CancelsFor(g, to_cancel);
    capacity_.Remove(id);  // releases what it holds
    return cancels;
  }
  // A victim chosen during its commit: one created directly lets go now;
  // a job's group waits for its job (ReleasePreempted).
  if (g.preempting) {
    if (!result.ok()) ReleaseBundles(g, committing);
    if (g.job_id.empty()) return FinishPreemption(g, now_ms);
    if (g.state == v1::PLACEMENT_GROUP_STATE_PREPARED) g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
    return {};
  }
  // Bundles on nodes that died during the commit are lost, the ones kept
  // from before as well as the ones committing: OnNodeDead skipped the group
  // while it was in flight.
  std::vector<uint32_t> lost;
  for (const BundlePlacement& p : Placed(g)) {
    const std::vector<uint32_t>& released = g.released_in_flight;
    if (table_->node(p.allocation.node).state == NodeState::kDead ||
        std::find(released.begin(), released.end(), p.bundle_index) != released.end()) {
      lost.push_back(p.bundle_index);
    }
  }
  g.released_in_flight.clear();
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
    Enqueue(g, now_ms + absl::ToInt64Milliseconds(g.backoff.Next()));
    return {};
  }
  g.backoff.Reset();
  if (lost.empty() && PlacedBundles(g).size() == g.spec->bundles().size()) {
    g.state = v1::PLACEMENT_GROUP_STATE_CREATED;
    SetReason(g, Reason::kNone);
    g.preempted_by = std::string();
    g.placed_ms = now_ms;
    if (observer_) observer_->OnCreated(now_ms - g.waiting_since_ms);
  } else {
    g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
    g.waiting_since_ms = now_ms;
    SetReason(g, Reason::kNodeDiedInCommit);
    Enqueue(g, now_ms);
  }
  return {};
}

void PlacementGroupManager::OnNodesChanged(int64_t now_ms) {
  for (const std::string& id : infeasible_) Enqueue(groups_.at(id), now_ms);
  infeasible_.clear();
  capacity_.NodesChanged();
  pass_due_ = true;
}

void PlacementGroupManager::OnNodeDead(const std::string& node_id, int64_t now_ms) {
  std::optional<NodeIndex> index = table_->FindNode(node_id);
  if (!index) return;
  for (auto& [id, g] : groups_) {
    if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED || g.in_flight) continue;
    std::vector<uint32_t> lost;
    for (const BundlePlacement& p : capacity_.Held(id)) {
      if (p.allocation.node == *index) lost.push_back(p.bundle_index);
    }
    std::sort(lost.begin(), lost.end());
    if (lost.empty()) continue;
    LoseBundles(g, lost, absl::StrCat(lost.size(), " bundle(s) lost with node ", node_id), now_ms);
  }
}

std::vector<std::string> PlacementGroupManager::OnBundlesReleased(
    const std::string& node_id, const google::protobuf::RepeatedPtrField<v1::BundleKey>& released,
    int64_t now_ms) {
  std::optional<NodeIndex> index = table_->FindNode(node_id);
  if (!index) return {};
  std::map<std::string, std::vector<uint32_t>> lost;  // by group
  for (const v1::BundleKey& key : released) {
    auto it = groups_.find(key.placement_group_id());
    if (it == groups_.end() || it->second.state == v1::PLACEMENT_GROUP_STATE_REMOVED) continue;
    Group& g = it->second;
    const uint32_t b = key.bundle_index();
    const BundlePlacement* p = PlacedAt(g, b);
    if (p == nullptr || p->allocation.node != *index) continue;
    if (g.in_flight) {
      std::vector<uint32_t>& released = g.released_in_flight;
      if (std::find(released.begin(), released.end(), b) == released.end()) released.push_back(b);
    } else {
      lost[g.id].push_back(b);
    }
  }
  std::vector<std::string> changed;
  for (const auto& [id, bundles] : lost) {
    LoseBundles(groups_.at(id), bundles,
                absl::StrCat(bundles.size(), " bundle(s) released by node ", node_id,
                             " when it synced with the head"),
                now_ms);
    changed.push_back(id);
  }
  return changed;
}

void PlacementGroupManager::LoseBundles(Group& g, const std::vector<uint32_t>& lost,
                                        const std::string& why, int64_t now_ms) {
  changed_.insert(g.id);
  Dequeue(g);
  ReleaseBundles(g, lost);
  g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
  g.waiting_since_ms = now_ms;
  g.backoff.Reset();
  if (g.preempting) return;  // its job lets go of the rest
  SetReason(g, Reason::kLost, why);
  Enqueue(g, now_ms);
}

void PlacementGroupManager::ToProto(const Group& g, v1::PlacementGroupInfo* info) const {
  info->set_placement_group_id(g.id);
  info->set_name(g.name);
  info->set_strategy(StrategyToProto(g.spec->strategy()));
  for (const Bundle& b : g.spec->bundles()) BundleToProto(b, info->add_bundles());
  info->set_state(g.state);
  const std::vector<BundlePlacement> placed = Placed(g);
  for (const BundlePlacement& p : placed) {
    v1::BundleLocation* loc = info->add_locations();
    loc->set_bundle_index(p.bundle_index);
    loc->set_node_id(table_->node(p.allocation.node).id);
    GpuSharesToProto(p.allocation.gpus, loc->mutable_gpus());
  }
  info->set_infeasible(g.infeasible);
  info->set_pending_reason(
      g.state == v1::PLACEMENT_GROUP_STATE_CREATED && !g.preempting ? "" : ReasonText(g));
  info->set_created_unix_ms(g.created_ms);
  info->set_placed_unix_ms(g.placed_ms);
  info->set_scheduling_attempts(g.attempts);
  info->set_job_id(g.job_id);
  info->set_priority(g.priority);
  info->set_queue(g.queue);
  info->set_preempted_by(g.preempted_by);
  info->set_preempting(g.preempting);
  info->set_preemptible(g.preemptible);
  info->set_time_limit_s(g.time_limit_ms / 1000);
  info->set_preemptions(g.preemptions);
  TopologyToProto(g.spec->topology(), info->mutable_topology());
  // The innermost key whose one value every placed bundle shares.
  for (const std::string& key : g.spec->topology().keys()) {
    std::optional<std::string> shared;
    bool one = true;
    for (const BundlePlacement& p : placed) {
      const Labels& labels = table_->node(p.allocation.node).labels;
      auto value = labels.find(key);
      if (value == labels.end() || (shared && *shared != value->second)) {
        one = false;
        break;
      }
      shared = value->second;
    }
    if (one && shared) {
      info->set_topology_domain(absl::StrCat(key, "=", *shared));
      break;
    }
  }
}

absl::Status PlacementGroupManager::Get(const v1::GetPlacementGroupRequest& request,
                                        v1::PlacementGroupInfo* info) const {
  std::string id = request.placement_group_id();
  if (request.selector_case() == v1::GetPlacementGroupRequest::kName) {
    auto it = by_name_.find(request.name());
    if (it == by_name_.end()) {
      return absl::NotFoundError(
          absl::StrCat("name: no placement group named '", request.name(), "'"));
    }
    id = it->second;
  } else if (id.empty()) {
    return absl::InvalidArgumentError("placement_group_id: give a placement group id or a name");
  }
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  ToProto(it->second, info);
  return absl::OkStatus();
}

void PlacementGroupManager::List(const v1::ListPlacementGroupsRequest& request,
                                 v1::ListPlacementGroupsResponse* response) const {
  std::vector<const Group*> sorted;
  for (const auto& [id, g] : groups_) {
    if (request.states_size() > 0 && std::find(request.states().begin(), request.states().end(),
                                               g.state) == request.states().end()) {
      continue;
    }
    if (!request.job_id().empty() && g.job_id != request.job_id()) continue;
    sorted.push_back(&g);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Group* a, const Group* b) { return a->arrival < b->arrival; });
  for (const Group* g : sorted) ToProto(*g, response->add_placement_groups());
}

absl::Status PlacementGroupManager::MayUse(const std::string& id, absl::string_view team,
                                           absl::string_view field) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::OkStatus();
  return queues_.config().MayUse(it->second.queue, team, field);
}

std::optional<v1::PlacementGroupState> PlacementGroupManager::State(const std::string& id) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return std::nullopt;
  return it->second.state;
}

void PlacementGroupManager::ClusterStatus(v1::GetClusterStatusResponse* response) const {
  v1::PlacementScorerStatus* scorer = response->mutable_placement_scorer();
  scorer->set_name(std::string(scorer_.name()));
  scorer->set_active(scorer_.current() == nullptr
                         ? std::string(ScorerKindName(ScorerKind::kBuiltIn))
                         : std::string(scorer_.current()->name()));
  if (const WorkloadWindow* window = scorer_.window()) {
    scorer->set_window_tasks(window->size());
    scorer->set_window_shapes(static_cast<uint32_t>(window->shape_count()));
  }
  scorer->set_builds(scorer_.builds());
  ResourceSet total, available;
  struct AcceleratorCount {
    uint32_t nodes = 0;
    uint32_t gpus = 0;
    Quantity free;
    ResourceSet total;
    ResourceSet available;
  };
  std::map<std::string, AcceleratorCount> accelerators;
  for (NodeIndex n = 0; n < table_->slot_count(); ++n) {
    const NodeResourceTable::Node& node = table_->node(n);
    if (node.removed) continue;
    if (node.state == NodeState::kDraining)
      response->set_draining_nodes(response->draining_nodes() + 1);
    if (node.state == NodeState::kDead) response->set_dead_nodes(response->dead_nodes() + 1);
    if (node.state != NodeState::kAlive) continue;
    response->set_alive_nodes(response->alive_nodes() + 1);
    total.Add(node.total).IgnoreError();
    available.Add(node.available).IgnoreError();
    if (!node.accelerator_type.empty()) {
      AcceleratorCount& c = accelerators[node.accelerator_type];
      ++c.nodes;
      c.gpus += node.gpus.count();
      c.free = Quantity::FromUnits(c.free.units() + node.gpus.TotalFree().units());
      c.total.Add(node.total).IgnoreError();
      c.available.Add(node.available).IgnoreError();
    }
  }
  ResourceSetToProto(total, response->mutable_total());
  ResourceSetToProto(available, response->mutable_available());
  for (const auto& [type, c] : accelerators) {
    v1::AcceleratorTypeCount* out = response->add_accelerators();
    out->set_accelerator_type(type);
    out->set_nodes(c.nodes);
    out->set_gpus_total(c.gpus);
    out->set_gpus_available(c.free.ToDouble());
    ResourceSetToProto(c.total, out->mutable_total());
    ResourceSetToProto(c.available, out->mutable_available());
  }
  std::map<v1::PlacementGroupState, uint32_t> by_state;
  for (const auto& [id, g] : groups_) ++by_state[g.state];
  for (const auto& [state, count] : by_state) {
    v1::PlacementGroupStateCount* c = response->add_placement_groups();
    c->set_state(state);
    c->set_count(count);
  }
  // Unplaced bundles of waiting groups, grouped by shape and strategy.
  std::map<std::string, v1::PendingDemand> demand;
  std::vector<std::string> order;
  for (const auto& [id, g] : groups_) {
    if (g.in_flight || (g.state != v1::PLACEMENT_GROUP_STATE_PENDING &&
                        g.state != v1::PLACEMENT_GROUP_STATE_RESCHEDULING)) {
      continue;
    }
    if (response->oldest_pending_since_unix_ms() == 0 ||
        g.waiting_since_ms < response->oldest_pending_since_unix_ms()) {
      response->set_oldest_pending_since_unix_ms(g.waiting_since_ms);
    }
    v1::PendingDemand d;
    const std::vector<uint32_t> placed = PlacedBundles(g);
    for (uint32_t b = 0; b < g.spec->bundles().size(); ++b) {
      if (!std::binary_search(placed.begin(), placed.end(), b))
        BundleToProto(g.spec->bundles()[b], d.add_shape());
    }
    d.set_strategy(StrategyToProto(g.spec->strategy()));
    const std::string key = d.SerializeAsString();
    auto [it, fresh] = demand.try_emplace(key, std::move(d));
    if (fresh) {
      it->second.set_reason(ReasonText(g));
      it->second.set_infeasible(g.infeasible);
      order.push_back(key);
    }
    it->second.set_count(it->second.count() + 1);
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return demand.at(a).count() > demand.at(b).count();
  });
  for (const std::string& key : order) *response->add_pending_demand() = demand.at(key);
  for (v1::QueueStatus& queue : QueueStatuses()) *response->add_queues() = std::move(queue);
}

}  // namespace berth
