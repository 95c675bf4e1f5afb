#include "placement/bundle_placer.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {
namespace {

// The resource a demand is ranked by: GPUs are the scarce resource, then CPU,
// then memory. A demand of custom resources only is ranked by CPU from 0.
IndexedResource PrimaryResource(const ResourceSet& sum) {
  if (!sum.Get(kGpu).IsZero()) return IndexedResource::kGpu;
  if (!sum.Get(kCpu).IsZero() || sum.Get(kMemory).IsZero()) return IndexedResource::kCpu;
  return IndexedResource::kMemory;
}

std::string FormatAmount(absl::string_view name, Quantity q) {
  return absl::StrCat(name, ": ", name == kMemory ? FormatMemory(q) : q.ToString());
}

// The accelerator types a resource set pins (via `accelerator_type:<T>`).
std::vector<std::string> PinnedAcceleratorTypes(const ResourceSet& set) {
  std::vector<std::string> types;
  for (const auto& [name, amount] : set.entries()) {
    if (absl::StartsWith(name, kAcceleratorResourcePrefix)) {
      types.push_back(name.substr(kAcceleratorResourcePrefix.size()));
    }
  }
  return types;
}

// Bundles are placed largest first, so a node's whole GPUs were taken in
// that order; `made` (in bundle order) gets the same instances back in
// bundle order. Each instance is wholly this call's, so the table's state is
// unchanged. Fractional shares keep their instance (it may be shared).
void HandOutWholeGpusInBundleOrder(std::vector<BundlePlacement>* made) {
  if (made->size() < 2) return;
  auto whole = [](const Allocation& a) {
    return !a.gpus.empty() && std::all_of(a.gpus.begin(), a.gpus.end(), [](const GpuShare& g) {
      return g.amount == Quantity::Whole(1);
    });
  };
  absl::flat_hash_map<NodeIndex, std::vector<Allocation*>> by_node;
  for (BundlePlacement& p : *made) {
    if (whole(p.allocation)) by_node[p.allocation.node].push_back(&p.allocation);
  }
  for (auto& [node, allocations] : by_node) {
    if (allocations.size() < 2) continue;
    std::vector<uint32_t> ids;
    for (const Allocation* a : allocations)
      for (const GpuShare& g : a->gpus) ids.push_back(g.index);
    std::sort(ids.begin(), ids.end());
    size_t next = 0;
    for (Allocation* a : allocations)
      for (GpuShare& g : a->gpus) g.index = ids[next++];
  }
}

// Whether a domain's summed `amounts` (free or total) cover `sum`, indexed
// resource by resource: a necessary condition for it to hold the demand.
bool Covers(const std::array<int64_t, kNumIndexedResources>& amounts, const ResourceSet& sum) {
  for (int r = 0; r < kNumIndexedResources; ++r) {
    if (amounts[r] < NodeResourceTable::IndexKey(sum, static_cast<IndexedResource>(r))) {
      return false;
    }
  }
  return true;
}

}  // namespace

// Heap order of the domains to try: the least left over first, then the
// order they were first seen.
bool BundlePlacer::WorseDomain(const DomainChoice& a, const DomainChoice& b) {
  return std::tie(a.left_over, a.seen) > std::tie(b.left_over, b.seen);
}

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

BundlePlacer::Demand BundlePlacer::MakeDemand(Call& call, std::vector<uint32_t> bundles) const {
  Demand d;
  d.bundles = std::move(bundles);
  // The spec's total does not overflow, so no subset sum does.
  for (uint32_t b : d.bundles) d.sum.Add(call.spec.bundles()[b].resources).IgnoreError();
  return d;
}

std::vector<std::vector<const NodeResourceTable::Pool*>> BundlePlacer::CandidatePools(
    Call& call, const Demand& d) const {
  const std::optional<std::vector<std::string>> allowed =
      AllowedAcceleratorTypes(call.spec.bundles(), d.bundles);

  std::vector<const NodeResourceTable::Pool*> pools;
  if (allowed) {
    for (const std::string& type : *allowed) {
      if (const NodeResourceTable::Pool* p = table_->FindPool(type)) pools.push_back(p);
    }
  } else {
    for (const NodeResourceTable::Pool& p : table_->pools()) pools.push_back(&p);
  }
  const bool wants_gpu = !d.sum.Get(kGpu).IsZero();
  std::vector<std::vector<const NodeResourceTable::Pool*>> tiers(2);
  for (const NodeResourceTable::Pool* p : pools) {
    if (wants_gpu && !p->has_gpus) continue;
    tiers[!wants_gpu && p->has_gpus ? 1 : 0].push_back(p);
  }
  return tiers;
}

