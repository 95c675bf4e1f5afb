// PlacementGroupManager: what moves off DRAINING nodes and unhealthy GPUs,
// and when (see placement_group_manager.h, "Drains").
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/placement_group_manager.h"

namespace berth {

PlacementGroupManager::Move PlacementGroupManager::MoveOf(const Group& g) const {
  Move move;
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) return move;
  for (const BundlePlacement* p : Placed(g)) {
    const NodeResourceTable::Node& node = table_->node(p->allocation.node);
    if (const v1::UnhealthyGpu* gpu = UnhealthyGpuOf(p->allocation)) {
      // At once: whatever runs on the GPU is lost.
      move.bundles.push_back(p->bundle_index);
      if (move.cause != v1::MOVE_CAUSE_UNHEALTHY_GPU) {
        move.cause = v1::MOVE_CAUSE_UNHEALTHY_GPU;
        move.node_id = node.id;
        move.reason = absl::StrCat("GPU ", gpu->index(), " of ", node.id, ": ", gpu->reason());
      }
      const int64_t since = std::max<int64_t>(1, gpu->since_unix_ms());
      if (move.deadline_ms == 0 || since < move.deadline_ms) move.deadline_ms = since;
      continue;
    }
    if (node.state != NodeState::kDraining) continue;
    move.bundles.push_back(p->bundle_index);
    if (move.cause == v1::MOVE_CAUSE_UNSPECIFIED) {
      move.cause = v1::MOVE_CAUSE_DRAIN;
      move.node_id = node.id;
      move.reason = absl::StrCat("node ", node.id, " is draining: ", nodes_->DrainReason(node.id));
    }
    auto drain = nodes_->drains().find(node.id);
    const int64_t deadline = drain == nodes_->drains().end() ? 0 : drain->second.deadline_ms;
    if (deadline != 0 && (move.deadline_ms == 0 || deadline < move.deadline_ms))
      move.deadline_ms = deadline;
  }
  std::sort(move.bundles.begin(), move.bundles.end());
  return move;
}

const v1::UnhealthyGpu* PlacementGroupManager::UnhealthyGpuOf(const Allocation& allocation) const {
  if (allocation.gpus.empty()) return nullptr;
  const std::map<uint32_t, v1::UnhealthyGpu>& unhealthy =
      nodes_->UnhealthyGpus(table_->node(allocation.node).id);
  for (const GpuShare& share : allocation.gpus) {
    if (auto it = unhealthy.find(share.index); it != unhealthy.end()) return &it->second;
  }
  return nullptr;
}

std::vector<CancelTask> PlacementGroupManager::FinishMove(Group& g, const Move& move,
                                                          int64_t now_ms) {
  std::vector<CancelTask> cancels = CancelsFor(g, move.bundles, absl::StrCat("move-", now_ms));
  LoseBundles(
      g, move.bundles,
      move.cause == v1::MOVE_CAUSE_UNHEALTHY_GPU ? Reason::kMovedOffGpu : Reason::kMovedOffNode,
      move.cause == v1::MOVE_CAUSE_UNHEALTHY_GPU ? move.reason : move.node_id, now_ms);
  return cancels;
}

std::vector<std::string> PlacementGroupManager::GroupsOn(const std::string& node_id) const {
  std::set<std::string> ids;
  for (const v1::HeldBundle& held : BundlesOn(node_id)) ids.insert(held.key().placement_group_id());
  return {ids.begin(), ids.end()};
}

std::vector<CancelTask> PlacementGroupManager::MoveAtDrainDeadlines(int64_t now_ms) {
  std::vector<CancelTask> cancels;
  if (now_ms < next_drain_look_ms_) return cancels;
  // A GPU found unhealthy, or returned, since the last look.
  bool due = nodes_->gpu_health_version() != gpu_health_seen_;
  gpu_health_seen_ = nodes_->gpu_health_version();
  for (const auto& [node_id, drain] : nodes_->drains()) {
    std::optional<NodeIndex> index = table_->FindNode(node_id);
    due |= index && table_->node(*index).state == NodeState::kDraining && drain.deadline_ms != 0 &&
           drain.deadline_ms <= now_ms;
  }
  if (!due) return cancels;
  // One look over the groups a second at most, while a drain is past due.
  next_drain_look_ms_ = now_ms + config_.max_backoff_ms;
  for (auto& [id, g] : groups_) {
    if (!g.job_id.empty() || g.in_flight() || Preempting(g)) continue;
    const Move move = MoveOf(g);
    if (move.bundles.empty() || move.deadline_ms == 0 || move.deadline_ms > now_ms) continue;
    std::vector<CancelTask> moved = FinishMove(g, move, now_ms);
    cancels.insert(cancels.end(), std::make_move_iterator(moved.begin()),
                   std::make_move_iterator(moved.end()));
  }
  return cancels;
}

}  // namespace berth
