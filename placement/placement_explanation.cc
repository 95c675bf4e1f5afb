#include "placement/placement_explanation.h"

#include <algorithm>
#include <array>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/topology_domains.h"

namespace berth {
namespace {

std::string FormatAmount(absl::string_view name, Quantity q) {
  return absl::StrCat(name, ": ", name == kMemory ? FormatMemory(q) : q.ToString());
}

// The accelerator types a resource set pins (via `accelerator_type:<T>`).
std::vector<std::string> PinnedAcceleratorTypes(const ResourceSet& set) {
  std::vector<std::string> types;
  for (const auto& [name, amount] : set.entries()) {
    if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
      types.emplace_back(*type);
    }
  }
  return types;
}

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
  const std::string what = absl::StrCat("topology.required ", key, ": ");
  // What a domain has of the group's indexed resources, in `amounts`.
  auto lack = [&](const NodeResourceTable::Domain& domain,
                  const std::array<int64_t, kNumIndexedResources>& amounts, bool free) {
    for (int r = 0; r < kNumIndexedResources; ++r) {
      const auto res = static_cast<IndexedResource>(r);
      const Quantity need = all.sum.Get(IndexedResourceName(res));
      if (amounts[r] < need.units()) {
        return absl::StrCat(" (", FormatAmount(IndexedResourceName(res), need), " needed; ", key,
                            "=", domain.value, " has ",
                            FormatAmount(IndexedResourceName(res), Quantity::FromUnits(amounts[r])),
                            free ? " free)" : " in all)");
      }
    }
    return std::string(free ? " (enough in all, but not on nodes that each take their bundles)"
                            : "");
  };
  if (!already_placed.empty()) {
    DomainCandidates own(table_, index, key, all.sum, already_placed);
    if (own.empty()) {
      d.outcome = PlacementOutcome::kRetryLater;
      d.reason = absl::StrCat("waiting for resources: ", what,
                              "the group's placed bundles no longer share one domain");
      return d;
    }
    // What the domain could ever give besides what the group holds there:
    // when that is too little (its nodes are gone), the lost bundles can
    // never come back to it (infeasible here: the caller moves the group).
    const NodeResourceTable::Domain& domain = own.PopBest();
    std::array<int64_t, kNumIndexedResources> spare = domain.total;
    for (const BundlePlacement& placed : already_placed) {
      for (int r = 0; r < kNumIndexedResources; ++r) {
        spare[r] -= NodeResourceTable::IndexKey(placed.allocation.resources,
                                                static_cast<IndexedResource>(r));
      }
    }
    const std::string never = lack(domain, spare, false);
    d.outcome = never.empty() ? PlacementOutcome::kRetryLater : PlacementOutcome::kInfeasible;
    d.reason = never.empty()
                   ? absl::StrCat("waiting for resources: ", what, order.size(),
                                  " lost bundles wait for room in the group's domain",
                                  lack(domain, domain.free, true))
                   : absl::StrCat(what, "the group's domain can no longer hold its ", order.size(),
                                  " lost bundles beside the ones it holds", never);
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
    d.reason = absl::StrCat(what, "no ALIVE node carries the label");
    return d;
  }
  if (!could_hold) {
    d.reason = absl::StrCat(what, "no domain can ever hold the group's ", order.size(), " bundles",
                            lack(*largest, largest->total, false));
    return d;
  }
  d.outcome = PlacementOutcome::kRetryLater;
  d.reason = absl::StrCat("waiting for resources: ", what, "no domain has room for the group's ",
                          order.size(), " bundles now", lack(*freest, freest->free, true));
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
  if (table_.alive_count() == 0) {
    d.reason = "no ALIVE nodes in the cluster";
    return d;
  }
  for (uint32_t b : order) {
    Demand one = search_.MakeDemand({b});
    if (!search_.FindNode(one, Preference::kMostFree, Capacity::kTotal, {&excluded, pinned})) {
      const bool excluded_only =
          !excluded.empty() && search_.FindNode(one, Preference::kMostFree, Capacity::kTotal, {});
      d.reason = excluded_only
                     ? absl::StrCat("STRICT_SPREAD: ", DescribeDemand(one),
                                    " on a node of its own; every ALIVE node that could hold it "
                                    "already holds one of the group's bundles")
                     : DescribeShortfall(one, Capacity::kTotal);
      return d;
    }
  }
  const Demand all = search_.MakeDemand(order);
  switch (search_.spec().strategy()) {
    case PlacementStrategy::kStrictPack:
      if (!search_.FindNode(all, Preference::kMostFree, Capacity::kTotal, {nullptr, pinned})) {
        d.reason = absl::StrCat("STRICT_PACK: ", DescribeShortfall(all, Capacity::kTotal));
        return d;
      }
      break;
    case PlacementStrategy::kStrictSpread:
      if (size_t m = DistinctNodeMatching(order, excluded); m < order.size()) {
        d.reason = absl::StrCat("STRICT_SPREAD: needs ", order.size(),
                                " distinct nodes that each hold a bundle; only ", m,
                                excluded.empty() ? "" : " (besides the group's own nodes)",
                                " can be found among the ALIVE nodes");
        return d;
      }
      break;
    case PlacementStrategy::kPack:
    case PlacementStrategy::kSpread:
      if (!table_.AliveTotalCovers(all.sum)) {
        for (const auto& [name, amount] : all.sum.entries()) {
          if (table_.AliveTotal(name) < amount) {
            d.reason = absl::StrCat("the group needs ", FormatAmount(name, amount),
                                    " in all; the ALIVE nodes have ",
                                    FormatAmount(name, table_.AliveTotal(name)), " in all");
            break;
          }
        }
        return d;
      }
      break;
  }
  d.outcome = PlacementOutcome::kRetryLater;
  for (uint32_t b : order) {
    Demand one = search_.MakeDemand({b});
    if (!search_.FindNode(one, Preference::kMostFree, Capacity::kFree, {&excluded, pinned})) {
      d.reason = absl::StrCat("waiting for resources: ", DescribeShortfall(one, Capacity::kFree));
      return d;
    }
  }
  d.reason = absl::StrCat("waiting for resources: ", order.size(), " bundles (",
                          PlacementStrategyName(search_.spec().strategy()), ", ",
                          all.sum.ToString(), " in all) do not fit the free capacity together");
  return d;
}

