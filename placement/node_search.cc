#include "placement/node_search.h"

#include <algorithm>
#include <string>
#include <utility>

#include "placement/node_filters.h"

namespace berth {

IndexedResource PrimaryResource(const ResourceSet& sum) {
  if (!sum.Get(kGpu).IsZero()) return IndexedResource::kGpu;
  if (!sum.Get(kCpu).IsZero() || sum.Get(kMemory).IsZero()) return IndexedResource::kCpu;
  return IndexedResource::kMemory;
}

NodeSearch::NodeSearch(const NodeResourceTable& table, const PlacementGroupSpec& spec,
                       NodeScorer* scorer, const absl::flat_hash_set<NodeIndex>* avoid)
    : table_(table),
      spec_(spec),
      scorer_(scorer),
      avoid_(avoid),
      rejected_(NodeFilters().size(), 0) {}

NodeSearch::Demand NodeSearch::MakeDemand(std::vector<uint32_t> bundles) const {
  Demand d;
  d.bundles = std::move(bundles);
  // The spec's total does not overflow, so no subset sum does.
  for (uint32_t b : d.bundles) d.sum.Add(spec_.bundles()[b].resources).IgnoreError();
  return d;
}

std::vector<std::vector<const NodeResourceTable::Pool*>> NodeSearch::CandidatePools(
    const Demand& d) const {
  const std::optional<std::vector<std::string>> allowed =
      AllowedAcceleratorTypes(spec_.bundles(), d.bundles);

  std::vector<const NodeResourceTable::Pool*> pools;
  if (allowed) {
    for (const std::string& type : *allowed) {
      if (const NodeResourceTable::Pool* p = table_.FindPool(type)) pools.push_back(p);
    }
  } else {
    for (const NodeResourceTable::Pool& p : table_.pools()) pools.push_back(&p);
  }
  const bool wants_gpu = !d.sum.Get(kGpu).IsZero();
  std::vector<std::vector<const NodeResourceTable::Pool*>> tiers(2);
  for (const NodeResourceTable::Pool* p : pools) {
    if (wants_gpu && !p->has_gpus) continue;
    tiers[!wants_gpu && p->has_gpus ? 1 : 0].push_back(p);
  }
  return tiers;
}

bool NodeSearch::Fits(NodeIndex index, const Demand& d, Capacity capacity) {
  if (capacity == Capacity::kFree && avoid_ != nullptr && avoid_->contains(index)) return false;
  const FilterInput in{table_, spec_, d.bundles, d.sum, capacity == Capacity::kTotal};
  const std::vector<const NodeFilter*>& filters = NodeFilters();
  for (size_t f = 0; f < filters.size(); ++f) {
    if (!filters[f]->Passes(in, index)) {
      ++rejected_[f];
      return false;
    }
  }
  return true;
}

std::optional<NodeIndex> NodeSearch::FindNode(const Demand& d, Preference preference,
                                              Capacity capacity, const Constraints& constraints) {
  if (constraints.only) {
    const NodeIndex n = *constraints.only;
    const NodeResourceTable::Node& node = table_.node(n);
    if (node.removed || node.state != NodeState::kAlive || !Fits(n, d, capacity)) {
      return std::nullopt;
    }
    return n;
  }
  // One ranking path: the configured scorer ranks searches over free
  // capacity; the placer's index-order ranking the others, and all of them
  // without a scorer.
  IndexOrderRanking builtin(preference == Preference::kBestFit
                                ? IndexOrderRanking::Order::kBestFit
                                : IndexOrderRanking::Order::kMostFree,
                            capacity == Capacity::kTotal);
  NodeScorer& ranking = scorer_ != nullptr && capacity == Capacity::kFree ? *scorer_ : builtin;
  ScoredDemand demand{d.sum, {}, PrimaryResource(d.sum), 0};
  demand.primary_amount = NodeResourceTable::IndexKey(d.sum, demand.primary);
  for (uint32_t b : d.bundles) demand.bundle_gpus.push_back(spec_.bundles()[b].resources.Get(kGpu));
  auto fits = [&](NodeIndex n) {
    return (constraints.exclude == nullptr || !constraints.exclude->contains(n)) &&
           Fits(n, d, capacity);
  };
  for (const auto& tier : CandidatePools(d)) {
    if (within_ == nullptr) {
      if (std::optional<NodeIndex> best = ranking.Best(table_, tier, demand, fits)) return best;
      continue;
    }
    // A topology domain: its few nodes are scored one by one (ties to the
    // lowest index, as Best breaks them).
    std::optional<std::pair<double, NodeIndex>> best;
    for (NodeIndex n : *within_) {
      const NodeResourceTable::Pool* pool = &table_.pools()[table_.node(n).pool];
      if (std::find(tier.begin(), tier.end(), pool) == tier.end() || !fits(n)) continue;
      const double score = ranking.Score(table_, n, demand);
      if (!best || score > best->first) best = {score, n};
    }
    if (best) return best->second;
  }
  return std::nullopt;
}

}  // namespace berth
