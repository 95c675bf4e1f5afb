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
    VisitAscending(pool->by_free[static_cast<int>(demand.primary)], demand.primary_amount,
                   [&](NodeIndex n) {
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

}  // namespace berth