std::string PlacementExplainer::DescribeDemand(const Demand& d) const {
  const ResourceSet shown = WithoutAcceleratorTypes(d.sum);
  std::string text = d.bundles.size() == 1
                         ? absl::StrCat("bundle ", d.bundles[0], " needs ")
                         : absl::StrCat(d.bundles.size(), " bundles need, on one node, ");
  absl::StrAppend(&text, absl::StrJoin(shown.entries(), ", ",
                                       [](std::string* out, const ResourceSet::Entry& e) {
                                         out->append(FormatAmount(e.first, e.second));
                                       }));
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  if (!types.empty()) absl::StrAppend(&text, " with accelerator_type ", absl::StrJoin(types, "+"));
  for (uint32_t b : d.bundles) {
    const LabelSelector& s = search_.spec().bundles()[b].selector;
    if (!s.empty()) absl::StrAppend(&text, " on nodes matching '", s.ToString(), "'");
  }
  return text;
}

std::string PlacementExplainer::DescribeShortfall(const Demand& d, Capacity capacity) const {
  const bool total = capacity == Capacity::kTotal;
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  const std::string scope = types.size() == 1 ? absl::StrCat(types[0], " ") : "";
  std::string text = DescribeDemand(d);
  const ShortfallScan candidates(search_, d, total);
  if (!candidates.AnyCandidate()) {
    return absl::StrCat(text, "; no ALIVE ", scope, "node",
                        d.sum.Get(kGpu).IsZero() ? "" : " with GPUs", " matches");
  }
  for (const auto& [name, amount] : d.sum.entries()) {
    if (PinnedAcceleratorType(name)) continue;
    const Quantity best = candidates.Most(name.str(), amount);
    if (best < amount) {
      return absl::StrCat(text, "; the ", total ? "largest " : "most free ", scope, "node has ",
                          FormatAmount(name, best), total ? "" : " free");
    }
  }
  return absl::StrCat(text, "; no ", scope, "node has all of it ", total ? "in total" : "free",
                      " at once");
}

}  // namespace berth
