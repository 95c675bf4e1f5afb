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
// than the placer's O(log n) walk. FragmentationScorer scores classes of
// identical nodes instead (node_classes.h) and picks the same node.
#ifndef BERTH_PLACEMENT_NODE_SCORER_H_
#define BERTH_PLACEMENT_NODE_SCORER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/node_classes.h"
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

// A kind of task the cluster expects, and how often it comes.
struct TaskShape {
  Quantity cpu;
  Quantity memory;
  // At most 1: a share of one GPU instance; above 1: that many whole ones.
  Quantity gpu;
  // Accelerator types the task accepts; empty: any GPU node.
  std::vector<std::string> accelerator_types;
  double weight = 1;  // relative popularity; normalised over all shapes
};

// Fragmentation-aware scoring after Weng et al., "Beware of Fragmentation"
// (FGD, USENIX ATC'23). A node's fragmentation is the expected free GPU
// capacity that a task drawn from the shape distribution could not use: all
// of the node's free GPU when the task cannot run there at all (wrong
// accelerator type, too little CPU, memory or GPU), else the free part of
// every instance with less room than the task takes from one instance. The
// score is minus the growth of that fragmentation if the demand goes to the
// node (GPU shares best-fit onto instances as GpuInstances places them).
//
// Beyond FGD, three terms, all in GPUs. With `stranding_weight` > 0, a
// node's fragmentation also counts stranding_weight x the free GPUs its free
// CPU or memory cannot feed at the shapes' mean CPU and memory per GPU: a
// node that can still take one task may strand the rest of its GPUs once
// that task has eaten its CPU, which FGD's one-task look-ahead misses. With
// `scarcity_weight` > 0, taking a GPU of accelerator type T costs
// scarcity_weight x P(T), where P(T) is the shapes' GPU demand that only
// some types can serve, spread over the capacity of the types each accepts,
// per GPU of T (1 for every type when no shape is restricted): so tasks that
// accept any model leave the models that restricted tasks need. Among equal
// scores the node left with the least free GPU wins (packing breaks the ties
// FGD's integer scores leave to chance). Unlike FGD, a task that lacks
// memory counts as unable to run.
//
// Best ranks classes of nodes in the same pool and free state
// (NodeClasses), whose members all score the same, and keeps, per demand
// (its resources, GPU shares and pools), the classes that fit it ranked by
// score. A class's state never changes (a node that changes moves to
// another class), so a ranking stays valid: a decision only adds the
// classes opened since the demand was last seen and skips those that have
// emptied, and costs O((nodes changed + classes opened) x log) rather than
// O(nodes); a demand seen for the first time visits every class of its
// pools. It picks the node the per-node search would: the scores are
// computed the same way, bit for bit. Best follows one table at a time (see
// NodeClasses).

// Terms FragmentationScorer adds to FGD; 0 turns a term off.
struct FragmentationOptions {
  double scarcity_weight = 0;
  double stranding_weight = 0;
};

class FragmentationScorer : public NodeScorer {
 public:
  using Options = FragmentationOptions;
  // INVALID_ARGUMENT if `shapes` is empty, a weight (of a shape or an
  // option) is negative or not finite, all shape weights are zero, or a GPU
  // amount above 1 is not whole.
  static absl::StatusOr<std::unique_ptr<FragmentationScorer>> Create(std::vector<TaskShape> shapes,
                                                                     Options options = {});

