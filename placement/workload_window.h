// WorkloadWindow: the distribution of GPU task shapes among the most
// recent placement groups, which a FragmentationScorer measures against.
//
// FGD-style scoring needs the task distribution it should keep the cluster
// open for. A replay is given it; a head has to learn it from what users
// submit. The window keeps the shapes of the last `capacity` GPU tasks and
// how many of each, so Shapes() is the recent distribution and DistanceFrom
// tells how far it moved since a scorer was built from it.
//
// What counts as one task: a PACK or STRICT_PACK group wants one node, so
// it is one task of its summed resources (as a gang of N one-GPU bundles is
// one N-GPU task in the trace); a SPREAD or STRICT_SPREAD group's bundles
// are one task each, as is any bundle of a PACK group whose sum is not a
// valid shape (over one GPU but not whole). Tasks without GPUs are left out,
// as FGD leaves them out. A task's accelerator types are those its bundles'
// `accelerator_type:<T>` resources and `berth.io/accelerator-type in (...)`
// selectors allow, intersected.
//
// Promises: memory is O(capacity + max_shapes); a shape first seen while
// `max_shapes` shapes are in the window is not recorded (the rarest shapes
// arrive last, so this drops little). Pure and deterministic: no I/O,
// threads or clocks.
#ifndef BERTH_PLACEMENT_WORKLOAD_WINDOW_H_
#define BERTH_PLACEMENT_WORKLOAD_WINDOW_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "placement/fragmentation_scorer.h"
#include "placement/node_scorer.h"
#include "placement/placement_group_spec.h"

namespace berth {

struct WorkloadWindowOptions {
  size_t capacity = 10000;  // tasks remembered, the most recent
  size_t max_shapes = 512;  // distinct shapes tracked at once
};

class WorkloadWindow {
 public:
  // One recorded task's shape (Quantity units; types sorted, empty: any).
  struct RecordedShape {
    int64_t cpu = 0;
    int64_t memory = 0;
    int64_t gpu = 0;
    std::vector<std::string> accelerator_types;
  };
  // Everything the window holds, for a head to keep across a restart: its
  // distinct shapes, and its tasks oldest first as indices into them.
  struct Contents {
    std::vector<RecordedShape> shapes;
    std::vector<uint32_t> tasks;
    uint64_t added = 0;
  };
  // The fraction of the window's tasks of each shape, as Snapshot() took it.
  struct Snapshot {
    std::map<std::tuple<int64_t, int64_t, int64_t, std::vector<std::string>>, double> fractions;
  };

  explicit WorkloadWindow(WorkloadWindowOptions options = {});

  // Records the GPU tasks of one arriving group (see above).
  void Add(const PlacementGroupSpec& spec);

  // Tasks in the window now, and ever recorded.
  size_t size() const { return ring_.size(); }
  uint64_t added() const { return added_; }
  // Distinct shapes in the window now.
  size_t shape_count() const { return by_key_.size(); }

  Contents Export() const;
  // Replaces what the window holds with `contents` (an Export of a window,
  // perhaps of another capacity: the newest tasks that fit are kept).
  // INVALID_ARGUMENT naming the entry, and no change, if a task's index is
  // out of range or a shape takes no GPU.
  absl::Status Restore(const Contents& contents);

  // Each shape in the window, weighted by its count, in a stable order.
  std::vector<TaskShape> Shapes() const;
  Snapshot Take() const;
  // Total variation distance between the window now and `then`, in [0, 1]:
  // the share of tasks that would have to change shape to turn one
  // distribution into the other. 1 when either is empty and the other not.
  double DistanceFrom(const Snapshot& then) const;

 private:
  // (CPU, memory, GPU units, allowed accelerator types sorted; empty: any).
  using Key = std::tuple<int64_t, int64_t, int64_t, std::vector<std::string>>;

  // Records one task of `resources` restricted to `types` (nullopt: any).
  void AddTask(const ResourceSet& resources, const std::vector<std::string>* types);

  WorkloadWindowOptions options_;
  std::deque<const Key*> ring_;    // oldest first; keys live in by_key_
  std::map<Key, int64_t> by_key_;  // count in the window; a node map keeps keys in place
  uint64_t added_ = 0;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_WORKLOAD_WINDOW_H_
