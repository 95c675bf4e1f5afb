#include "placement/bundle_placer.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "placement/placement_explanation.h"
#include "placement/topology_domains.h"

namespace berth {
namespace {

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

}  // namespace

absl::Status BundlePlacer::PlaceOnNode(NodeSearch& search, NodeIndex node, const Demand& d,
                                       std::vector<BundlePlacement>* out) {
  for (uint32_t b : d.bundles) {
    absl::StatusOr<Allocation> a = table_->Allocate(node, search.spec().bundles()[b].resources);
    if (!a.ok()) return a.status();
    out->push_back({b, *std::move(a)});
  }
  return absl::OkStatus();
}

bool BundlePlacer::PlacePack(NodeSearch& search, const std::vector<uint32_t>& order,
                             std::vector<BundlePlacement>* out) {
  std::vector<uint32_t> remaining = order;
  while (!remaining.empty()) {
    // The tightest node that takes everything left, if any: one node, least waste.
    Demand all = search.MakeDemand(remaining);
    if (std::optional<NodeIndex> n =
            search.FindNode(all, Preference::kBestFit, Capacity::kFree, {})) {
      return PlaceOnNode(search, *n, all, out).ok();
    }
    // Else open the roomiest node for the largest bundle and fill it.
    std::optional<NodeIndex> n = search.FindNode(search.MakeDemand({remaining[0]}),
                                                 Preference::kMostFree, Capacity::kFree, {});
    if (!n) return false;
    // Bundles with a selector fill it first: the others can go elsewhere,
    // they may not (rank i's selector in a train job).
    std::stable_partition(remaining.begin(), remaining.end(),
                          [&](uint32_t b) { return !search.spec().bundles()[b].selector.empty(); });
    std::vector<uint32_t> left;
    for (uint32_t b : remaining) {
      Demand one = search.MakeDemand({b});
      if (search.Fits(*n, one, Capacity::kFree)) {
        if (!PlaceOnNode(search, *n, one, out).ok()) return false;
      } else {
        left.push_back(b);
      }
    }
    remaining = std::move(left);
  }
  return true;
}

bool BundlePlacer::PlaceSpread(NodeSearch& search, const std::vector<uint32_t>& order, bool strict,
                               const absl::flat_hash_set<NodeIndex>& excluded,
                               std::vector<BundlePlacement>* out) {
  absl::flat_hash_set<NodeIndex> used = excluded;
  for (uint32_t b : order) {
    Demand one = search.MakeDemand({b});
    std::optional<NodeIndex> n =
        search.FindNode(one, Preference::kMostFree, Capacity::kFree, {&used, {}});
    // SPREAD falls back to a node the group already uses; STRICT_SPREAD may not.
    if (!n && !strict) n = search.FindNode(one, Preference::kMostFree, Capacity::kFree, {});
    if (!n || !PlaceOnNode(search, *n, one, out).ok()) return false;
    used.insert(*n);
  }
  return true;
}

absl::StatusOr<PlacementDecision> BundlePlacer::Place(
    const PlacementGroupSpec& spec, const std::vector<BundlePlacement>& already_placed) {
  NodeSearch search(*table_, spec, scorer_, avoid_);
  absl::StatusOr<PlacementDecision> decision = Place(search, already_placed);
  if (decision.ok()) {
    const std::vector<uint64_t>& rejected = search.rejected();
    for (size_t f = 0; f < rejected.size(); ++f) {
      if (rejected[f] > 0)
        decision->rejected_by.emplace_back(NodeFilters()[f]->name(), rejected[f]);
    }
  }
  return decision;
}

absl::StatusOr<PlacementDecision> BundlePlacer::Place(
    NodeSearch& search, const std::vector<BundlePlacement>& already_placed) {
  const PlacementGroupSpec& spec = search.spec();
  const absl::Span<const Bundle> bundles = spec.bundles();
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
    ok = PlaceByStrategy(search, order, placed_nodes, pinned, &made);
  } else {
    for (const std::string& key : spec.topology().keys()) {
      if (std::optional<std::string> value =
              PlaceInDomain(search, key, order, already_placed, placed_nodes, pinned, &made)) {
        decision.topology_domain = absl::StrCat(key, "=", *value);
        ok = true;
        break;
      }
    }
    // A preferred topology settles for the whole cluster.
    if (!ok && spec.topology().required.empty()) {
      ok = PlaceByStrategy(search, order, placed_nodes, pinned, &made);
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
  PlacementExplainer explainer(*table_, search);
  PlacementDecision why = explainer.Explain(
      order, spec.strategy() == PlacementStrategy::kStrictSpread ? placed_nodes : none, pinned);
  // A group the whole cluster could not take is not helped by a domain.
  if (spec.topology().required.empty() || why.outcome == PlacementOutcome::kInfeasible) return why;
  return explainer.ExplainTopology(order, already_placed);
}

bool BundlePlacer::PlaceByStrategy(NodeSearch& search, const std::vector<uint32_t>& order,
                                   const absl::flat_hash_set<NodeIndex>& placed_nodes,
                                   std::optional<NodeIndex> pinned,
                                   std::vector<BundlePlacement>* out) {
  switch (search.spec().strategy()) {
    case PlacementStrategy::kPack:
      return PlacePack(search, order, out);
    case PlacementStrategy::kSpread:
      return PlaceSpread(search, order, /*strict=*/false, placed_nodes, out);
    case PlacementStrategy::kStrictSpread:
      return PlaceSpread(search, order, /*strict=*/true, placed_nodes, out);
    case PlacementStrategy::kStrictPack: {
      Demand all = search.MakeDemand(order);
      std::optional<NodeIndex> n =
          search.FindNode(all, Preference::kBestFit, Capacity::kFree, {nullptr, pinned});
      return n && PlaceOnNode(search, *n, all, out).ok();
    }
  }
  return false;
}

std::optional<std::string> BundlePlacer::PlaceInDomain(
    NodeSearch& search, const std::string& key, const std::vector<uint32_t>& order,
    const std::vector<BundlePlacement>& already_placed,
    const absl::flat_hash_set<NodeIndex>& placed_nodes, std::optional<NodeIndex> pinned,
    std::vector<BundlePlacement>* out) {
  const NodeResourceTable::DomainIndex& index = table_->Domains(key);
  DomainCandidates candidates(*table_, index, key, search.MakeDemand(order).sum, already_placed);
  while (!candidates.empty()) {
    const NodeResourceTable::Domain& domain = candidates.PopBest();
    search.Within(&domain.nodes);
    std::vector<BundlePlacement> made;
    const bool ok = PlaceByStrategy(search, order, placed_nodes, pinned, &made);
    search.Within(nullptr);
    if (ok) {
      out->insert(out->end(), made.begin(), made.end());
      return domain.value;
    }
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      table_->Release(it->allocation).IgnoreError();
    }
  }
  return std::nullopt;
}
}  // namespace berth
