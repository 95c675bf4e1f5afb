// PlacementExplainer: why a placement group the placer could not place does
// not fit (a typed PlacementReason, which a person can act on once
// rendered), and whether it ever could.
//
// Kept apart from the search and ranking that decide where a group goes
// (as Nomad's AllocMetric records why nodes were filtered or exhausted
// apart from its ranking iterators): it runs only after the placer gave up,
// and only when the caller wants a reason (BundlePlacer::WithoutExplanations
// skips it). It searches through the decision's NodeSearch, so the nodes its
// checks rule out count in the decision's rejected_by like the placer's own.
// It places nothing: the table is unchanged.
#ifndef BERTH_PLACEMENT_PLACEMENT_EXPLANATION_H_
#define BERTH_PLACEMENT_PLACEMENT_EXPLANATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "placement/node_resource_table.h"
#include "placement/node_search.h"
#include "placement/placement_decision.h"

namespace berth {

class PlacementExplainer {
 public:
  // `search` is the failed decision's, over `table` and the group; both must
  // outlive the explainer.
  PlacementExplainer(NodeResourceTable& table, NodeSearch& search)
      : table_(table), search_(search) {}

  // Why the bundles of `order` (placement order) cannot be placed:
  // kInfeasible when the ALIVE nodes' totals could never hold them, else
  // kRetryLater with the free-capacity gap. STRICT_SPREAD keeps off
  // `excluded`; STRICT_PACK goes on `pinned`, if set.
  PlacementDecision Explain(const std::vector<uint32_t>& order,
                            const absl::flat_hash_set<NodeIndex>& excluded,
                            std::optional<NodeIndex> pinned);
  // Why a group with a required topology is not placed in any domain of its
  // key, for a group the whole cluster could take.
  PlacementDecision ExplainTopology(const std::vector<uint32_t>& order,
                                    const std::vector<BundlePlacement>& already_placed);

 private:
  using Demand = NodeSearch::Demand;
  using Capacity = NodeSearch::Capacity;
  using Preference = NodeSearch::Preference;

  // Size of a maximum matching of bundles to distinct nodes by totals.
  size_t DistinctNodeMatching(const std::vector<uint32_t>& order,
                              const absl::flat_hash_set<NodeIndex>& excluded);
  // The demand as a reason names it: its bundles, sum and selectors.
  PlacementReason::Demand ReasonDemand(const Demand& d) const;
  // How the demand misses every candidate node: none matches, or the one
  // resource no candidate has enough of, or none has all of it at once.
  void NameShortfall(const Demand& d, Capacity capacity, PlacementReason* r) const;

  NodeResourceTable& table_;
  NodeSearch& search_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_PLACEMENT_EXPLANATION_H_
