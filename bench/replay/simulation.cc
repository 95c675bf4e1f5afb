#include "bench/replay/simulation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace berth::replay {
namespace {

int64_t GpuCapacityMilli(const std::vector<TraceNode>& nodes) {
  int64_t milli = 0;
  for (const TraceNode& n : nodes) milli += n.gpus * 1000;
  return milli;
}

// Places `group`, adding the wall time to the curve's placed or failed account.
absl::StatusOr<PlacementDecision> TimedPlace(BundlePlacer& placer, const PlacementGroupSpec& group,
                                             ArrivalCurve* curve) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PlacementDecision> decision = placer.Place(group);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  DecisionTime& time = decision.ok() && decision->outcome == PlacementOutcome::kPlaced
                           ? curve->placed_time
                           : curve->failed_time;
  time.seconds += seconds;
  ++time.decisions;
  return decision;
}

// How long a task runs: as recorded; tasks that never ran keep their lifetime.
int64_t Duration(const TraceTask& t) {
  return std::max<int64_t>(0, t.deletion_time - t.scheduled_time.value_or(t.creation_time));
}

absl::Status ReleaseAll(NodeResourceTable& table, const std::vector<BundlePlacement>& placements) {
  for (const BundlePlacement& p : placements) {
    if (absl::Status s = table.Release(p.allocation); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Workload> MakeWorkload(std::vector<TraceTask> tasks, TaskShaping shaping) {
  Workload w;
  for (const TraceTask& t : tasks) {
    absl::StatusOr<PlacementGroupSpec> group = ToPlacementGroup(t, shaping);
    if (!group.ok()) return group.status();
    w.groups.push_back(*std::move(group));
  }
  w.tasks = std::move(tasks);
  return w;
}

absl::StatusOr<NodeResourceTable> BuildCluster(const std::vector<TraceNode>& nodes) {
  NodeResourceTable table;
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeSpec spec = ToNodeSpec(nodes[i]);
    spec.labels[kRackLabel] = absl::StrCat("rack-", i / kRackSize);
    absl::StatusOr<NodeIndex> added =
        table.AddNode(std::move(spec), NodeSpecFields::Under(nodes[i].name));
    if (!added.ok()) return added.status();
  }
  return table;
}

absl::StatusOr<ArrivalCurve> RunArrivals(const std::vector<TraceNode>& nodes,
                                         const Workload& workload, PlacementScorer* scorer,
                                         FragmentationScorer* meter,
                                         const ArrivalOptions& options) {
  const int64_t capacity = GpuCapacityMilli(nodes);
  int64_t workload_gpu = 0;
  for (const TraceTask& t : workload.tasks) workload_gpu += t.GpuMilli();
  if (capacity == 0 || workload_gpu == 0) {
    return absl::InvalidArgumentError("the cluster or the workload has no GPUs");
  }
  if (!(options.step > 0) || !(options.max_load >= options.step)) {
    return absl::InvalidArgumentError("step must be > 0 and max_load >= step");
  }
  absl::StatusOr<NodeResourceTable> table = BuildCluster(nodes);
  if (!table.ok()) return table.status();

  std::mt19937_64 rng(options.seed);
  std::vector<size_t> order(workload.tasks.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<size_t> draw(0, order.size() - 1);

  const int checkpoints = static_cast<int>(std::llround(options.max_load / options.step));
  ArrivalCurve curve;
  int64_t arrived = 0;
  int64_t allocated = 0;
  while (static_cast<int>(curve.arrived.size()) < checkpoints) {
    // The shuffled tasks first, then draws with replacement.
    const size_t i =
        curve.arrivals < static_cast<int64_t>(order.size()) ? order[curve.arrivals] : draw(rng);
    ++curve.arrivals;
    const int64_t gpu = workload.tasks[i].GpuMilli();
    arrived += gpu;
    // As a head does: the group is seen when it arrives, then placed.
    scorer->Observe(workload.groups[i]);
    BundlePlacer placer(&*table, scorer->current());
    absl::StatusOr<PlacementDecision> d = TimedPlace(placer, workload.groups[i], &curve);
    if (!d.ok()) return d.status();
    if (d->outcome == PlacementOutcome::kPlaced) {
      allocated += gpu;
      if (d->placements.size() > 1) {
        ++curve.gangs_placed;
        std::set<std::string> racks;
        for (const BundlePlacement& p : d->placements) {
          racks.insert(table->node(p.allocation.node).labels.at(kRackLabel));
        }
        if (racks.size() == 1) ++curve.gangs_in_one_rack;
      }
    } else {
      ++curve.failed;
    }
    while (static_cast<int>(curve.arrived.size()) < checkpoints &&
           arrived >= std::llround((curve.arrived.size() + 1) * options.step * capacity)) {
      double fragmented = 0;
      for (NodeIndex n = 0; n < table->slot_count(); ++n) {
        fragmented += meter->NodeFragmentation(*table, n);
      }
      curve.arrived.push_back(static_cast<double>(arrived) / capacity);
      curve.allocated.push_back(static_cast<double>(allocated) / capacity);
      curve.fragmented.push_back(fragmented * 1000 / capacity);
    }
  }
  return curve;
}

absl::StatusOr<Timeline> RunTimeline(const std::vector<TraceNode>& nodes, const Workload& workload,
                                     PlacementScorer* scorer, const TimelineOptions& options) {
  const int64_t capacity = GpuCapacityMilli(nodes);
  if (capacity == 0 || !(options.speedup > 0) || options.samples <= 0) {
    return absl::InvalidArgumentError("the cluster has no GPUs, or speedup or samples is not > 0");
  }
  absl::StatusOr<NodeResourceTable> table = BuildCluster(nodes);
  if (!table.ok()) return table.status();
  // Whether a group fits at all does not depend on the ranking, so the
  // built-in placer tries the head of the queue and the scorer only ranks
  // groups that fit: a blocked head does not cost a scan of the cluster.
  BundlePlacer probe(&*table);

  const std::vector<TraceTask>& tasks = workload.tasks;
  if (tasks.empty()) return absl::InvalidArgumentError("the workload has no tasks");
  Timeline timeline;
  timeline.tasks = static_cast<int64_t>(tasks.size());
  std::vector<int64_t> arrive_at(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    arrive_at[i] =
        static_cast<int64_t>(static_cast<double>(tasks[i].creation_time) / options.speedup);
  }
  timeline.last_arrival_s = *std::max_element(arrive_at.begin(), arrive_at.end());
  // Samples cover the arrivals; a few tasks run for weeks after them.
  const int64_t sample_every = std::max<int64_t>(1, timeline.last_arrival_s / options.samples);
  std::vector<size_t> arrivals(tasks.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [&](size_t a, size_t b) { return arrive_at[a] < arrive_at[b]; });

  std::vector<std::vector<BundlePlacement>> running(tasks.size());
  using Departure = std::pair<int64_t, size_t>;  // (time, task)
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  std::vector<size_t> waiting;  // in arrival order
  int64_t allocated = 0;
  int64_t next_sample = 0;

  // Places task i at `now`; true if it must keep waiting. Tasks that can
  // never fit are dropped and counted.
  auto must_wait = [&](size_t i, int64_t now) -> absl::StatusOr<bool> {
    const PlacementGroupSpec& group = workload.groups[i];
    BundlePlacer placer(&*table, scorer->current());
    const bool ranked = scorer->current() != nullptr;
    absl::StatusOr<PlacementDecision> d = (ranked ? probe : placer).Place(group);
    if (d.ok() && ranked && d->outcome == PlacementOutcome::kPlaced) {
      if (absl::Status s = ReleaseAll(*table, d->placements); !s.ok()) return s;
      d = placer.Place(group);
    }
    if (!d.ok()) return d.status();
    if (d->outcome == PlacementOutcome::kInfeasible) ++timeline.infeasible;
    if (d->outcome != PlacementOutcome::kPlaced) {
      return d->outcome == PlacementOutcome::kRetryLater;
    }
    running[i] = std::move(d->placements);
    departures.push({now + Duration(tasks[i]), i});
    allocated += tasks[i].GpuMilli();
    ++timeline.placed;
    timeline.delays_s.push_back(static_cast<double>(now - arrive_at[i]));
    return false;
  };

  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  size_t next_arrival = 0;
  size_t head = 0;  // waiting[head..] still wait
  while (next_arrival < arrivals.size() || !departures.empty()) {
    const int64_t arrival_at =
        next_arrival < arrivals.size() ? arrive_at[arrivals[next_arrival]] : kNever;
    const int64_t departure_at = departures.empty() ? kNever : departures.top().first;
    const int64_t now = std::min(arrival_at, departure_at);
    for (; next_sample < now && next_sample <= timeline.last_arrival_s;
         next_sample += sample_every) {
      timeline.utilisation.push_back({next_sample, static_cast<double>(allocated) / capacity});
    }
    while (!departures.empty() && departures.top().first == now) {
      const size_t i = departures.top().second;
      departures.pop();
      if (absl::Status s = ReleaseAll(*table, running[i]); !s.ok()) return s;
      running[i].clear();
      allocated -= tasks[i].GpuMilli();
    }
    while (next_arrival < arrivals.size() && arrive_at[arrivals[next_arrival]] == now) {
      scorer->Observe(workload.groups[arrivals[next_arrival]]);
      waiting.push_back(arrivals[next_arrival++]);
    }
    // Strict FIFO: the head blocks those behind it until it fits.
    for (; head < waiting.size(); ++head) {
      absl::StatusOr<bool> wait = must_wait(waiting[head], now);
      if (!wait.ok()) return wait.status();
      if (*wait) break;
    }
  }
  return timeline;
}

}  // namespace berth::replay
