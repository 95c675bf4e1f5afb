// FragmentationScorer: the default NodeScorer of a head, FGD with berth's
// scarcity and stranding terms, over a distribution of task shapes. Its
// internals (cached node views, class rankings, scarcities) are its own
// (fragmentation_scorer.cc).
#ifndef BERTH_PLACEMENT_FRAGMENTATION_SCORER_H_
#define BERTH_PLACEMENT_FRAGMENTATION_SCORER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/node_resource_table.h"
#include "placement/node_scorer.h"
#include "placement/quantity.h"

namespace berth {

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
  ~FragmentationScorer() override;

 private:
  class Impl;  // fragmentation_scorer.cc
  explicit FragmentationScorer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_FRAGMENTATION_SCORER_H_
