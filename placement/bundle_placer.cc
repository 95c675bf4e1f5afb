#include "placement/bundle_placer.h"

#include <algorithm>
#include <functional>
#include <tuple>

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

}  // namespace

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

BundlePlacer::Demand BundlePlacer::MakeDemand(std::vector<uint32_t> bundles) const {
  Demand d;
  d.bundles = std::move(bundles);
  // The spec's total does not overflow, so no subset sum does.
  for (uint32_t b : d.bundles) d.sum.Add(spec_->bundles()[b].resources).IgnoreError();
  return d;
}

std::vector<std::vector<const NodeResourceTable::Pool*>> BundlePlacer::CandidatePools(
    const Demand& d) const {
  const std::optional<std::vector<std::string>> allowed =
      AllowedAcceleratorTypes(spec_->bundles(), d.bundles);

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

bool BundlePlacer::Fits(NodeIndex index, const Demand& d, Capacity capacity) const {
  const NodeResourceTable::Node& node = table_->node(index);
  for (uint32_t b : d.bundles) {
    if (!spec_->bundles()[b].selector.Matches(node.labels)) return false;
  }
  if (d.bundles.size() == 1) {
    return capacity == Capacity::kFree ? table_->CanAllocate(index, d.sum)
                                       : table_->FitsTotal(index, d.sum);
  }
  const ResourceSet& have = capacity == Capacity::kFree ? node.available : node.total;
  if (!have.Contains(d.sum)) return false;
  if (d.sum.Get(kGpu).IsZero()) return true;
  // Several bundles with GPUs: their shares must fit the instances one by one.
  GpuInstances gpus = capacity == Capacity::kFree ? node.gpus : GpuInstances(node.gpus.count());
  for (uint32_t b : d.bundles) {
    if (!gpus.Allocate(spec_->bundles()[b].resources.Get(kGpu)).ok()) return false;
  }
  return true;
}

std::optional<NodeIndex> BundlePlacer::FindNode(const Demand& d, Preference preference,
                                                Capacity capacity,
                                                const Constraints& constraints) const {
  if (constraints.only) {
    const NodeIndex n = *constraints.only;
    const NodeResourceTable::Node& node = table_->node(n);
    if (node.removed || node.state != NodeState::kAlive || !Fits(n, d, capacity)) return std::nullopt;
    return n;
  }
  if (scorer_ != nullptr && capacity == Capacity::kFree) return FindScoredNode(d, constraints);
  const IndexedResource primary = PrimaryResource(d.sum);
  const int r = static_cast<int>(primary);
  const int64_t amount = NodeResourceTable::IndexKey(d.sum, primary);
  auto accept = [&](NodeIndex n) {
    return (constraints.exclude == nullptr || !constraints.exclude->contains(n)) &&
           Fits(n, d, capacity);
  };
  for (const auto& tier : CandidatePools(d)) {
    std::optional<std::pair<int64_t, NodeIndex>> best;
    for (const NodeResourceTable::Pool* pool : tier) {
      const NodeResourceTable::OrderedNodes& nodes =
          capacity == Capacity::kFree ? pool->by_free[r] : pool->by_total[r];
      std::optional<NodeIndex> found = preference == Preference::kBestFit
                                           ? VisitAscending(nodes, amount, accept)
                                           : VisitDescending(nodes, amount, accept);
      if (!found) continue;
      const NodeResourceTable::Node& node = table_->node(*found);
      const int64_t key = NodeResourceTable::IndexKey(
          capacity == Capacity::kFree ? node.available : node.total, primary);
      const bool better =
          !best || (preference == Preference::kBestFit
                        ? std::make_pair(key, *found) < *best
                        : key > best->first || (key == best->first && *found < best->second));
      if (better) best = std::make_pair(key, *found);
    }
    if (best) return best->second;
  }
  return std::nullopt;
}

std::optional<NodeIndex> BundlePlacer::FindScoredNode(const Demand& d,
                                                      const Constraints& constraints) const {
  ScoredDemand demand{d.sum, {}, PrimaryResource(d.sum), 0};
  demand.primary_amount = NodeResourceTable::IndexKey(d.sum, demand.primary);
  for (uint32_t b : d.bundles) demand.bundle_gpus.push_back(spec_->bundles()[b].resources.Get(kGpu));
  auto fits = [&](NodeIndex n) {
    return (constraints.exclude == nullptr || !constraints.exclude->contains(n)) &&
           Fits(n, d, Capacity::kFree);
  };
  for (const auto& tier : CandidatePools(d)) {
    if (std::optional<NodeIndex> best = scorer_->Best(*table_, tier, demand, fits)) return best;
  }
  return std::nullopt;
}

absl::Status BundlePlacer::PlaceOnNode(NodeIndex node, const Demand& d,
                                       std::vector<BundlePlacement>* out) {
  for (uint32_t b : d.bundles) {
    absl::StatusOr<Allocation> a = table_->Allocate(node, spec_->bundles()[b].resources);
    if (!a.ok()) return a.status();
    out->push_back({b, *std::move(a)});
  }
  return absl::OkStatus();
}

bool BundlePlacer::PlacePack(const std::vector<uint32_t>& order,
                             std::vector<BundlePlacement>* out) {
  std::vector<uint32_t> remaining = order;
  while (!remaining.empty()) {
    // The tightest node that takes everything left, if any: one node, least waste.
    Demand all = MakeDemand(remaining);
    if (std::optional<NodeIndex> n = FindNode(all, Preference::kBestFit, Capacity::kFree, {})) {
      return PlaceOnNode(*n, all, out).ok();
    }
    // Else open the roomiest node for the largest bundle and fill it.
    std::optional<NodeIndex> n =
        FindNode(MakeDemand({remaining[0]}), Preference::kMostFree, Capacity::kFree, {});
    if (!n) return false;
    std::vector<uint32_t> left;
    for (uint32_t b : remaining) {
      Demand one = MakeDemand({b});
      if (Fits(*n, one, Capacity::kFree)) {
        if (!PlaceOnNode(*n, one, out).ok()) return false;
      } else {
        left.push_back(b);
      }
    }
    remaining = std::move(left);
  }
  return true;
}

bool BundlePlacer::PlaceSpread(const std::vector<uint32_t>& order, bool strict,
                               const absl::flat_hash_set<NodeIndex>& excluded,
                               std::vector<BundlePlacement>* out) {
  absl::flat_hash_set<NodeIndex> used = excluded;
  for (uint32_t b : order) {
    Demand one = MakeDemand({b});
    std::optional<NodeIndex> n = FindNode(one, Preference::kMostFree, Capacity::kFree, {&used, {}});
    // SPREAD falls back to a node the group already uses; STRICT_SPREAD may not.
    if (!n && !strict) n = FindNode(one, Preference::kMostFree, Capacity::kFree, {});
    if (!n || !PlaceOnNode(*n, one, out).ok()) return false;
    used.insert(*n);
  }
  return true;
}

absl::StatusOr<PlacementDecision> BundlePlacer::Place(
    const PlacementGroupSpec& spec, const std::vector<BundlePlacement>& already_placed) {
  spec_ = &spec;
  const std::vector<Bundle>& bundles = spec.bundles();
  std::vector<bool> placed(bundles.size(), false);
  absl::flat_hash_set<NodeIndex> placed_nodes;
  for (size_t i = 0; i < already_placed.size(); ++i) {
    const uint32_t b = already_placed[i].bundle_index;
    if (b >= bundles.size() || placed[b]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "already_placed[", i, "].bundle_index: ", b,
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
  switch (spec.strategy()) {
    case PlacementStrategy::kPack:
      ok = PlacePack(order, &made);
      break;
    case PlacementStrategy::kSpread:
      ok = PlaceSpread(order, /*strict=*/false, placed_nodes, &made);
      break;
    case PlacementStrategy::kStrictSpread:
      ok = PlaceSpread(order, /*strict=*/true, placed_nodes, &made);
      break;
    case PlacementStrategy::kStrictPack: {
      Demand all = MakeDemand(order);
      std::optional<NodeIndex> n =
          FindNode(all, Preference::kBestFit, Capacity::kFree, {nullptr, pinned});
      ok = n && PlaceOnNode(*n, all, &made).ok();
      break;
    }
  }
  if (ok) {
    std::sort(made.begin(), made.end(), [](const BundlePlacement& a, const BundlePlacement& b) {
      return a.bundle_index < b.bundle_index;
    });
    decision.outcome = PlacementOutcome::kPlaced;
    decision.placements = std::move(made);
    return decision;
  }
  // Undo partial work: Release is the exact inverse of Allocate.
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    table_->Release(it->allocation).IgnoreError();
  }
  const absl::flat_hash_set<NodeIndex> none;
  return Explain(order,
                 spec.strategy() == PlacementStrategy::kStrictSpread ? placed_nodes : none,
                 pinned);
}

size_t BundlePlacer::DistinctNodeMatching(const std::vector<uint32_t>& order,
                                          const absl::flat_hash_set<NodeIndex>& excluded) const {
  // A bundle with at least as many candidates as there are bundles can always
  // be matched, so each candidate list stops at order.size() nodes.
  const size_t limit = order.size();
  std::vector<std::vector<NodeIndex>> candidates(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Demand one = MakeDemand({order[i]});
    const IndexedResource primary = PrimaryResource(one.sum);
    const int64_t amount = NodeResourceTable::IndexKey(one.sum, primary);
    for (const auto& tier : CandidatePools(one)) {
      for (const NodeResourceTable::Pool* pool : tier) {
        VisitDescending(pool->by_total[static_cast<int>(primary)], amount, [&](NodeIndex n) {
          if (!excluded.contains(n) && Fits(n, one, Capacity::kTotal)) candidates[i].push_back(n);
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

PlacementDecision BundlePlacer::Explain(const std::vector<uint32_t>& order,
                                        const absl::flat_hash_set<NodeIndex>& excluded,
                                        std::optional<NodeIndex> pinned) const {
  PlacementDecision d;
  d.outcome = PlacementOutcome::kInfeasible;
  if (table_->alive_count() == 0) {
    d.reason = "no ALIVE nodes in the cluster";
    return d;
  }
  for (uint32_t b : order) {
    Demand one = MakeDemand({b});
    if (!FindNode(one, Preference::kMostFree, Capacity::kTotal, {&excluded, pinned})) {
      const bool excluded_only =
          !excluded.empty() && FindNode(one, Preference::kMostFree, Capacity::kTotal, {});
      d.reason = excluded_only
                     ? absl::StrCat("STRICT_SPREAD: ", DescribeDemand(one),
                                    " on a node of its own; every ALIVE node that could hold it "
                                    "already holds one of the group's bundles")
                     : DescribeShortfall(one, Capacity::kTotal);
      return d;
    }
  }
  const Demand all = MakeDemand(order);
  switch (spec_->strategy()) {
    case PlacementStrategy::kStrictPack:
      if (!FindNode(all, Preference::kMostFree, Capacity::kTotal, {nullptr, pinned})) {
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
    Demand one = MakeDemand({b});
    if (!FindNode(one, Preference::kMostFree, Capacity::kFree, {&excluded, pinned})) {
      d.reason = absl::StrCat("waiting for resources: ", DescribeShortfall(one, Capacity::kFree));
      return d;
    }
  }
  d.reason = absl::StrCat("waiting for resources: ", order.size(), " bundles (",
                          PlacementStrategyName(spec_->strategy()), ", ", all.sum.ToString(),
                          " in all) do not fit the free capacity together");
  return d;
}

std::string BundlePlacer::DescribeDemand(const Demand& d) const {
  ResourceSet shown;
  for (const auto& [name, amount] : d.sum.entries()) {
    if (!absl::StartsWith(name, kAcceleratorResourcePrefix)) shown.Set(name, amount);
  }
  std::string text =
      d.bundles.size() == 1
          ? absl::StrCat("bundle ", d.bundles[0], " needs ")
          : absl::StrCat(d.bundles.size(), " bundles need, on one node, ");
  absl::StrAppend(&text, absl::StrJoin(shown.entries(), ", ",
                                       [](std::string* out, const ResourceSet::Entry& e) {
                                         out->append(FormatAmount(e.first, e.second));
                                       }));
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  if (!types.empty()) absl::StrAppend(&text, " with accelerator_type ", absl::StrJoin(types, "+"));
  for (uint32_t b : d.bundles) {
    const LabelSelector& s = spec_->bundles()[b].selector;
    if (!s.empty()) absl::StrAppend(&text, " on nodes matching '", s.ToString(), "'");
  }
  return text;
}

std::string BundlePlacer::DescribeShortfall(const Demand& d, Capacity capacity) const {
  const bool total = capacity == Capacity::kTotal;
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  const std::string scope = types.size() == 1 ? absl::StrCat(types[0], " ") : "";
  std::string text = DescribeDemand(d);
  // Candidate nodes: ALIVE, in the right pools, matching the selectors.
  std::vector<NodeIndex> candidates;
  for (const auto& tier : CandidatePools(d)) {
    for (const NodeResourceTable::Pool* pool : tier) {
      for (const auto& [key, n] : pool->by_total[0]) {
        bool match = true;
        for (uint32_t b : d.bundles) match = match && spec_->bundles()[b].selector.Matches(table_->node(n).labels);
        if (match) candidates.push_back(n);
      }
    }
  }
  if (candidates.empty()) {
    return absl::StrCat(text, "; no ALIVE ", scope, "node",
                        d.sum.Get(kGpu).IsZero() ? "" : " with GPUs", " matches");
  }
  for (const auto& [name, amount] : d.sum.entries()) {
    if (absl::StartsWith(name, kAcceleratorResourcePrefix)) continue;
    Quantity best;
    for (NodeIndex n : candidates) {
      const NodeResourceTable::Node& node = table_->node(n);
      Quantity have = total ? node.total.Get(name) : node.available.Get(name);
      // Free GPU shares scattered over instances do not add up to one request.
      if (!total && name == kGpu) have = node.gpus.LargestRequest();
      best = std::max(best, have);
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
