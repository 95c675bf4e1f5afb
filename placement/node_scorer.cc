#include "placement/node_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// Mean over CPU, memory and (on GPU nodes) GPU of the fraction of the
// node's total left free once `demand` is placed.
double FreeFractionAfter(const NodeResourceTable& table, NodeIndex index,
                         const ScoredDemand& demand) {
  const NodeResourceTable::Node& node = table.node(index);
  double sum = 0;
  int counted = 0;
  for (absl::string_view name : {kCpu, kMemory, kGpu}) {
    const int64_t total = node.total.Get(name).units();
    if (total == 0) continue;
    const int64_t left = node.available.Get(name).units() - demand.sum.Get(name).units();
    sum += static_cast<double>(left) / static_cast<double>(total);
    ++counted;
  }
  return counted == 0 ? 0 : sum / counted;
}

}  // namespace

std::optional<NodeIndex> NodeScorer::Best(const NodeResourceTable& table,
                                          const std::vector<const NodeResourceTable::Pool*>& pools,
                                          const ScoredDemand& demand, Fits fits) {
  std::optional<std::pair<double, NodeIndex>> best;
  for (const NodeResourceTable::Pool* pool : pools) {
    VisitAscending(
        pool->by_free[static_cast<int>(demand.primary)], demand.primary_amount, [&](NodeIndex n) {
          if (!fits(n)) return false;
          const double score = Score(table, n, demand);
          if (!best || score > best->first || (score == best->first && n < best->second)) {
            best = std::make_pair(score, n);
          }
          return false;
        });
  }
  if (!best) return std::nullopt;
  return best->second;
}

double FirstFitScorer::Score(const NodeResourceTable&, NodeIndex node, const ScoredDemand&) {
  return -static_cast<double>(node);
}

double RandomScorer::Score(const NodeResourceTable&, NodeIndex, const ScoredDemand&) {
  return std::uniform_real_distribution<double>(0, 1)(rng_);
}

double WorstFitScorer::Score(const NodeResourceTable& table, NodeIndex node,
                             const ScoredDemand& demand) {
  return FreeFractionAfter(table, node, demand);
}

double BestFitScorer::Score(const NodeResourceTable& table, NodeIndex node,
                            const ScoredDemand& demand) {
  return -FreeFractionAfter(table, node, demand);
}

int64_t IndexOrderRanking::Key(const NodeResourceTable& table, NodeIndex node,
                               IndexedResource r) const {
  const NodeResourceTable::Node& n = table.node(node);
  return NodeResourceTable::IndexKey(over_total_ ? n.total : n.available, r);
}

double IndexOrderRanking::Score(const NodeResourceTable& table, NodeIndex node,
                                const ScoredDemand& demand) {
  const double key = static_cast<double>(Key(table, node, demand.primary));
  return order_ == Order::kBestFit ? -key : key;
}

std::optional<NodeIndex> IndexOrderRanking::Best(
    const NodeResourceTable& table, const std::vector<const NodeResourceTable::Pool*>& pools,
    const ScoredDemand& demand, Fits fits) {
  const int r = static_cast<int>(demand.primary);
  std::optional<std::pair<int64_t, NodeIndex>> best;
  for (const NodeResourceTable::Pool* pool : pools) {
    const NodeResourceTable::OrderedNodes& nodes =
        over_total_ ? pool->by_total[r] : pool->by_free[r];
    auto accept = [&](NodeIndex n) { return fits(n); };
    std::optional<NodeIndex> found = order_ == Order::kBestFit
                                         ? VisitAscending(nodes, demand.primary_amount, accept)
                                         : VisitDescending(nodes, demand.primary_amount, accept);
    if (!found) continue;
    const int64_t key = Key(table, *found, demand.primary);
    const bool better =
        !best || (order_ == Order::kBestFit
                      ? std::make_pair(key, *found) < *best
                      : key > best->first || (key == best->first && *found < best->second));
    if (better) best = std::make_pair(key, *found);
  }
  if (!best) return std::nullopt;
  return best->second;
}

}  // namespace berth
