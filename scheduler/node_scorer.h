// NodeScorer: ranks the nodes that can hold a demand, in the manner of a
// kube-scheduler Score plugin. BundlePlacer consults one (when given one)
// instead of its built-in index order, for every search over free capacity.
//
// Promises: a scorer is only asked about nodes that fit the demand now; a
// higher score is a better node and the placer breaks ties by lowest node
// index; scorers do no I/O and read no clocks or threads, so the same
// sequence of calls gives the same scores (the random scorer draws from its
// own seeded generator). A scorer looks at every feasible candidate, so a
// decision costs O(candidate nodes) rather than the placer's O(log n) walk.
#ifndef BERTH_SCHEDULER_NODE_SCORER_H_
#define BERTH_SCHEDULER_NODE_SCORER_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/node_resource_table.h"

namespace berth {

// What the placer wants to put on one node: the summed resources and, bundle
// by bundle, the GPU amounts (each takes its own share of the instances).
struct ScoredDemand {
  ResourceSet sum;
  std::vector<Quantity> bundle_gpus;
};

class NodeScorer {
 public:
  virtual ~NodeScorer() = default;
  virtual absl::string_view name() const = 0;
  // Higher is better. `node` fits `demand` in the table's free capacity.
  virtual double Score(const NodeResourceTable& table, NodeIndex node,
                       const ScoredDemand& demand) = 0;
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

  // The node's fragmentation now, in GPUs.
  double NodeFragmentation(const NodeResourceTable& table, NodeIndex node);

 private:
  // A shape reduced to what decides whether it can use a node's GPUs.
  struct Shape {
    int64_t cpu = 0;       // units
    int64_t memory = 0;    // units
    size_t threshold = 0;  // index into per_instance_
    int64_t instances = 0; // instances that need at least that much room
    std::vector<std::string> accelerator_types;  // sorted; empty: any
    double weight = 0;     // normalised
    double gpus = 0;       // GPUs the task takes
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
  // P(T) per accelerator type, recomputed when the ALIVE node count changes.
  double Scarcity(const NodeResourceTable& table, const std::string& accelerator_type);

  std::vector<Shape> shapes_;
  std::vector<int64_t> per_instance_;  // distinct per-instance room thresholds
  PerGpu per_gpu_;
  Options options_;
  absl::flat_hash_map<std::string, TypeShapes> by_type_;
  absl::flat_hash_map<std::string, double> scarcity_;
  size_t scarcity_alive_count_ = 0;
  std::vector<Cached> cache_;  // by node index
  // Scratch, kept to avoid allocating per candidate.
  NodeView now_;
  NodeView after_;
  std::vector<int64_t> roomy_;
  std::vector<int64_t> stranded_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_NODE_SCORER_H_