  absl::string_view name() const override { return "fragmentation"; }
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand) override;
  std::optional<NodeIndex> Best(const NodeResourceTable& table,
                                const std::vector<const NodeResourceTable::Pool*>& pools,
                                const ScoredDemand& demand, Fits fits) override;

  // The node's fragmentation now, in GPUs.
  double NodeFragmentation(const NodeResourceTable& table, NodeIndex node);

 private:
  // A shape reduced to what decides whether it can use a node's GPUs.
  struct Shape {
    int64_t cpu = 0;       // units
    int64_t memory = 0;    // units
    size_t threshold = 0;  // index into per_instance_
    int64_t instances = 0; // instances that need at least that much room
    double weight = 0;     // normalised
    double gpus = 0;       // GPUs the task takes
    std::vector<std::string> accelerator_types;  // sorted; empty: any
  };
  // What the shapes take per GPU, on average (units per GPU).
  struct PerGpu {
    double cpu = 0;
    double memory = 0;
  };
  // The free state of one node, as fragmentation sees it.
  struct NodeView {
    int64_t cpu = 0;
    int64_t memory = 0;
    std::vector<int64_t> gpu_free;  // units per instance
  };

  // The shapes that may run on nodes of one accelerator type; the others
  // find all of such a node's free GPU unusable.
  struct TypeShapes {
    std::vector<uint32_t> accessible;
    double inaccessible_weight = 0;
  };
  // The last fragmentation computed for a node, valid while its state is.
  struct Cached {
    NodeView view;
    double fragmentation = -1;
  };
  // What a demand does to a node: its score is neg_growth - the scarcity
  // cost - tie, in that order (computed the same way on both paths, so the
  // score comes out bit for bit the same).
  struct Change {
    bool fits = false;  // GPU shares (Evaluate) and resources (ClassChange) fit
    double neg_growth = 0;
    double tie = 0;
  };
  // A class's state as fragmentation sees it, for the class of that serial.
  struct ClassState {
    uint64_t serial = 0;
    NodeView view;
    double fragmentation = -1;  // -1: not yet computed
  };
  // What a ranking depends on: the demand and the pools searched.
  struct RankingKey {
    ResourceSet sum;
    std::vector<int64_t> bundle_gpus;  // units
    std::vector<uint32_t> pools;       // indices into the table's pools
    friend bool operator==(const RankingKey& a, const RankingKey& b) {
      return a.bundle_gpus == b.bundle_gpus && a.pools == b.pools && a.sum == b.sum;
    }
    template <typename H>
    friend H AbslHashValue(H h, const RankingKey& k) {
      return H::combine(std::move(h), k.bundle_gpus, k.pools, k.sum);
    }
  };
  // The classes that fit one demand, by score. Entries of classes that
  // have since emptied stay until a search meets them.
  struct Ranking {
    uint64_t scarcity_version = 0;  // scarcity_version_ when scored
    uint64_t seen = 0;       // classes up to this serial are in, or do not fit
    // (-score, class serial, class id): best first.
    absl::btree_set<std::tuple<double, uint64_t, uint32_t>> ranked;
  };

  FragmentationScorer(std::vector<Shape> shapes, std::vector<int64_t> per_instance, PerGpu per_gpu,
                      Options options)
      : shapes_(std::move(shapes)),
        per_instance_(std::move(per_instance)),
        per_gpu_(per_gpu),
        options_(options) {}
  const TypeShapes& ShapesFor(const std::string& accelerator_type);
  // Fills `view` with the node's free state now.
  void ViewNode(const NodeResourceTable::Node& node, NodeView* view) const;
  double Fragmentation(const NodeView& view, const TypeShapes& shapes);
  // `demand` on a node in state `now` (its instances `gpus`) of fragmentation `before`.
  Change Evaluate(const NodeView& now, GpuInstances gpus, double before, const TypeShapes& shapes,
                  const ScoredDemand& demand);
  // P(T) per accelerator type, recomputed (a new scarcity_version_) when
  // the ALIVE nodes change.
  double Scarcity(const NodeResourceTable& table, const std::string& accelerator_type);
  // What taking `demand`'s GPUs on a node of `accelerator_type` costs.
  double ScarcityCost(const NodeResourceTable& table, const std::string& accelerator_type,
                      const ScoredDemand& demand);
  // `demand` on class `id` of classes_ (synced); `needs`: its CPU and memory.
  Change ClassChange(const NodeResourceTable& table, uint32_t id, const ScoredDemand& demand,
                     const NodeView& needs);
  // The ranking of `demand` over `pools`, brought up to date with classes_.
  Ranking& RankingFor(const NodeResourceTable& table,
                      const std::vector<const NodeResourceTable::Pool*>& pools,
                      const ScoredDemand& demand);

  std::vector<Shape> shapes_;
  std::vector<int64_t> per_instance_;  // distinct per-instance room thresholds
  PerGpu per_gpu_;
  Options options_;
  absl::flat_hash_map<std::string, TypeShapes> by_type_;
  absl::flat_hash_map<std::string, double> scarcity_;
  // The table and its alive_version() the scarcities were computed for.
  const NodeResourceTable* scarcity_table_ = nullptr;
  std::optional<uint64_t> scarcity_alive_version_;
  uint64_t scarcity_version_ = 0;
  std::vector<Cached> cache_;  // by node index
  NodeClasses classes_;
  std::vector<ClassState> class_states_;  // by class id
  absl::flat_hash_map<RankingKey, Ranking> rankings_;
  // Scratch, kept to avoid allocating per candidate.
  NodeView now_;
  NodeView after_;
  std::vector<double> scarcity_costs_;  // by pool searched
  std::vector<int64_t> sorted_free_;
  std::vector<int64_t> roomy_;
  std::vector<int64_t> stranded_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_SCORER_H_
