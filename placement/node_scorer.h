// NodeScorer: ranks the nodes that can hold a demand, in the manner of a
// kube-scheduler Score plugin. BundlePlacer consults one (when given one)
// instead of its built-in index order, for every search over free capacity.
//
// Promises: a scorer is only asked about nodes that fit the demand now; a
// higher score is a better node and ties go to the lowest node index;
// scorers do no I/O and read no clocks or threads, so the same sequence of
// calls gives the same scores (the random scorer draws from its own seeded
// generator). The placer asks Best for a tier of pools; by default Best
// scores every candidate, so a decision costs O(candidate nodes) rather
// than the placer's O(log n) walk. FragmentationScorer
// (fragmentation_scorer.h) scores classes of identical nodes instead
// (node_classes.h) and picks the same node.
#ifndef BERTH_PLACEMENT_NODE_SCORER_H_
#define BERTH_PLACEMENT_NODE_SCORER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/node_resource_table.h"

namespace berth {

// What the placer wants to put on one node: the summed resources and, bundle
// by bundle, the GPU amounts (each takes its own share of the instances).
struct ScoredDemand {
  ResourceSet sum;
  std::vector<Quantity> bundle_gpus;
  // The indexed resource the placer ranks the demand by and the demand's
  // NodeResourceTable::IndexKey of it: nodes with less of it free cannot
  // hold the demand.
  IndexedResource primary = IndexedResource::kCpu;
  int64_t primary_amount = 0;
};

class NodeScorer {
 public:
  // The placer's whole check of a node: selectors, exclusions, free capacity.
  using Fits = absl::FunctionRef<bool(NodeIndex)>;

  virtual ~NodeScorer() = default;
  virtual absl::string_view name() const = 0;
  // Higher is better. `node` fits `demand` in the table's free capacity.
  virtual double Score(const NodeResourceTable& table, NodeIndex node,
                       const ScoredDemand& demand) = 0;
  // Among the ALIVE nodes of `pools` that `fits` accepts, the one with the
  // highest Score, ties to the lowest index; nullopt if `fits` accepts none.
  // This default asks Score about every node `fits` accepts among those
  // with at least demand.primary_amount of the primary resource free.
  virtual std::optional<NodeIndex> Best(const NodeResourceTable& table,
                                        const std::vector<const NodeResourceTable::Pool*>& pools,
                                        const ScoredDemand& demand, Fits fits);
};

// The lowest node index wins: the order nodes registered in.
class FirstFitScorer : public NodeScorer {
 public:
  absl::string_view name() const override { return "first-fit"; }
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;
};

// A uniform draw per candidate from a generator seeded at construction.
class RandomScorer : public NodeScorer {
 public:
  explicit RandomScorer(uint64_t seed) : rng_(seed) {}
  absl::string_view name() const override { return "random"; }
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;

 private:
  std::mt19937_64 rng_;
};

// Most room left after the demand (mean free fraction of CPU, memory and, on
// GPU nodes, GPU): Ray's least-resource scoring, which spreads load.
class WorstFitScorer : public NodeScorer {
 public:
  absl::string_view name() const override { return "worst-fit"; }
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;
};

// Least room left after the demand (the same measure as WorstFitScorer).
class BestFitScorer : public NodeScorer {
 public:
  absl::string_view name() const override { return "best-fit"; }
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;
};

// The placer's own ranking (the "built-in" of --placement-scorer): best fit
// (least of the demand's primary resource, then lowest index) or most free
// (most of it, then lowest index), found by walking the table's ordered
// indices of free capacity (or, `over_total`, of totals for feasibility)
// instead of scoring every candidate, so a decision stays O(log n).
class IndexOrderRanking : public NodeScorer {
 public:
  enum class Order { kBestFit, kMostFree };
  IndexOrderRanking(Order order, bool over_total) : order_(order), over_total_(over_total) {}
  absl::string_view name() const override { return "built-in"; }
  // Higher for a tighter fit (kBestFit) or more room (kMostFree).
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;
  std::optional<NodeIndex> Best(const NodeResourceTable& table,
                                const std::vector<const NodeResourceTable::Pool*>& pools,
                                const ScoredDemand& demand, Fits fits) override;

 private:
  int64_t Key(const NodeResourceTable& table, NodeIndex node, IndexedResource r) const;
  Order order_;
  bool over_total_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_SCORER_H_
