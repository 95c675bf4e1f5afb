#include "placement/placement_decision.h"

namespace berth {

absl::string_view PlacementOutcomeName(PlacementOutcome outcome) {
  switch (outcome) {
    case PlacementOutcome::kPlaced:
      return "PLACED";
    case PlacementOutcome::kRetryLater:
      return "RETRY_LATER";
    case PlacementOutcome::kInfeasible:
      return "INFEASIBLE";
  }
  return "UNKNOWN";
}

}  // namespace berth
