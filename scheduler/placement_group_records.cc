// PlacementGroupManager's records (placement_group_manager.h): what the head
// persists of each group and restores after a restart, and the bundles it
// believes a node holds.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "queueing/queue_config.h"
#include "scheduler/placement_group_manager.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// The record keeps a create request's fingerprint as its 8 bytes.
std::string FingerprintBytes(uint64_t fingerprint) {
  std::string bytes(sizeof(fingerprint), '\0');
  std::memcpy(bytes.data(), &fingerprint, sizeof(fingerprint));
  return bytes;
}

uint64_t FingerprintFromBytes(const std::string& bytes) {
  uint64_t fingerprint = 0;
  std::memcpy(&fingerprint, bytes.data(), std::min(bytes.size(), sizeof(fingerprint)));
  return fingerprint;
}

}  // namespace

std::vector<std::string> PlacementGroupManager::TakeChanged() {
  std::vector<std::string> ids(changed_.begin(), changed_.end());
  changed_.clear();
  return ids;
}

std::optional<v1::PlacementGroupRecord> PlacementGroupManager::Export(const std::string& id) const {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.state == v1::PLACEMENT_GROUP_STATE_REMOVED)
    return std::nullopt;
  const Group& g = it->second;
  v1::PlacementGroupRecord r;
  r.set_placement_group_id(g.id);
  r.set_name(g.name);
  r.set_job_id(g.job_id);
  r.set_request_id(g.request_id);
  r.set_fingerprint(FingerprintBytes(g.fingerprint));
  for (const Bundle& b : g.spec->bundles()) BundleToProto(b, r.add_bundles());
  r.set_strategy(StrategyToProto(g.spec->strategy()));
  TopologyToProto(g.spec->topology(), r.mutable_topology());
  const GangRequest& gang = RequestOf(g);
  const GangView& view = ViewOf(g);
  r.set_priority(gang.priority);
  r.set_queue(gang.queue);
  // A commit in flight has an unknown outcome: written as not yet placed.
  r.set_state(g.state == v1::PLACEMENT_GROUP_STATE_PREPARED ? v1::PLACEMENT_GROUP_STATE_PENDING
                                                            : g.state);
  for (const BundlePlacement* p : Placed(g)) {
    if (g.Committing(p->bundle_index)) continue;
    v1::BundleRecord* placed = r.add_placed();
    placed->set_bundle_index(p->bundle_index);
    placed->set_node_id(table_->node(p->allocation.node).id);
    ResourceSetToProto(p->allocation.resources, placed->mutable_resources());
    GpuSharesToProto(p->allocation.gpus, placed->mutable_gpus());
  }
  r.set_created_unix_ms(g.created_ms);
  r.set_placed_unix_ms(g.placed_ms);
  r.set_arrival(view.arrival);
  r.set_non_preemptible(!gang.preemptible);
  r.set_time_limit_s(gang.time_limit_ms.value_or(0) / 1000);
  if (const Preemption* p = view.preempted_by.get()) {
    v1::PreemptionRecord* out = r.mutable_preemption();
    out->set_by(p->by);
    out->set_by_name(p->by_name);
    out->set_by_queue(p->by_queue);
    out->set_rule(std::string(PreemptionRuleName(p->rule)));
  }
  r.set_preempting(view.state == GangState::kPreempting);
  r.set_preemptions(view.preemptions);
  return r;
}

absl::StatusOr<PlacementGroupManager::Group> PlacementGroupManager::GroupFromRecord(
    const v1::PlacementGroupRecord& r, int64_t now_ms) const {
  const std::string& id = r.placement_group_id();
  if (id.empty() || groups_.count(id) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement group record '", id, "': missing or duplicate id"));
  }
  const std::string queue = r.queue().empty() ? std::string(kDefaultQueue) : r.queue();
  if (queues_.config().FindQueue(queue) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("placement group record '", id, "': queue '", queue, "' is not configured"));
  }
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpecFromProto(r.bundles(), r.strategy(), true, r.topology());
  if (!spec.ok()) return spec.status();
  Group g(id, std::make_shared<const PlacementGroupSpec>(*std::move(spec)));
  g.reason = Reason::kNone;
  g.name = r.name();
  g.job_id = r.job_id();
  g.request_id = r.request_id();
  g.fingerprint = FingerprintFromBytes(r.fingerprint());
  g.created_ms = r.created_unix_ms();
  g.placed_ms = r.placed_unix_ms();
  g.waiting_since_ms = now_ms;
  return g;
}

