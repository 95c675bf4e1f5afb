#include "train/job_world.h"

#include "absl/strings/str_cat.h"

namespace berth {

std::set<std::string> NodesOf(const JobProcesses& processes) {
  std::set<std::string> nodes;
  for (const auto& [worker, node] : processes) nodes.insert(node);
  return nodes;
}

bool GroupGone(const JobWorld& world) {
  if (!world.group.ok()) return absl::IsNotFound(world.group.status());
  return world.group->state() == v1::PLACEMENT_GROUP_STATE_REMOVED;
}

bool GroupUsable(const absl::StatusOr<v1::PlacementGroupInfo>& group) {
  return group.ok() && group->state() == v1::PLACEMENT_GROUP_STATE_CREATED &&
         !group->preempting() && !group->moving();
}

const v1::PlacementGroupInfo* MovingGroup(const JobWorld& world) {
  if (world.group.ok() && world.group->moving() && !world.group->preempting()) {
    return &*world.group;
  }
  for (const auto& [id, group] : world.elastic) {
    if (group.ok() && group->moving() && !group->preempting()) return &*group;
  }
  return nullptr;
}

std::optional<std::string> FirstLostNode(const std::set<std::string>& nodes,
                                         const JobWorld& world) {
  for (const std::string& node : nodes) {
    if (world.alive.count(node) == 0) return node;
  }
  return std::nullopt;
}

std::string NodeDeathCause(const std::string& node_id) {
  return absl::StrCat("node ", node_id, " died (missed heartbeats)");
}

}  // namespace berth
