// BundlePlacer: the placement core. Given the node table and a placement
// group, decides where every bundle goes, or why it cannot go anywhere yet.
//
// Pure and deterministic: no I/O, threads or clocks; the same table and
// group give the same placement. Like Nomad's scheduler it runs feasibility
// (the node filters of node_filters.h, each counting what it rules out) ->
// ranking (best fit for PACK / STRICT_PACK, most free for SPREAD /
// STRICT_SPREAD) -> selection, over the table's ordered indices, so a
// decision visits a handful of nodes rather than the whole cluster. The
// placer keeps no state between calls: each works on its own NodeSearch
// (node_search.h, the feasibility and ranking stages).
//
// Outcomes: kPlaced reserves the bundles in the table (the head's view is
// updated at decision time, so concurrent groups never double book); the
// caller releases them with NodeResourceTable::Release. kRetryLater means
// the group fits the ALIVE nodes' totals but not what is free now;
// kInfeasible means no set of ALIVE nodes could ever hold it. Neither
// changes the table. Both carry a typed reason (placement_reason.h) that
// renders to text a person can act on (placement_explanation.h finds it). Whole GPUs a call takes on one node go out in
// increasing bundle order (bundle i's ids below bundle j's for i < j),
// whatever order the bundles were placed in, so a train job's ranks on a
// node follow its GPU ids (train/rank_assignment.h).
//
// Topology (PlacementGroupSpec::topology): the bundles go into one domain
// of a key (the nodes that share its value, NodeResourceTable::Domains).
// The domains whose free capacity covers the group are tried tightest
// first (topology_domains.h: least of the group's primary resource left
// over, so big domains stay whole for big gangs; then the order domains
// were first seen); within one, the strategy places as usual over its
// nodes alone. A group with bundles placed already stays in their domain.
// `required` waits (or is infeasible) with the domain's shortfall as its
// reason; `preferred` tries each key in turn, then the whole cluster.
//
// Ranking goes through one path, a NodeScorer (node_scorer.h): the optional
// scorer given ranks the searches over free capacity (its best feasible
// candidate of the first tier that has one is taken); the placer's own
// IndexOrderRanking ranks the rest, and everything without a scorer.
#ifndef BERTH_PLACEMENT_BUNDLE_PLACER_H_
#define BERTH_PLACEMENT_BUNDLE_PLACER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "placement/node_filters.h"
#include "placement/node_resource_table.h"
#include "placement/node_scorer.h"
#include "placement/node_search.h"
#include "placement/placement_decision.h"
#include "placement/placement_group_spec.h"

namespace berth {

class BundlePlacer {
 public:
  // `scorer`, if given, must outlive the placer.
  explicit BundlePlacer(NodeResourceTable* table, NodeScorer* scorer = nullptr)
      : table_(table), scorer_(scorer) {}

  // Places the bundles of `spec` that `already_placed` does not hold (all of
  // them for a new group; the lost ones when rescheduling). STRICT_SPREAD
  // avoids the nodes of `already_placed`; STRICT_PACK joins them.
  // INVALID_ARGUMENT if `already_placed` names a bundle twice or one the
  // group does not have, or a STRICT_PACK group's placed bundles disagree.
  absl::StatusOr<PlacementDecision> Place(const PlacementGroupSpec& spec,
                                          const std::vector<BundlePlacement>& already_placed = {});
  // A trial placement wants only where the group would go: a group that does
  // not fit is then kRetryLater with no reason (finding out why, and whether
  // it could ever fit, is most of the cost of a failed decision).
  BundlePlacer& WithoutExplanations() {
    explain_ = false;
    return *this;
  }
  // The placement takes nothing free on these nodes (room a queue keeps for
  // a reserved gang); null: none. Feasibility (could it ever fit) still
  // counts them. Not owned; must outlive the Place call.
  BundlePlacer& Avoiding(const absl::flat_hash_set<NodeIndex>* nodes) {
    avoid_ = nodes;
    return *this;
  }

 private:
  using Demand = NodeSearch::Demand;
  using Preference = NodeSearch::Preference;
  using Capacity = NodeSearch::Capacity;

  absl::StatusOr<PlacementDecision> Place(NodeSearch& search,
                                          const std::vector<BundlePlacement>& already_placed);
  absl::Status PlaceOnNode(NodeSearch& search, NodeIndex node, const Demand& d,
                           std::vector<BundlePlacement>* out);
  // Places `order` by the group's strategy (over the search's domain, if set).
  bool PlaceByStrategy(NodeSearch& search, const std::vector<uint32_t>& order,
                       const absl::flat_hash_set<NodeIndex>& placed_nodes,
                       std::optional<NodeIndex> pinned, std::vector<BundlePlacement>* out);
  // Places `order` in one domain of a topology key, trying them best first
  // (topology_domains.h); returns the domain's value, or nullopt (nothing
  // placed) if none took it.
  std::optional<std::string> PlaceInDomain(NodeSearch& search, const std::string& key,
                                           const std::vector<uint32_t>& order,
                                           const std::vector<BundlePlacement>& already_placed,
                                           const absl::flat_hash_set<NodeIndex>& placed_nodes,
                                           std::optional<NodeIndex> pinned,
                                           std::vector<BundlePlacement>* out);
  bool PlacePack(NodeSearch& search, const std::vector<uint32_t>& order,
                 std::vector<BundlePlacement>* out);
  bool PlaceSpread(NodeSearch& search, const std::vector<uint32_t>& order, bool strict,
                   const absl::flat_hash_set<NodeIndex>& excluded,
                   std::vector<BundlePlacement>* out);

  NodeResourceTable* table_;
  NodeScorer* scorer_;
  bool explain_ = true;
  const absl::flat_hash_set<NodeIndex>* avoid_ = nullptr;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_BUNDLE_PLACER_H_
