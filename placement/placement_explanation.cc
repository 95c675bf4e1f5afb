#include "placement/placement_explanation.h"

#include <algorithm>
#include <array>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "placement/topology_domains.h"

namespace berth {
namespace {

// The nodes a demand's shortfall is measured over (ALIVE, in the demand's
// pools, matching every bundle's selector), and the most one of them has of
// a resource, in totals or free.
class ShortfallScan {
 public:
  ShortfallScan(const NodeSearch& search, const NodeSearch::Demand& d, bool total)
      : table_(search.table()),
        spec_(search.spec()),
        demand_(d),
        total_(total),
        selected_(std::any_of(d.bundles.begin(), d.bundles.end(),
                              [&](uint32_t b) { return !spec_.bundles()[b].selector.empty(); })) {
    for (const auto& tier : search.CandidatePools(d))
      pools_.insert(pools_.end(), tier.begin(), tier.end());
  }

  bool AnyCandidate() const {
    return Any([](NodeIndex) { return true; });
  }

  // The most of `name` one candidate has. Only a resource no node has enough
  // of is named, so the scan stops at the first node that has `amount`.
  Quantity Most(const std::string& name, Quantity amount) const {
    for (int r = 0; r < kNumIndexedResources; ++r) {
      if (IndexedResourceName(static_cast<IndexedResource>(r)) == name) {
        return MostIndexed(r, name, amount);
      }
    }
    Quantity best;
    Any([&](NodeIndex n) {
      best = std::max(best, Have(n, name));
      return !(best < amount);
    });
    return best;
  }

 private:
  bool Candidate(NodeIndex n) const {
    if (!selected_) return true;
    for (uint32_t b : demand_.bundles) {
      if (!spec_.bundles()[b].selector.Matches(table_.node(n).labels)) return false;
    }
    return true;
  }

  // What one node has of it: free GPU shares scattered over instances do
  // not add up to one request.
  Quantity Have(NodeIndex n, const std::string& name) const {
    const NodeResourceTable::Node& node = table_.node(n);
    if (total_) return node.total.Get(name);
    return name == kGpu ? node.gpus.LargestRequest() : node.available.Get(name);
  }

  // The first candidate, in pool order, for which `stop` holds.
  template <typename Stop>
  bool Any(Stop&& stop) const {
    for (const NodeResourceTable::Pool* pool : pools_) {
      for (const auto& [key, n] : pool->by_total[0]) {
        if (Candidate(n) && stop(n)) return true;
      }
    }
    return false;
  }

  // CPU, GPU and memory are scanned from the top of the pools' indices (a
  // node's free GPU request is at most its free GPUs), which on a full
  // cluster is most of them.
  Quantity MostIndexed(int r, const std::string& name, Quantity amount) const {
    Quantity best;
    for (const NodeResourceTable::Pool* pool : pools_) {
      const NodeResourceTable::OrderedNodes& order = total_ ? pool->by_total[r] : pool->by_free[r];
      for (auto it = order.rbegin(); it != order.rend() && best < amount; ++it) {
        if (!(best < Quantity::FromUnits(it->first))) break;
        if (Candidate(it->second)) best = std::max(best, Have(it->second, name));
      }
    }
    return best;
  }

