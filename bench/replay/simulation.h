// Trace replay on berth's placement core, in simulated time.
//
// The nodes are labelled into racks of kRackSize (trace.h), in trace
// order, for the topology-aware gang shapings.
//
// RunArrivals is the measure of Weng et al. (FGD, USENIX ATC'23), as the
// data README describes it: the GPU nodes only; the tasks shuffled, then
// drawn with replacement until the arrived GPU request passes `max_load` of
// the cluster's GPU capacity; tasks never leave; after each arrival the
// allocated GPU share is recorded, and at every `step` of arrived load the
// allocation and fragmentation are kept. RunTimeline replays the trace's own
// clock instead: tasks arrive at creation_time / `speedup` and run for
// their recorded duration (deletion - scheduled time; tasks that never ran
// keep deletion - creation); tasks wait in one FIFO queue whose head blocks
// the rest until it fits (strict FIFO, no backfill). At the trace's own
// pace the cluster is nearly idle (14 GPUs busy on average), so arrivals
// can be compressed to load it. Both are deterministic for a given seed; only the measured
// decision time (wall clock around BundlePlacer::Place) varies.
#ifndef BERTH_BENCH_REPLAY_SIMULATION_H_
#define BERTH_BENCH_REPLAY_SIMULATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/replay/trace.h"
#include "placement/bundle_placer.h"
#include "placement/fragmentation_scorer.h"
#include "placement/node_scorer.h"
#include "placement/placement_scorer.h"

namespace berth::replay {

// The tasks, each already turned into its placement group.
struct Workload {
  std::vector<TraceTask> tasks;
  std::vector<PlacementGroupSpec> groups;  // groups[i] is tasks[i]
};
absl::StatusOr<Workload> MakeWorkload(std::vector<TraceTask> tasks, TaskShaping shaping);

absl::StatusOr<NodeResourceTable> BuildCluster(const std::vector<TraceNode>& nodes);

// Time spent deciding: BundlePlacer::Place calls and their wall time.
struct DecisionTime {
  int64_t decisions = 0;
  double seconds = 0;
  double NanosPerDecision() const { return decisions == 0 ? 0 : 1e9 * seconds / decisions; }
};

struct ArrivalCurve {
  // At each checkpoint (step, 2 step, ... max_load), as fractions of the
  // cluster's GPU capacity: the arrived GPU request, what is allocated, and
  // the fragmented free GPU capacity (FragmentationScorer::NodeFragmentation
  // summed over the nodes, against the meter's task distribution).
  std::vector<double> arrived;
  std::vector<double> allocated;
  std::vector<double> fragmented;
  int64_t arrivals = 0;
  int64_t failed = 0;
  // Groups of more than one bundle placed, and those all in one rack (kRackLabel).
  int64_t gangs_placed = 0;
  int64_t gangs_in_one_rack = 0;
  // Decisions that placed the group, and those that did not (which also
  // work out a reason, and so cost more).
  DecisionTime placed_time;
  DecisionTime failed_time;
};

struct ArrivalOptions {
  uint64_t seed = 0;
  double max_load = 1.3;
  double step = 0.1;
};

// `scorer` sees each group as it arrives (Observe), then places it with
// current(), as a head does. `meter` measures fragmentation only; it never
// steers placement.
absl::StatusOr<ArrivalCurve> RunArrivals(const std::vector<TraceNode>& nodes,
                                         const Workload& workload, PlacementScorer* scorer,
                                         FragmentationScorer* meter, const ArrivalOptions& options);

struct Timeline {
  int64_t tasks = 0;
  int64_t placed = 0;            // placed at some point before the replay ended
  int64_t infeasible = 0;        // could never fit the cluster
  std::vector<double> delays_s;  // queueing delay of each placed task
  int64_t last_arrival_s = 0;
  // (simulated seconds, allocated GPU / capacity), evenly from the first
  // arrival to the last.
  std::vector<std::pair<int64_t, double>> utilisation;
};

struct TimelineOptions {
  double speedup = 1;     // arrival times are divided by this
  int64_t samples = 400;  // utilisation samples over the arrivals
};

absl::StatusOr<Timeline> RunTimeline(const std::vector<TraceNode>& nodes, const Workload& workload,
                                     PlacementScorer* scorer, const TimelineOptions& options);

}  // namespace berth::replay

#endif  // BERTH_BENCH_REPLAY_SIMULATION_H_
