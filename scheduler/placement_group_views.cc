// PlacementGroupManager's views (placement_group_manager.h): groups, queues
// and the cluster rendered for the services, and a group's reason as text
// (rendered here, once, from its typed Reason).
#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/placement_group_manager.h"
#include "wire/message_fingerprint.h"
#include "wire/proto_convert.h"

namespace berth {

std::vector<v1::QueueStatus> PlacementGroupManager::QueueStatuses(
    const std::optional<std::string>& only) const {
  constexpr size_t kPendingShown = 20;
  // Each queue's waiting groups in the order it tries them.
  std::map<std::string, std::vector<const Group*>> waiting;
  for (const std::string& id : waiting_) {
    const Group& g = groups_.at(id);
    const std::string& queue = RequestOf(g).queue;
    if (!only || queue == *only) waiting[queue].push_back(&g);
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
    std::partial_sort(
        mine.begin(), mine.begin() + shown, mine.end(), [&](const Group* a, const Group* b) {
          return std::make_pair(-int64_t{RequestOf(*a).priority}, ViewOf(*a).arrival) <
                 std::make_pair(-int64_t{RequestOf(*b).priority}, ViewOf(*b).arrival);
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

std::string PlacementGroupManager::PreemptedBy(const Group& g) const {
  const Preemption* p = ViewOf(g).preempted_by.get();
  return p == nullptr ? "" : PreemptionText(*p);
}

std::string PlacementGroupManager::ReasonText(const Group& g) const {
  const absl::string_view detail = g.detail == nullptr ? absl::string_view() : *g.detail;
  switch (g.reason) {
    case Reason::kNone:
      return "";
    case Reason::kToBeScheduled:
      return "waiting to be scheduled";
    case Reason::kRestarted:
      return "waiting to be scheduled (head restarted)";
    case Reason::kRestartedLost:
      return absl::StrCat(g.lost,
                          " bundle(s) not found on their nodes after a head restart; rescheduling");
    case Reason::kQueue: {
      const GangView* view = queues_.Find(g.id);
      return view == nullptr ? "" : GangReasonText(*view);
    }
    case Reason::kPlacer: {
      const PlacementReasonPtr why = queues_.WhyLacking(g.id);
      return why == nullptr ? "" : PlacementReasonText(*why);
    }
    case Reason::kCommitting:
      return "reserving bundles on the raylets (two-phase commit)";
    case Reason::kCommitFailed:
      return absl::StrCat("two-phase commit failed, retrying: ", detail);
    case Reason::kNodeDiedInCommit:
      return "a node holding some of its bundles died during the commit";
    case Reason::kLostWithNode:
      return absl::StrCat(g.lost, " bundle(s) lost with node ", detail, "; rescheduling");
    case Reason::kReleasedByNode:
      return absl::StrCat(g.lost, " bundle(s) released by node ", detail,
                          " when it synced with the head; rescheduling");
    case Reason::kStopping:
      return absl::StrCat(PreemptedBy(g), "; stopping what runs in its bundles");
    case Reason::kWaitingReadmission:
      return absl::StrCat(PreemptedBy(g), "; waiting to be admitted again");
    case Reason::kMovedOffNode:
      return absl::StrCat(g.lost, " bundle(s) moved off draining node ", detail, "; rescheduling");
    case Reason::kMovedOffGpu:
      return absl::StrCat(g.lost, " bundle(s) moved off an unhealthy GPU (", detail,
                          "); rescheduling");
    case Reason::kRemoved:
      return "removed";
  }
  return "";
}

void PlacementGroupManager::ToProto(const Group& g, v1::PlacementGroupInfo* info) const {
  if (g.removed != nullptr) {
    *info = g.removed->info;
    return;
  }
  const GangRequest& gang = RequestOf(g);
  const GangView& view = ViewOf(g);
  const bool preempting = view.state == GangState::kPreempting;
  info->set_placement_group_id(g.id);
  info->set_name(g.name);
  info->set_strategy(StrategyToProto(g.spec->strategy()));
  for (const Bundle& b : g.spec->bundles()) BundleToProto(b, info->add_bundles());
  info->set_state(g.state);
  const std::vector<const BundlePlacement*> placed = Placed(g);
  for (const BundlePlacement* p : placed) {
    v1::BundleLocation* loc = info->add_locations();
    loc->set_bundle_index(p->bundle_index);
    loc->set_node_id(table_->node(p->allocation.node).id);
    GpuSharesToProto(p->allocation.gpus, loc->mutable_gpus());
  }
  info->set_infeasible(Infeasible(g));
  info->set_pending_reason(
      g.state == v1::PLACEMENT_GROUP_STATE_CREATED && !preempting ? "" : ReasonText(g));
  info->set_created_unix_ms(g.created_ms);
  info->set_placed_unix_ms(g.placed_ms);
  info->set_scheduling_attempts(g.attempts);
  info->set_job_id(g.job_id);
  info->set_priority(gang.priority);
  info->set_queue(gang.queue);
  info->set_preempted_by(PreemptedBy(g));
  info->set_preempting(preempting);
  info->set_preemptible(gang.preemptible);
  info->set_time_limit_s(gang.time_limit_ms.value_or(0) / 1000);
  info->set_preemptions(view.preemptions);
  if (const Move move = MoveOf(g); !move.bundles.empty()) {
    info->set_moving(true);
    info->set_move_deadline_unix_ms(move.deadline_ms);
    info->set_moving_reason(move.reason);
    info->set_move_cause(move.cause);
  }
  TopologyToProto(g.spec->topology(), info->mutable_topology());
  // The innermost key whose one value every placed bundle shares.
  for (const std::string& key : g.spec->topology().keys()) {
    std::optional<std::string> shared;
    bool one = true;
    for (const BundlePlacement* p : placed) {
      const Labels& labels = table_->node(p->allocation.node).labels;
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
  absl::StatusOr<v1::PlacementGroupInfo> found = Info(id);
  if (!found.ok()) return found.status();
  *info = *std::move(found);
  return absl::OkStatus();
}

absl::StatusOr<v1::PlacementGroupInfo> PlacementGroupManager::Info(const std::string& id) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  v1::PlacementGroupInfo info;
  ToProto(it->second, &info);
  return info;
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
  auto arrival = [&](const Group* g) {
    return g->removed != nullptr ? g->removed->arrival : ViewOf(*g).arrival;
  };
  std::sort(sorted.begin(), sorted.end(),
            [&](const Group* a, const Group* b) { return arrival(a) < arrival(b); });
  for (const Group* g : sorted) ToProto(*g, response->add_placement_groups());
}

absl::Status PlacementGroupManager::MayUse(const std::string& id, absl::string_view team,
                                           absl::string_view field) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::OkStatus();
  const Group& g = it->second;
  return queues_.config().MayUse(
      g.removed != nullptr ? g.removed->info.queue() : RequestOf(g).queue, team, field);
}

std::optional<v1::PlacementGroupState> PlacementGroupManager::State(const std::string& id) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return std::nullopt;
  return it->second.state;
}

bool PlacementGroupManager::OfJob(const std::string& id) const {
  auto it = groups_.find(id);
  return it != groups_.end() && !it->second.job_id.empty();
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
    if (node.state != NodeState::kDead) {
      response->set_unhealthy_gpus(response->unhealthy_gpus() +
                                   static_cast<uint32_t>(nodes_->UnhealthyGpus(node.id).size()));
    }
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
    if (g.in_flight() || (g.state != v1::PLACEMENT_GROUP_STATE_PENDING &&
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
    const std::string key = DeterministicBytes(d);
    auto [it, fresh] = demand.try_emplace(key, std::move(d));
    if (fresh) {
      it->second.set_reason(ReasonText(g));
      it->second.set_infeasible(Infeasible(g));
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
