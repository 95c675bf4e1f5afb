#include "train/failure_triage.h"

#include "absl/strings/str_cat.h"
#include "train/attempt_plan.h"

namespace berth {

std::string FirstObservedFailure(const JobProcesses& processes, const ProcessExits& exits) {
  const v1::WorkerStatus* first = nullptr;
  std::string first_id, first_node;
  for (const auto& [id, node] : processes) {
    auto exit = exits.find(id);
    if (exit == exits.end() || !ExitedWithFailure(exit->second)) continue;
    if (first == nullptr || FailedAtUs(exit->second) < FailedAtUs(*first)) {
      first = &exit->second;
      first_id = id;
      first_node = node;
    }
  }
  if (first == nullptr) return "a process of the attempt failed";
  return DescribeFailure(first_id, first_node, *first);
}

std::string PlacementChange(const JobWorld& world, const std::set<std::string>& nodes,
                            int64_t placed_unix_ms, bool elastic) {
  if (std::optional<std::string> lost = FirstLostNode(nodes, world)) return NodeDeathCause(*lost);
  if (GroupGone(world)) return "the placement group is gone";
  if (!world.group.ok() || elastic) return "";  // the former: the head's error, asked again
  if (world.group->state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    return absl::StrCat("the placement group lost bundles: ", world.group->pending_reason());
  }
  // Placed again since the attempt started, even if the node it lost came
  // back under the same id and took its bundles back between two looks.
  if (placed_unix_ms != 0 && world.group->placed_unix_ms() != placed_unix_ms) {
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

AttemptFailure GpuFailure(const v1::PlacementGroupInfo& moving) {
  AttemptFailure failure;
  failure.cause = moving.moving_reason();
  failure.node_failure = true;
  failure.gpu_fault = true;
  return failure;
}

AttemptFailure StartFailure(const absl::Status& status) {
  AttemptFailure failure;
  failure.cause = std::string(status.message());
  failure.node_failure = absl::IsNotFound(status);
  failure.launch_failed = true;
  return failure;
}

FailureVerdict TriageFailure(const AttemptFailure& failure, const v1::FailureConfig& config,
                             uint32_t failures, bool elastic) {
  FailureVerdict verdict;
  if (elastic && failure.node_failure && !failure.dead_node.empty()) {
    verdict.action = FailureAction::kShrink;
    return verdict;
  }
  const bool count_node_failures =
      !config.has_count_node_failures() || config.count_node_failures();
  verdict.charged = !failure.gpu_fault && (count_node_failures || !failure.node_failure);
  const int64_t charged = static_cast<int64_t>(failures) + (verdict.charged ? 1 : 0);
  if (config.max_failures() >= 0 && charged > config.max_failures()) {
    verdict.action = FailureAction::kFail;
    return verdict;
  }
  verdict.back_off = failure.launch_failed || !failure.node_failure;
  return verdict;
}

}  // namespace berth
