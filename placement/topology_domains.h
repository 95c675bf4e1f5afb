// Topology search: which domains of a topology key (the nodes that share
// its value, NodeResourceTable::Domains) a group may go into, and in what
// order the placer tries them.
//
// Promises: a domain is a candidate only when its free capacity covers the
// group, indexed resource by resource (a necessary condition, cheap on
// thousands of racks). The tightest comes first: least of the group's
// primary resource (PrimaryResource) left over, so big domains stay whole
// for big gangs; then the order domains were first seen. A group with
// bundles placed already may only go to their domain, whatever it has free.
// Deterministic: the same table and group give the same order.
#ifndef BERTH_PLACEMENT_TOPOLOGY_DOMAINS_H_
#define BERTH_PLACEMENT_TOPOLOGY_DOMAINS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "placement/node_resource_table.h"
#include "placement/placement_decision.h"
#include "placement/resource_set.h"

namespace berth {

// Whether a domain's summed `amounts` (free or total) cover `sum`, indexed
// resource by resource: a necessary condition for it to hold the demand.
bool DomainCovers(const std::array<int64_t, kNumIndexedResources>& amounts, const ResourceSet& sum);

// The domains of one key a group may go into, best first.
class DomainCandidates {
 public:
  // The domains of `index` (the domains of `key`) that may take `need`; when
  // `already_placed` is not empty, only the domain its bundles share (none
  // if they do not share one).
  DomainCandidates(const NodeResourceTable& table, const NodeResourceTable::DomainIndex& index,
                   const std::string& key, const ResourceSet& need,
                   const std::vector<BundlePlacement>& already_placed);

  bool empty() const { return heap_.empty(); }
  // Takes the best domain left. Not empty() first.
  const NodeResourceTable::Domain& PopBest();

 private:
  struct Choice {
    const NodeResourceTable::Domain* domain;
    int64_t left_over;  // of the group's primary resource, once it is in
    size_t seen;        // NodeResourceTable::DomainIndex order
  };
  static bool Worse(const Choice& a, const Choice& b);

  // A heap (std::make_heap) by Worse: a decision usually takes the first
  // domain it tries, so sorting thousands of racks would be most of its cost.
  std::vector<Choice> heap_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_TOPOLOGY_DOMAINS_H_