absl::StatusOr<size_t> PlacementGroupManager::RestorePlacements(CapacityModel::GangRef placement,
                                                                const v1::PlacementGroupRecord& r) {
  size_t lost = 0;
  std::vector<bool> seen(PlacerCapacity::SpecOf(placement)->bundles().size());
  for (const v1::BundleRecord& placed : r.placed()) {
    std::optional<NodeIndex> node = table_->FindNode(placed.node_id());
    absl::StatusOr<ResourceSet> resources = ResourceSetFromProto(placed.resources(), "resources");
    absl::StatusOr<std::vector<GpuShare>> gpus = GpuSharesFromProto(placed.gpus(), "gpus");
    if (placed.bundle_index() >= seen.size() || seen[placed.bundle_index()] || !resources.ok() ||
        !gpus.ok()) {
      // The caller drops the record, which gives back what it reserved so far.
      return absl::InvalidArgumentError(
          absl::StrCat("placement group record '", *placement.id, "': bad bundle record"));
    }
    seen[placed.bundle_index()] = true;
    Allocation allocation{node.value_or(0), *std::move(resources), *std::move(gpus)};
    if (!node || table_->node(*node).state == NodeState::kDead ||
        !table_->Reserve(allocation).ok()) {
      ++lost;
      continue;
    }
    capacity_.Hold(placement, BundlePlacement{placed.bundle_index(), std::move(allocation)});
  }
  return lost;
}

void PlacementGroupManager::RestoreGang(const Group& g, const v1::PlacementGroupRecord& r,
                                        bool complete, int64_t now_ms,
                                        std::unique_ptr<CapacityModel::Gang> placement) {
  // Its place in the queue scheduler: admitted once it was placed (it holds
  // its quota while it places what it lost), or being preempted.
  QueueScheduler::GangRecord gang;
  gang.request = GangOf(g);
  gang.request.queue = r.queue();
  gang.request.priority = r.priority();
  gang.request.preemptible = !r.non_preemptible();
  if (r.time_limit_s() > 0) gang.request.time_limit_ms = r.time_limit_s() * 1000;
  gang.arrival = r.arrival();
  gang.waiting_since_ms = now_ms;
  gang.started_ms = g.placed_ms;
  gang.preemptions = r.preemptions();
  if (r.has_preemption()) {
    const v1::PreemptionRecord& p = r.preemption();
    gang.preempted_by = std::make_shared<const Preemption>(
        Preemption{r.placement_group_id(), p.by(),
                   PreemptionRuleFromName(p.rule()).value_or(PreemptionRule::kReclaim), p.by_name(),
                   p.by_queue()});
  }
  if (r.preempting()) {
    gang.state = GangState::kPreempting;
  } else if (g.state != v1::PLACEMENT_GROUP_STATE_PENDING) {
    gang.state = GangState::kRunning;
    gang.charge = complete ? capacity_.Charge({&g.id, placement.get()}) : g.spec->total();
  }
  // Its queue is known, its id new.
  queues_.Restore(gang, std::move(placement)).IgnoreError();
}

absl::Status PlacementGroupManager::Restore(const v1::PlacementGroupRecord& r, int64_t now_ms) {
  absl::StatusOr<Group> group = GroupFromRecord(r, now_ms);
  if (!group.ok()) return group.status();
  Group& g = *group;
  const std::string id = g.id;
  std::unique_ptr<CapacityModel::Gang> placement =
      capacity_.Add(g.spec, /*learn=*/!workload_restored_);
  const CapacityModel::GangRef ref{&id, placement.get()};
  g.spec = PlacerCapacity::SpecOf(ref);
  absl::StatusOr<size_t> lost = RestorePlacements(ref, r);
  if (!lost.ok()) return lost.status();
  const bool complete = PlacerCapacity::Held(ref).size() == g.spec->bundles().size();
  if (complete && r.state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    g.state = v1::PLACEMENT_GROUP_STATE_CREATED;
  } else if (r.state() == v1::PLACEMENT_GROUP_STATE_CREATED ||
             r.state() == v1::PLACEMENT_GROUP_STATE_RESCHEDULING || *lost > 0) {
    g.state = v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
    SetReason(g, Reason::kRestartedLost);
    g.lost = static_cast<uint32_t>(*lost);
  } else {
    g.state = v1::PLACEMENT_GROUP_STATE_PENDING;
    SetReason(g, Reason::kRestarted);
  }
  RestoreGang(g, r, complete, now_ms, std::move(placement));
  Group& restored = groups_.emplace(id, *std::move(group)).first->second;
  IndexRequestId(restored);
  if (!restored.name.empty()) by_name_[restored.name] = id;
  const GangState admission = ViewOf(restored).state;
  if (admission == GangState::kPending) {
    waiting_.insert(id);
  } else if (restored.state != v1::PLACEMENT_GROUP_STATE_CREATED &&
             admission != GangState::kPreempting) {
    queues_.Lacks(id, now_ms, restored.state == v1::PLACEMENT_GROUP_STATE_RESCHEDULING,
                  /*after_backoff=*/false);
  }
  // One created directly lets go now; a job's group, once its job stopped.
  if (admission == GangState::kPreempting && restored.job_id.empty()) {
    std::vector<CancelTask> cancels = FinishPreemption(restored, now_ms);
    preemption_work_.cancels.insert(preemption_work_.cancels.end(), cancels.begin(), cancels.end());
  }
  pass_due_ = true;
  if (*lost > 0) changed_.insert(id);
  return absl::OkStatus();
}

