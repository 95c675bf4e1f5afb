// A multi-team workload for the queueing replay: gangs with the shapes of
// the openb trace, run times from the Philly trace, split among teams that
// arrive in bursts and together overload the cluster.
//
// - Shapes: GPU tasks of the openb pod list drawn with replacement (a share
//   of one GPU, or N GPUs as N one-GPU bundles under PACK); `multi_node` of
//   the gangs are 2 or 4 of an 8-GPU task's bundles (16 or 32 GPUs, one
//   8-GPU bundle per node), the multi-node jobs openb alone lacks.
// - Priority: the task's qos; BE is best effort (0), the rest production.
// - Run times: Philly run times drawn with replacement, kept within
//   [min_runtime_s, max_runtime_s] (redrawn outside it); the declared time
//   limit is 1.5x the run time rounded up to the hour (users overestimate,
//   as on Slurm).
// - Arrivals: per team a Poisson process whose rate is `burst_factor` times
//   its base rate for `burst_hours` of each day, at a phase of its own, and
//   1 / burst_factor otherwise, scaled so that the offered GPU-hours per
//   hour average `load` times the cluster's GPUs, split by `load_share`.
// Deterministic for a seed.
#ifndef BERTH_BENCH_REPLAY_TEAM_WORKLOAD_H_
#define BERTH_BENCH_REPLAY_TEAM_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/replay/trace.h"
#include "placement/placement_group_spec.h"

namespace berth::replay {

struct Team {
  std::string name;
  double quota_share = 0;  // of the cluster's GPUs: its nominal quota
  double load_share = 0;   // of the offered load
  double burst_phase_h = 0;
};

struct TeamWorkloadOptions {
  uint64_t seed = 1;
  double load = 1.3;
  int64_t hours = 72;
  double burst_factor = 3;
  int64_t burst_hours = 8;
  double multi_node = 0.03;
  double min_runtime_s = 60;
  double max_runtime_s = 48 * 3600;
};

struct TeamGang {
  std::string id;
  size_t team = 0;
  int32_t priority = 0;  // 100 production, 0 best effort
  PlacementGroupSpec spec;
  double gpus = 0;
  int64_t arrive_s = 0;
  int64_t runtime_s = 0;
  int64_t time_limit_s = 0;
};

// The four teams of the replay: quotas 40/30/20/10% of the GPUs, offered
// load 35/30/20/15%, bursts six hours apart.
std::vector<Team> DefaultTeams();

// Gangs in arrival order. `tasks` must hold GPU tasks; `runtimes` seconds.
absl::StatusOr<std::vector<TeamGang>> MakeTeamWorkload(const std::vector<TraceTask>& tasks,
                                                       const std::vector<double>& runtimes,
                                                       const std::vector<Team>& teams,
                                                       double cluster_gpus,
                                                       const TeamWorkloadOptions& options);

}  // namespace berth::replay

#endif  // BERTH_BENCH_REPLAY_TEAM_WORKLOAD_H_
