// NodeSearch: the feasibility and ranking stages of one placement decision.
// For a demand (bundles of one group that go on one node together) it finds
// the node to take it: the candidate pools, the node filters of
// node_filters.h, then a NodeScorer over the nodes that pass.
//
// One NodeSearch serves one BundlePlacer::Place call and counts, per filter,
// the nodes it ruled out (PlacementDecision::rejected_by); every search of
// the call, explanations included, adds to the same counts. It reads the
// table and never changes it; the placer reserves what it finds. The same
// table, group and scorer give the same answers, so decisions stay
// deterministic.
#ifndef BERTH_PLACEMENT_NODE_SEARCH_H_
#define BERTH_PLACEMENT_NODE_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "placement/node_resource_table.h"
#include "placement/node_scorer.h"
#include "placement/placement_group_spec.h"
#include "placement/resource_set.h"

namespace berth {

// The resource a demand is ranked by: GPUs are the scarce resource, then CPU,
// then memory. A demand of custom resources only is ranked by CPU from 0.
IndexedResource PrimaryResource(const ResourceSet& sum);

class NodeSearch {
 public:
  // Bundles that must land on one node together.
  struct Demand {
    std::vector<uint32_t> bundles;  // in placement order
    ResourceSet sum;
  };
  enum class Preference { kBestFit, kMostFree };
  // Whether a node could take the demand now (free) or ever (totals).
  enum class Capacity { kFree, kTotal };
  struct Constraints {
    const absl::flat_hash_set<NodeIndex>* exclude = nullptr;
    std::optional<NodeIndex> only;
  };

  // `scorer`, if given, ranks the searches over free capacity; the built-in
  // IndexOrderRanking ranks the rest. Nothing free on the nodes of `avoid`
  // (if given) is taken. Neither is owned; both must outlive the search.
  NodeSearch(const NodeResourceTable& table, const PlacementGroupSpec& spec, NodeScorer* scorer,
             const absl::flat_hash_set<NodeIndex>* avoid);

  const NodeResourceTable& table() const { return table_; }
  const PlacementGroupSpec& spec() const { return spec_; }
  // How many nodes each filter (NodeFilters(), by position) ruled out.
  const std::vector<uint64_t>& rejected() const { return rejected_; }

  // Searches only the nodes of `nodes` (a topology domain); nullptr: every
  // node. Not owned; must outlive the searches it applies to.
  void Within(const absl::btree_set<NodeIndex>* nodes) { within_ = nodes; }

  Demand MakeDemand(std::vector<uint32_t> bundles) const;
  // Pools that may hold the demand, in tiers: a demand without GPUs tries
  // nodes without GPUs first, so it does not strand GPUs.
  std::vector<std::vector<const NodeResourceTable::Pool*>> CandidatePools(const Demand& d) const;
  // Whether every filter passes `node` for the demand; counts the first that
  // does not.
  bool Fits(NodeIndex node, const Demand& d, Capacity capacity);
  // The best node for the demand by `preference`, or nullopt if none fits.
  std::optional<NodeIndex> FindNode(const Demand& d, Preference preference, Capacity capacity,
                                    const Constraints& constraints);

 private:
  const NodeResourceTable& table_;
  const PlacementGroupSpec& spec_;
  NodeScorer* scorer_;
  const absl::flat_hash_set<NodeIndex>* avoid_;
  std::vector<uint64_t> rejected_;
  const absl::btree_set<NodeIndex>* within_ = nullptr;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_SEARCH_H_