std::vector<v1::HeldBundle> PlacementGroupManager::BundlesOn(const std::string& node_id) const {
  std::vector<v1::HeldBundle> held;
  std::optional<NodeIndex> index = table_->FindNode(node_id);
  if (!index) return held;
  for (const auto& [id, g] : groups_) {
    if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED && !g.in_flight()) continue;
    for (const BundlePlacement* placement : Placed(g)) {
      const BundlePlacement& p = *placement;
      if (p.allocation.node != *index) continue;
      const uint32_t b = p.bundle_index;
      v1::HeldBundle h;
      h.mutable_key()->set_placement_group_id(id);
      h.mutable_key()->set_bundle_index(b);
      ResourceSetToProto(p.allocation.resources, h.mutable_resources());
      GpuSharesToProto(p.allocation.gpus, h.mutable_gpus());
      h.set_committed(!g.Committing(b));
      held.push_back(std::move(h));
    }
  }
  return held;
}

std::optional<v1::WorkloadWindowRecord> PlacementGroupManager::TakeWorkloadChange() {
  const WorkloadWindow* window = scorer_.window();
  if (window == nullptr) return std::nullopt;
  // Written when the scorer was rebuilt, or the window grew by an eighth:
  // a crash loses little of it, and a busy head writes it rarely.
  const uint64_t grown = window->added() - workload_written_added_;
  if (scorer_.builds() == workload_written_builds_ &&
      grown < std::max<uint64_t>(1, window->size() / 8)) {
    return std::nullopt;
  }
  workload_written_builds_ = scorer_.builds();
  workload_written_added_ = window->added();
  const WorkloadWindow::Contents contents = window->Export();
  v1::WorkloadWindowRecord record;
  for (const WorkloadWindow::RecordedShape& s : contents.shapes) {
    v1::WorkloadWindowRecord::Shape* out = record.add_shapes();
    out->set_cpu_units(s.cpu);
    out->set_memory_units(s.memory);
    out->set_gpu_units(s.gpu);
    for (const std::string& t : s.accelerator_types) out->add_accelerator_types(t);
  }
  record.mutable_tasks()->Add(contents.tasks.begin(), contents.tasks.end());
  record.set_added(contents.added);
  return record;
}

absl::Status PlacementGroupManager::RestoreWorkload(const v1::WorkloadWindowRecord& record) {
  WorkloadWindow::Contents contents;
  for (const v1::WorkloadWindowRecord::Shape& s : record.shapes()) {
    contents.shapes.push_back({s.cpu_units(),
                               s.memory_units(),
                               s.gpu_units(),
                               {s.accelerator_types().begin(), s.accelerator_types().end()}});
    std::sort(contents.shapes.back().accelerator_types.begin(),
              contents.shapes.back().accelerator_types.end());
  }
  contents.tasks.assign(record.tasks().begin(), record.tasks().end());
  contents.added = record.added();
  if (absl::Status s = scorer_.Restore(contents); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("workload record: ", s.message()));
  }
  workload_written_builds_ = scorer_.builds();
  workload_written_added_ = contents.added;
  workload_restored_ = true;
  return absl::OkStatus();
}

}  // namespace berth
