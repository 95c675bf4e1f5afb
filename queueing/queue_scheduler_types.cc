#include "queueing/queue_scheduler_types.h"

namespace berth {

absl::string_view PreemptionRuleName(PreemptionRule rule) {
  switch (rule) {
    case PreemptionRule::kReclaim:
      return "reclaim";
    case PreemptionRule::kPriority:
      return "priority";
    case PreemptionRule::kNewer:
      return "newer, same priority";
    case PreemptionRule::kBackfill:
      return "backfill";
    case PreemptionRule::kSparedNodes:
      return "spared nodes";
  }
  return "unknown";
}

absl::string_view GangStateName(GangState state) {
  switch (state) {
    case GangState::kPending:
      return "PENDING";
    case GangState::kClaimed:
      return "CLAIMED";
    case GangState::kRunning:
      return "RUNNING";
    case GangState::kPreempting:
      return "PREEMPTING";
  }
  return "UNKNOWN";
}

}  // namespace berth