bool BundlePlacer::Fits(Call& call, NodeIndex index, const Demand& d, Capacity capacity) const {
  if (capacity == Capacity::kFree && avoid_ != nullptr && avoid_->contains(index)) return false;
  const FilterInput in{*table_, call.spec, d.bundles, d.sum, capacity == Capacity::kTotal};
  const std::vector<const NodeFilter*>& filters = NodeFilters();
  for (size_t f = 0; f < filters.size(); ++f) {
    if (!filters[f]->Passes(in, index)) {
      ++call.rejected[f];
      return false;
    }
  }
  return true;
}

std::optional<NodeIndex> BundlePlacer::FindNode(Call& call, const Demand& d, Preference preference,
                                                Capacity capacity,
                                                const Constraints& constraints) const {
  if (constraints.only) {
    const NodeIndex n = *constraints.only;
    const NodeResourceTable::Node& node = table_->node(n);
    if (node.removed || node.state != NodeState::kAlive || !Fits(call, n, d, capacity)) {
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
  for (uint32_t b : d.bundles)
    demand.bundle_gpus.push_back(call.spec.bundles()[b].resources.Get(kGpu));
  auto fits = [&](NodeIndex n) {
    return (constraints.exclude == nullptr || !constraints.exclude->contains(n)) &&
           Fits(call, n, d, capacity);
  };
  for (const auto& tier : CandidatePools(call, d)) {
    if (call.within == nullptr) {
      if (std::optional<NodeIndex> best = ranking.Best(*table_, tier, demand, fits)) return best;
      continue;
    }
    // A topology domain: its few nodes are scored one by one (ties to the
    // lowest index, as Best breaks them).
    std::optional<std::pair<double, NodeIndex>> best;
    for (NodeIndex n : *call.within) {
      const NodeResourceTable::Pool* pool = &table_->pools()[table_->node(n).pool];
      if (std::find(tier.begin(), tier.end(), pool) == tier.end() || !fits(n)) continue;
      const double score = ranking.Score(*table_, n, demand);
      if (!best || score > best->first) best = {score, n};
    }
    if (best) return best->second;
  }
  return std::nullopt;
}

absl::Status BundlePlacer::PlaceOnNode(Call& call, NodeIndex node, const Demand& d,
                                       std::vector<BundlePlacement>* out) {
  for (uint32_t b : d.bundles) {
    absl::StatusOr<Allocation> a = table_->Allocate(node, call.spec.bundles()[b].resources);
    if (!a.ok()) return a.status();
    out->push_back({b, *std::move(a)});
  }
  return absl::OkStatus();
}

bool BundlePlacer::PlacePack(Call& call, const std::vector<uint32_t>& order,
                             std::vector<BundlePlacement>* out) {
  std::vector<uint32_t> remaining = order;
  while (!remaining.empty()) {
    // The tightest node that takes everything left, if any: one node, least waste.
    Demand all = MakeDemand(call, remaining);
    if (std::optional<NodeIndex> n =
            FindNode(call, all, Preference::kBestFit, Capacity::kFree, {})) {
      return PlaceOnNode(call, *n, all, out).ok();
    }
    // Else open the roomiest node for the largest bundle and fill it.
    std::optional<NodeIndex> n = FindNode(call, MakeDemand(call, {remaining[0]}),
                                          Preference::kMostFree, Capacity::kFree, {});
    if (!n) return false;
    // Bundles with a selector fill it first: the others can go elsewhere,
    // they may not (rank i's selector in a train job).
    std::stable_partition(remaining.begin(), remaining.end(),
                          [&](uint32_t b) { return !call.spec.bundles()[b].selector.empty(); });
    std::vector<uint32_t> left;
    for (uint32_t b : remaining) {
      Demand one = MakeDemand(call, {b});
      if (Fits(call, *n, one, Capacity::kFree)) {
        if (!PlaceOnNode(call, *n, one, out).ok()) return false;
      } else {
        left.push_back(b);
      }
    }
    remaining = std::move(left);
  }
  return true;
}

bool BundlePlacer::PlaceSpread(Call& call, const std::vector<uint32_t>& order, bool strict,
                               const absl::flat_hash_set<NodeIndex>& excluded,
                               std::vector<BundlePlacement>* out) {
  absl::flat_hash_set<NodeIndex> used = excluded;
  for (uint32_t b : order) {
    Demand one = MakeDemand(call, {b});
    std::optional<NodeIndex> n =
        FindNode(call, one, Preference::kMostFree, Capacity::kFree, {&used, {}});
    // SPREAD falls back to a node the group already uses; STRICT_SPREAD may not.
    if (!n && !strict) n = FindNode(call, one, Preference::kMostFree, Capacity::kFree, {});
    if (!n || !PlaceOnNode(call, *n, one, out).ok()) return false;
    used.insert(*n);
  }
  return true;
}

absl::StatusOr<PlacementDecision> BundlePlacer::Place(
    const PlacementGroupSpec& spec, const std::vector<BundlePlacement>& already_placed) {
  Call call{spec, std::vector<uint64_t>(NodeFilters().size(), 0)};
  absl::StatusOr<PlacementDecision> decision = Place(call, already_placed);
  if (decision.ok()) {
    for (size_t f = 0; f < call.rejected.size(); ++f) {
      if (call.rejected[f] > 0)
        decision->rejected_by.emplace_back(NodeFilters()[f]->name(), call.rejected[f]);
    }
  }
  return decision;
}

absl::StatusOr<PlacementDecision> BundlePlacer::Place(
    Call& call, const std::vector<BundlePlacement>& already_placed) {
  const PlacementGroupSpec& spec = call.spec;
  const std::vector<Bundle>& bundles = spec.bundles();
  std::vector<bool> placed(bundles.size(), false);
  absl::flat_hash_set<NodeIndex> placed_nodes;
  for (size_t i = 0; i < already_placed.size(); ++i) {
    const uint32_t b = already_placed[i].bundle_index;
    if (b >= bundles.size() || placed[b]) {
      return absl::InvalidArgumentError(
          absl::StrCat("already_placed[", i, "].bundle_index: ", b,
                       b >= bundles.size() ? " is not a bundle of the group" : " is listed twice"));
    }
    placed[b] = true;
    placed_nodes.insert(already_placed[i].allocation.node);
  }
  std::optional<NodeIndex> pinned;
  if (spec.strategy() == PlacementStrategy::kStrictPack && !placed_nodes.empty()) {
    if (placed_nodes.size() > 1) {
      return absl::InvalidArgumentError(
          "already_placed: a STRICT_PACK group's bundles are on more than one node");
    }
    pinned = *placed_nodes.begin();
  }

  // Largest first (GPU, then CPU, then memory), bundle index on ties: stable.
  std::vector<uint32_t> order;
  for (uint32_t b = 0; b < bundles.size(); ++b) {
    if (!placed[b]) order.push_back(b);
  }
  auto size_key = [&](uint32_t b) {
    const ResourceSet& r = bundles[b].resources;
    return std::make_tuple(r.Get(kGpu), r.Get(kCpu), r.Get(kMemory));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return size_key(a) > size_key(b); });

  PlacementDecision decision;
  if (order.empty()) {
    decision.outcome = PlacementOutcome::kPlaced;
    return decision;
  }
  std::vector<BundlePlacement> made;
  bool ok = false;
  if (spec.topology().empty()) {
    ok = PlaceByStrategy(call, order, placed_nodes, pinned, &made);
  } else {
    for (const std::string& key : spec.topology().keys()) {
      if (std::optional<std::string> value =
              PlaceInDomain(call, key, order, already_placed, placed_nodes, pinned, &made)) {
        decision.topology_domain = absl::StrCat(key, "=", *value);
        ok = true;
        break;
      }
    }
    // A preferred topology settles for the whole cluster.
    if (!ok && spec.topology().required.empty()) {
      ok = PlaceByStrategy(call, order, placed_nodes, pinned, &made);
    }
  }
  if (ok) {
    std::sort(made.begin(), made.end(), [](const BundlePlacement& a, const BundlePlacement& b) {
      return a.bundle_index < b.bundle_index;
    });
    HandOutWholeGpusInBundleOrder(&made);
    decision.outcome = PlacementOutcome::kPlaced;
    decision.placements = std::move(made);
    return decision;
  }
  // Undo partial work: Release is the exact inverse of Allocate.
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    table_->Release(it->allocation).IgnoreError();
  }
  if (!explain_) return decision;  // kRetryLater, no reason
  const absl::flat_hash_set<NodeIndex> none;
  PlacementDecision why =
      Explain(call, order,
              spec.strategy() == PlacementStrategy::kStrictSpread ? placed_nodes : none, pinned);
  // A group the whole cluster could not take is not helped by a domain.
  if (spec.topology().required.empty() || why.outcome == PlacementOutcome::kInfeasible) return why;
  return ExplainTopology(call, order, already_placed);
}

