// PlacementGroupManager: what moves off DRAINING nodes, and when (see
// placement_group_manager.h, "Drains").
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/placement_group_manager.h"

namespace berth {

PlacementGroupManager::Move PlacementGroupManager::MoveOf(const Group& g) const {
  Move move;
  if (g.state == v1::PLACEMENT_GROUP_STATE_REMOVED) return move;
  for (const BundlePlacement* p : Placed(g)) {
    const NodeResourceTable::Node& node = table_->node(p->allocation.node);
    if (node.state != NodeState::kDraining) continue;
    move.bundles.push_back(p->bundle_index);
    if (move.node_id.empty()) move.node_id = node.id;
    auto drain = nodes_->drains().find(node.id);
    const int64_t deadline = drain == nodes_->drains().end() ? 0 : drain->second.deadline_ms;
    if (deadline != 0 && (move.deadline_ms == 0 || deadline < move.deadline_ms))
      move.deadline_ms = deadline;
  }
  std::sort(move.bundles.begin(), move.bundles.end());
  return move;
}

std::vector<CancelTask> PlacementGroupManager::FinishMove(Group& g, const Move& move,
                                                          int64_t now_ms) {
  std::vector<CancelTask> cancels = CancelsFor(g, move.bundles, absl::StrCat("move-", now_ms));
  LoseBundles(g, move.bundles, Reason::kMovedOffNode, move.node_id, now_ms);
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
  bool due = false;
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
