#include "placement/topology_domains.h"

#include <algorithm>
#include <tuple>

#include "placement/node_search.h"

namespace berth {

bool DomainCovers(const std::array<int64_t, kNumIndexedResources>& amounts,
                  const ResourceSet& sum) {
  for (int r = 0; r < kNumIndexedResources; ++r) {
    if (amounts[r] < NodeResourceTable::IndexKey(sum, static_cast<IndexedResource>(r))) {
      return false;
    }
  }
  return true;
}

// Heap order of the domains to try: the least left over first, then the
// order they were first seen.
bool DomainCandidates::Worse(const Choice& a, const Choice& b) {
  return std::tie(a.left_over, a.seen) > std::tie(b.left_over, b.seen);
}

DomainCandidates::DomainCandidates(const NodeResourceTable& table,
                                   const NodeResourceTable::DomainIndex& index,
                                   const std::string& key, const ResourceSet& need,
                                   const std::vector<BundlePlacement>& already_placed) {
  if (!already_placed.empty()) {
    // Rescheduled bundles join the others' domain, or none of this key.
    const Labels& first = table.node(already_placed[0].allocation.node).labels;
    auto value = first.find(key);
    if (value == first.end()) return;
    for (const BundlePlacement& p : already_placed) {
      const Labels& labels = table.node(p.allocation.node).labels;
      auto v = labels.find(key);
      if (v == labels.end() || v->second != value->second) return;
    }
    auto d = index.by_value.find(value->second);
    if (d != index.by_value.end()) heap_.push_back({&index.domains[d->second], 0, d->second});
    return;
  }
  const IndexedResource primary = PrimaryResource(need);
  for (size_t i = 0; i < index.domains.size(); ++i) {
    const NodeResourceTable::Domain& d = index.domains[i];
    if (d.nodes.empty() || !DomainCovers(d.free, need)) continue;
    const int p = static_cast<int>(primary);
    heap_.push_back({&d, d.free[p] - NodeResourceTable::IndexKey(need, primary), i});
  }
  std::make_heap(heap_.begin(), heap_.end(), Worse);
}

const NodeResourceTable::Domain& DomainCandidates::PopBest() {
  std::pop_heap(heap_.begin(), heap_.end(), Worse);
  const NodeResourceTable::Domain& best = *heap_.back().domain;
  heap_.pop_back();
  return best;
}

}  // namespace berth