bool BundlePlacer::PlaceByStrategy(Call& call, const std::vector<uint32_t>& order,
                                   const absl::flat_hash_set<NodeIndex>& placed_nodes,
                                   std::optional<NodeIndex> pinned,
                                   std::vector<BundlePlacement>* out) {
  switch (call.spec.strategy()) {
    case PlacementStrategy::kPack:
      return PlacePack(call, order, out);
    case PlacementStrategy::kSpread:
      return PlaceSpread(call, order, /*strict=*/false, placed_nodes, out);
    case PlacementStrategy::kStrictSpread:
      return PlaceSpread(call, order, /*strict=*/true, placed_nodes, out);
    case PlacementStrategy::kStrictPack: {
      Demand all = MakeDemand(call, order);
      std::optional<NodeIndex> n =
          FindNode(call, all, Preference::kBestFit, Capacity::kFree, {nullptr, pinned});
      return n && PlaceOnNode(call, *n, all, out).ok();
    }
  }
  return false;
}

std::vector<BundlePlacer::DomainChoice> BundlePlacer::CandidateDomains(
    const NodeResourceTable::DomainIndex& index, const std::string& key, const Demand& need,
    const std::vector<BundlePlacement>& already_placed) {
  std::vector<DomainChoice> choices;
  if (!already_placed.empty()) {
    // Rescheduled bundles join the others' domain, or none of this key.
    const Labels& first = table_->node(already_placed[0].allocation.node).labels;
    auto value = first.find(key);
    if (value == first.end()) return choices;
    for (const BundlePlacement& p : already_placed) {
      const Labels& labels = table_->node(p.allocation.node).labels;
      auto v = labels.find(key);
      if (v == labels.end() || v->second != value->second) return choices;
    }
    auto d = index.by_value.find(value->second);
    if (d != index.by_value.end()) choices.push_back({&index.domains[d->second], 0, d->second});
    return choices;
  }
  const IndexedResource primary = PrimaryResource(need.sum);
  for (size_t i = 0; i < index.domains.size(); ++i) {
    const NodeResourceTable::Domain& d = index.domains[i];
    if (d.nodes.empty() || !Covers(d.free, need.sum)) continue;
    const int p = static_cast<int>(primary);
    choices.push_back({&d, d.free[p] - NodeResourceTable::IndexKey(need.sum, primary), i});
  }
  // A heap, best on top: a decision usually takes the first domain it
  // tries, so sorting thousands of racks would be most of its cost.
  std::make_heap(choices.begin(), choices.end(), WorseDomain);
  return choices;
}

