#include "bench/replay/team_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace berth::replay {
namespace {

struct Shape {
  PlacementGroupSpec spec;
  double gpus;
  int32_t priority;
};

int32_t PriorityOf(const TraceTask& t) { return t.qos == "BE" ? 0 : 100; }

absl::StatusOr<Shape> TaskShape(const TraceTask& t) {
  absl::StatusOr<PlacementGroupSpec> spec = ToPlacementGroup(t, TaskShaping::kGangPack);
  if (!spec.ok()) return spec.status();
  return Shape{*std::move(spec), t.GpuMilli() / 1000.0, PriorityOf(t)};
}

// `nodes` 8-GPU bundles of an 8-GPU task, one per node.
absl::StatusOr<Shape> MultiNodeShape(const TraceTask& t, int nodes) {
  absl::StatusOr<PlacementGroupSpec> one = ToPlacementGroup(t, TaskShaping::kOneBundle);
  if (!one.ok()) return one.status();
  std::vector<Bundle> bundles(nodes, one->bundles().front());
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpec::Create(std::move(bundles), PlacementStrategy::kSpread);
  if (!spec.ok()) return spec.status();
  return Shape{*std::move(spec), 8.0 * nodes, PriorityOf(t)};
}

}  // namespace

std::vector<Team> DefaultTeams() {
  return {{"team-a", 0.40, 0.35, 0},
          {"team-b", 0.30, 0.30, 6},
          {"team-c", 0.20, 0.20, 12},
          {"team-d", 0.10, 0.15, 18}};
}

absl::StatusOr<std::vector<TeamGang>> MakeTeamWorkload(const std::vector<TraceTask>& tasks,
                                                       const std::vector<double>& runtimes,
                                                       const std::vector<Team>& teams,
                                                       double cluster_gpus,
                                                       const TeamWorkloadOptions& options) {
  std::vector<const TraceTask*> gpu_tasks, eight_gpu_tasks;
  for (const TraceTask& t : tasks) {
    if (t.GpuMilli() == 0) continue;
    gpu_tasks.push_back(&t);
    if (t.num_gpu == 8) eight_gpu_tasks.push_back(&t);
  }
  std::vector<double> kept;
  std::copy_if(runtimes.begin(), runtimes.end(), std::back_inserter(kept),
               [&](double r) { return r >= options.min_runtime_s && r <= options.max_runtime_s; });
  if (gpu_tasks.empty() || eight_gpu_tasks.empty() || kept.empty() || teams.empty()) {
    return absl::InvalidArgumentError(
        "the workload needs GPU tasks, 8-GPU tasks, run times within the bounds and teams");
  }
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  // The mean GPU-hours of a gang, to turn the load into arrival rates.
  double gpu_hours = 0;
  const int kCalibration = 20000;
  for (int i = 0; i < kCalibration; ++i) {
    const double gpus = unit(rng) < options.multi_node
                            ? 8.0 * (pick(2) == 0 ? 2 : 4)
                            : gpu_tasks[pick(gpu_tasks.size())]->GpuMilli() / 1000.0;
    gpu_hours += gpus * kept[pick(kept.size())] / 3600;
  }
  gpu_hours /= kCalibration;

  std::vector<TeamGang> gangs;
  for (size_t team = 0; team < teams.size(); ++team) {
    const Team& t = teams[team];
    const double bursting = static_cast<double>(options.burst_hours) / 24;
    // Mean of the rate multiplier over a day: bursting * f + (1 - bursting) / f.
    const double mean_factor =
        bursting * options.burst_factor + (1 - bursting) / options.burst_factor;
    const double base_per_hour =
        options.load * cluster_gpus * t.load_share / gpu_hours / mean_factor;
    for (int64_t hour = 0; hour < options.hours; ++hour) {
      const int64_t in_day = (hour + 24 - static_cast<int64_t>(t.burst_phase_h) % 24) % 24;
      const double rate = base_per_hour * (in_day < options.burst_hours ? options.burst_factor
                                                                        : 1 / options.burst_factor);
      const int64_t n = std::poisson_distribution<int64_t>(rate)(rng);
      for (int64_t k = 0; k < n; ++k) {
        absl::StatusOr<Shape> shape =
            unit(rng) < options.multi_node
                ? MultiNodeShape(*eight_gpu_tasks[pick(eight_gpu_tasks.size())],
                                 pick(2) == 0 ? 2 : 4)
                : TaskShape(*gpu_tasks[pick(gpu_tasks.size())]);
        if (!shape.ok()) return shape.status();
        const int64_t runtime = static_cast<int64_t>(std::ceil(kept[pick(kept.size())]));
        const int64_t limit = static_cast<int64_t>(std::ceil(1.5 * runtime / 3600)) * 3600;
        gangs.push_back({"", team, shape->priority, std::move(shape->spec), shape->gpus,
                         hour * 3600 + static_cast<int64_t>(unit(rng) * 3600), runtime, limit});
      }
    }
  }
  std::stable_sort(gangs.begin(), gangs.end(),
                   [](const TeamGang& a, const TeamGang& b) { return a.arrive_s < b.arrive_s; });
  for (size_t i = 0; i < gangs.size(); ++i) gangs[i].id = absl::StrCat("g", i);
  return gangs;
}

}  // namespace berth::replay