  const NodeResourceTable& table_;
  const PlacementGroupSpec& spec_;
  const NodeSearch::Demand& demand_;
  const bool total_;
  const bool selected_;
  std::vector<const NodeResourceTable::Pool*> pools_;
};

}  // namespace

PlacementDecision PlacementExplainer::ExplainTopology(
    const std::vector<uint32_t>& order, const std::vector<BundlePlacement>& already_placed) {
  const std::string& key = search_.spec().topology().required;
  const NodeResourceTable::DomainIndex& index = table_.Domains(key);
  const Demand all = search_.MakeDemand(order);
  PlacementDecision d;
  d.outcome = PlacementOutcome::kInfeasible;
  PlacementReason& r = d.reason;
  r.domain.key = key;
  r.count = static_cast<uint32_t>(order.size());
  // The domain meant, and the first of the group's indexed resources it has
  // less of than the group needs, in `amounts`.
  auto name = [&](const NodeResourceTable::Domain& domain,
                  const std::array<int64_t, kNumIndexedResources>& amounts) {
    r.domain.value = domain.value;
    r.domain.lacks.reset();
    for (int i = 0; i < kNumIndexedResources; ++i) {
      const ResourceName resource(IndexedResourceName(static_cast<IndexedResource>(i)));
      const Quantity need = all.sum.Get(resource);
      if (amounts[i] < need.units()) {
        r.domain.lacks = PlacementReason::Amount{resource, need, Quantity::FromUnits(amounts[i])};
        return;
      }
    }
  };
  if (!already_placed.empty()) {
    DomainCandidates own(table_, index, key, all.sum, already_placed);
    d.outcome = PlacementOutcome::kRetryLater;
    r.waiting = true;
    if (own.empty()) {
      r.why = PlacementWhy::kDomainSplit;
      return d;
    }
    // What the domain could ever give besides what the group holds there:
    // when that is too little (its nodes are gone), the lost bundles can
    // never come back to it (infeasible here: the caller moves the group).
    const NodeResourceTable::Domain& domain = own.PopBest();
    std::array<int64_t, kNumIndexedResources> spare = domain.total;
    for (const BundlePlacement& placed : already_placed) {
      for (int i = 0; i < kNumIndexedResources; ++i) {
        spare[i] -= NodeResourceTable::IndexKey(placed.allocation.resources,
                                                static_cast<IndexedResource>(i));
      }
    }
    r.why = PlacementWhy::kDomainLost;
    name(domain, spare);
    if (r.domain.lacks) {
      d.outcome = PlacementOutcome::kInfeasible;
      r.waiting = false;
    } else {
      name(domain, domain.free);
    }
    return d;
  }
  // Most of the group's primary resource, in totals and free, decides
  // which domain is named.
  const int p = static_cast<int>(PrimaryResource(all.sum));
  const NodeResourceTable::Domain* largest = nullptr;
  const NodeResourceTable::Domain* freest = nullptr;
  bool could_hold = false;
  for (const NodeResourceTable::Domain& domain : index.domains) {
    if (domain.nodes.empty()) continue;
    if (largest == nullptr || domain.total[p] > largest->total[p]) largest = &domain;
    if (freest == nullptr || domain.free[p] > freest->free[p]) freest = &domain;
    could_hold = could_hold || DomainCovers(domain.total, all.sum);
  }
  if (largest == nullptr) {
    r.why = PlacementWhy::kNoDomainLabel;
    return d;
  }
  r.why = PlacementWhy::kNoDomain;
  if (!could_hold) {
    name(*largest, largest->total);
    return d;
  }
  d.outcome = PlacementOutcome::kRetryLater;
  r.waiting = true;
  name(*freest, freest->free);
  return d;
}

size_t PlacementExplainer::DistinctNodeMatching(const std::vector<uint32_t>& order,
                                                const absl::flat_hash_set<NodeIndex>& excluded) {
  // A bundle with at least as many candidates as there are bundles can always
  // be matched, so each candidate list stops at order.size() nodes.
  const size_t limit = order.size();
  std::vector<std::vector<NodeIndex>> candidates(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Demand one = search_.MakeDemand({order[i]});
    const IndexedResource primary = PrimaryResource(one.sum);
    const int64_t amount = NodeResourceTable::IndexKey(one.sum, primary);
    for (const auto& tier : search_.CandidatePools(one)) {
      for (const NodeResourceTable::Pool* pool : tier) {
        VisitDescending(pool->by_total[static_cast<int>(primary)], amount, [&](NodeIndex n) {
          if (!excluded.contains(n) && search_.Fits(n, one, Capacity::kTotal))
            candidates[i].push_back(n);
          return candidates[i].size() >= limit;
        });
      }
    }
  }
  // Kuhn's augmenting paths.
  absl::flat_hash_map<NodeIndex, size_t> owner;
  std::function<bool(size_t, absl::flat_hash_set<NodeIndex>&)> augment =
      [&](size_t i, absl::flat_hash_set<NodeIndex>& seen) {
        for (NodeIndex n : candidates[i]) {
          if (!seen.insert(n).second) continue;
          auto it = owner.find(n);
          if (it == owner.end() || augment(it->second, seen)) {
            owner[n] = i;
            return true;
          }
        }
        return false;
      };
  size_t matched = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    absl::flat_hash_set<NodeIndex> seen;
    if (augment(i, seen)) ++matched;
  }
  return matched;
}