std::optional<std::string> BundlePlacer::PlaceInDomain(
    Call& call, const std::string& key, const std::vector<uint32_t>& order,
    const std::vector<BundlePlacement>& already_placed,
    const absl::flat_hash_set<NodeIndex>& placed_nodes, std::optional<NodeIndex> pinned,
    std::vector<BundlePlacement>* out) {
  const NodeResourceTable::DomainIndex& index = table_->Domains(key);
  std::vector<DomainChoice> heap =
      CandidateDomains(index, key, MakeDemand(call, order), already_placed);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), WorseDomain);
    const DomainChoice choice = heap.back();
    heap.pop_back();
    call.within = &choice.domain->nodes;
    std::vector<BundlePlacement> made;
    const bool ok = PlaceByStrategy(call, order, placed_nodes, pinned, &made);
    call.within = nullptr;
    if (ok) {
      out->insert(out->end(), made.begin(), made.end());
      return choice.domain->value;
    }
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      table_->Release(it->allocation).IgnoreError();
    }
  }
  return std::nullopt;
}

PlacementDecision BundlePlacer::ExplainTopology(
    Call& call, const std::vector<uint32_t>& order,
    const std::vector<BundlePlacement>& already_placed) {
  const std::string& key = call.spec.topology().required;
  const NodeResourceTable::DomainIndex& index = table_->Domains(key);
  const Demand all = MakeDemand(call, order);
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
    std::vector<DomainChoice> own = CandidateDomains(index, key, all, already_placed);
    if (own.empty()) {
      d.outcome = PlacementOutcome::kRetryLater;
      d.reason = absl::StrCat("waiting for resources: ", what,
                              "the group's placed bundles no longer share one domain");
      return d;
    }
    // What the domain could ever give besides what the group holds there:
    // when that is too little (its nodes are gone), the lost bundles can
    // never come back to it (infeasible here: the caller moves the group).
    const NodeResourceTable::Domain& domain = *own[0].domain;
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
    could_hold = could_hold || Covers(domain.total, all.sum);
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

size_t BundlePlacer::DistinctNodeMatching(Call& call, const std::vector<uint32_t>& order,
                                          const absl::flat_hash_set<NodeIndex>& excluded) const {
  // A bundle with at least as many candidates as there are bundles can always
  // be matched, so each candidate list stops at order.size() nodes.
  const size_t limit = order.size();
  std::vector<std::vector<NodeIndex>> candidates(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Demand one = MakeDemand(call, {order[i]});
    const IndexedResource primary = PrimaryResource(one.sum);
    const int64_t amount = NodeResourceTable::IndexKey(one.sum, primary);
    for (const auto& tier : CandidatePools(call, one)) {
      for (const NodeResourceTable::Pool* pool : tier) {
        VisitDescending(pool->by_total[static_cast<int>(primary)], amount, [&](NodeIndex n) {
          if (!excluded.contains(n) && Fits(call, n, one, Capacity::kTotal))
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

PlacementDecision BundlePlacer::Explain(Call& call, const std::vector<uint32_t>& order,
                                        const absl::flat_hash_set<NodeIndex>& excluded,
                                        std::optional<NodeIndex> pinned) const {
  PlacementDecision d;
  d.outcome = PlacementOutcome::kInfeasible;
  if (table_->alive_count() == 0) {
    d.reason = "no ALIVE nodes in the cluster";
    return d;
  }
  for (uint32_t b : order) {
    Demand one = MakeDemand(call, {b});
    if (!FindNode(call, one, Preference::kMostFree, Capacity::kTotal, {&excluded, pinned})) {
      const bool excluded_only =
          !excluded.empty() && FindNode(call, one, Preference::kMostFree, Capacity::kTotal, {});
      d.reason = excluded_only
                     ? absl::StrCat("STRICT_SPREAD: ", DescribeDemand(call, one),
                                    " on a node of its own; every ALIVE node that could hold it "
                                    "already holds one of the group's bundles")
                     : DescribeShortfall(call, one, Capacity::kTotal);
      return d;
    }
  }
  const Demand all = MakeDemand(call, order);
  switch (call.spec.strategy()) {
    case PlacementStrategy::kStrictPack:
      if (!FindNode(call, all, Preference::kMostFree, Capacity::kTotal, {nullptr, pinned})) {
        d.reason = absl::StrCat("STRICT_PACK: ", DescribeShortfall(call, all, Capacity::kTotal));
        return d;
      }
      break;
    case PlacementStrategy::kStrictSpread:
      if (size_t m = DistinctNodeMatching(call, order, excluded); m < order.size()) {
        d.reason = absl::StrCat("STRICT_SPREAD: needs ", order.size(),
                                " distinct nodes that each hold a bundle; only ", m,
                                excluded.empty() ? "" : " (besides the group's own nodes)",
                                " can be found among the ALIVE nodes");
        return d;
      }
      break;
    case PlacementStrategy::kPack:
    case PlacementStrategy::kSpread:
      if (!table_->AliveTotalCovers(all.sum)) {
        for (const auto& [name, amount] : all.sum.entries()) {
          if (table_->AliveTotal(name) < amount) {
            d.reason = absl::StrCat("the group needs ", FormatAmount(name, amount),
                                    " in all; the ALIVE nodes have ",
                                    FormatAmount(name, table_->AliveTotal(name)), " in all");
            break;
          }
        }
        return d;
      }
      break;
  }
  d.outcome = PlacementOutcome::kRetryLater;
  for (uint32_t b : order) {
    Demand one = MakeDemand(call, {b});
    if (!FindNode(call, one, Preference::kMostFree, Capacity::kFree, {&excluded, pinned})) {
      d.reason =
          absl::StrCat("waiting for resources: ", DescribeShortfall(call, one, Capacity::kFree));
      return d;
    }
  }
  d.reason = absl::StrCat("waiting for resources: ", order.size(), " bundles (",
                          PlacementStrategyName(call.spec.strategy()), ", ", all.sum.ToString(),
                          " in all) do not fit the free capacity together");
  return d;
}

std::string BundlePlacer::DescribeDemand(Call& call, const Demand& d) const {
  ResourceSet shown;
  for (const auto& [name, amount] : d.sum.entries()) {
    if (!absl::StartsWith(name, kAcceleratorResourcePrefix)) shown.Set(name, amount);
  }
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
    const LabelSelector& s = call.spec.bundles()[b].selector;
    if (!s.empty()) absl::StrAppend(&text, " on nodes matching '", s.ToString(), "'");
  }
  return text;
}

std::string BundlePlacer::DescribeShortfall(Call& call, const Demand& d, Capacity capacity) const {
  const bool total = capacity == Capacity::kTotal;
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  const std::string scope = types.size() == 1 ? absl::StrCat(types[0], " ") : "";
  std::string text = DescribeDemand(call, d);
  // Candidate nodes: ALIVE, in the right pools, matching the selectors.
  std::vector<const NodeResourceTable::Pool*> pools;
  for (const auto& tier : CandidatePools(call, d))
    pools.insert(pools.end(), tier.begin(), tier.end());
  const bool selected = std::any_of(d.bundles.begin(), d.bundles.end(), [&](uint32_t b) {
    return !call.spec.bundles()[b].selector.empty();
  });
  auto candidate = [&](NodeIndex n) {
    if (!selected) return true;
    for (uint32_t b : d.bundles) {
      if (!call.spec.bundles()[b].selector.Matches(table_->node(n).labels)) return false;
    }
    return true;
  };
  // The first candidate, in pool order, for which `stop` holds.
  auto any = [&](auto&& stop) {
    for (const NodeResourceTable::Pool* pool : pools) {
      for (const auto& [key, n] : pool->by_total[0]) {
        if (candidate(n) && stop(n)) return true;
      }
    }
    return false;
  };
  if (!any([](NodeIndex) { return true; })) {
    return absl::StrCat(text, "; no ALIVE ", scope, "node",
                        d.sum.Get(kGpu).IsZero() ? "" : " with GPUs", " matches");
  }
  for (const ResourceSet::Entry& entry : d.sum.entries()) {
    // Named, not bound: C++17 lambdas cannot capture structured bindings.
    const std::string& name = entry.first;
    const Quantity amount = entry.second;
    if (absl::StartsWith(name, kAcceleratorResourcePrefix)) continue;
    // What one node has of it: free GPU shares scattered over instances do
    // not add up to one request.
    auto have = [&](NodeIndex n) {
      const NodeResourceTable::Node& node = table_->node(n);
      if (total) return node.total.Get(name);
      return name == kGpu ? node.gpus.LargestRequest() : node.available.Get(name);
    };
    // Only a resource no node has enough of is named: the scan of the
    // others stops at the first node that has it. CPU, GPU and memory are
    // scanned from the top of the pools' indices (a node's free GPU request
    // is at most its free GPUs), which on a full cluster is most of them.
    Quantity best;
    std::optional<int> indexed;
    for (int r = 0; r < kNumIndexedResources; ++r) {
      if (IndexedResourceName(static_cast<IndexedResource>(r)) == name) indexed = r;
    }
    if (indexed) {
      for (const NodeResourceTable::Pool* pool : pools) {
        const NodeResourceTable::OrderedNodes& order =
            total ? pool->by_total[*indexed] : pool->by_free[*indexed];
        for (auto it = order.rbegin(); it != order.rend() && best < amount; ++it) {
          if (!(best < Quantity::FromUnits(it->first))) break;
          if (candidate(it->second)) best = std::max(best, have(it->second));
        }
      }
    } else {
      any([&](NodeIndex n) {
        best = std::max(best, have(n));
        return !(best < amount);
      });
    }
    if (best < amount) {
      return absl::StrCat(text, "; the ", total ? "largest " : "most free ", scope, "node has ",
                          FormatAmount(name, best), total ? "" : " free");
    }
  }
  return absl::StrCat(text, "; no ", scope, "node has all of it ", total ? "in total" : "free",
                      " at once");
}

}  // namespace berth
