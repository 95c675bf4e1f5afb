// PlacementDecision: what the placer answers for a placement group, placed
// or not, and the bundle placements it is made of.
//
// Plain values, no behaviour beyond naming an outcome: bundle_placer.h makes
// them, and the units it delegates to (the explanation of a shortfall, the
// topology search) read and fill them without depending on the placer.
#ifndef BERTH_PLACEMENT_PLACEMENT_DECISION_H_
#define BERTH_PLACEMENT_PLACEMENT_DECISION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "placement/node_resource_table.h"
#include "placement/placement_reason.h"

namespace berth {

// kPlaced: the bundles are reserved. kRetryLater: the group fits the ALIVE
// nodes' totals but not what is free now. kInfeasible: no set of ALIVE nodes
// could ever hold it.
enum class PlacementOutcome { kPlaced, kRetryLater, kInfeasible };
absl::string_view PlacementOutcomeName(PlacementOutcome outcome);

struct BundlePlacement {
  uint32_t bundle_index = 0;
  Allocation allocation;
};

struct PlacementDecision {
  PlacementOutcome outcome = PlacementOutcome::kRetryLater;
  // kPlaced: the bundles placed by this call, in bundle order.
  std::vector<BundlePlacement> placements;
  // kPlaced with a topology: the domain they went into, `key=value`; empty
  // when a preferred topology fell back to the whole cluster.
  std::string topology_domain;
  // Why the group is not placed; kNone when it is.
  PlacementReason reason;
  // How many nodes each filter (node_filters.h) ruled out while deciding,
  // in the filters' order; only those that ruled out any.
  std::vector<std::pair<absl::string_view, uint64_t>> rejected_by;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_PLACEMENT_DECISION_H_