PlacementDecision PlacementExplainer::Explain(const std::vector<uint32_t>& order,
                                              const absl::flat_hash_set<NodeIndex>& excluded,
                                              std::optional<NodeIndex> pinned) {
  PlacementDecision d;
  d.outcome = PlacementOutcome::kInfeasible;
  PlacementReason& r = d.reason;
  if (table_.alive_count() == 0) {
    r.why = PlacementWhy::kNoAliveNodes;
    return d;
  }
  for (uint32_t b : order) {
    Demand one = search_.MakeDemand({b});
    if (!search_.FindNode(one, Preference::kMostFree, Capacity::kTotal, {&excluded, pinned})) {
      const bool excluded_only =
          !excluded.empty() && search_.FindNode(one, Preference::kMostFree, Capacity::kTotal, {});
      r.demand = ReasonDemand(one);
      r.why = excluded_only ? PlacementWhy::kSpreadOwnNode : PlacementWhy::kShortfall;
      if (!excluded_only) NameShortfall(one, Capacity::kTotal, &r);
      return d;
    }
  }
  const Demand all = search_.MakeDemand(order);
  r.count = static_cast<uint32_t>(order.size());
  switch (search_.spec().strategy()) {
    case PlacementStrategy::kStrictPack:
      if (!search_.FindNode(all, Preference::kMostFree, Capacity::kTotal, {nullptr, pinned})) {
        r.why = PlacementWhy::kPackShortfall;
        r.demand = ReasonDemand(all);
        NameShortfall(all, Capacity::kTotal, &r);
        return d;
      }
      break;
    case PlacementStrategy::kStrictSpread:
      if (size_t m = DistinctNodeMatching(order, excluded); m < order.size()) {
        r.why = PlacementWhy::kTooFewDistinctNodes;
        r.found = static_cast<uint32_t>(m);
        r.besides_own = !excluded.empty();
        return d;
      }
      break;
    case PlacementStrategy::kPack:
    case PlacementStrategy::kSpread:
      if (!table_.AliveTotalCovers(all.sum)) {
        r.why = PlacementWhy::kClusterTotal;
        for (const auto& [name, amount] : all.sum.entries()) {
          if (table_.AliveTotal(name) < amount) {
            r.amount = {name, amount, table_.AliveTotal(name)};
            break;
          }
        }
        return d;
      }
      break;
  }
  d.outcome = PlacementOutcome::kRetryLater;
  r.waiting = true;
  for (uint32_t b : order) {
    Demand one = search_.MakeDemand({b});
    if (!search_.FindNode(one, Preference::kMostFree, Capacity::kFree, {&excluded, pinned})) {
      r.why = PlacementWhy::kShortfall;
      r.demand = ReasonDemand(one);
      NameShortfall(one, Capacity::kFree, &r);
      return d;
    }
  }
  r.why = PlacementWhy::kNotTogether;
  r.strategy = search_.spec().strategy();
  r.demand = ReasonDemand(all);
  return d;
}

PlacementReason::Demand PlacementExplainer::ReasonDemand(const Demand& d) const {
  PlacementReason::Demand out;
  out.bundles.assign(d.bundles.begin(), d.bundles.end());
  out.sum = d.sum;
  for (uint32_t b : d.bundles) {
    const LabelSelector& s = search_.spec().bundles()[b].selector;
    if (!s.empty()) out.selectors.push_back(s);
  }
  return out;
}

void PlacementExplainer::NameShortfall(const Demand& d, Capacity capacity,
                                       PlacementReason* r) const {
  const ShortfallScan candidates(search_, d, capacity == Capacity::kTotal);
  if (!candidates.AnyCandidate()) {
    r->gap = PlacementReason::Gap::kNoMatchingNode;
    return;
  }
  for (const auto& [name, amount] : d.sum.entries()) {
    if (PinnedAcceleratorType(name)) continue;
    const Quantity best = candidates.Most(name.str(), amount);
    if (best < amount) {
      r->gap = PlacementReason::Gap::kTooLittle;
      r->amount = {name, amount, best};
      return;
    }
  }
  r->gap = PlacementReason::Gap::kNotAtOnce;
}

}  // namespace berth
