// The multi-team queueing replay: a TeamWorkload run through the
// QueueScheduler over the real placement core (PlacerCapacity on the
// trace's nodes), in simulated time, under one of three policies:
//
//   kFifo      one queue, arrival order, a gang that does not fit is passed
//              (berth before queues; Ray's placement groups likewise)
//   kPriority  one queue, priority (qos) then arrival, passed the same way
//   kQueues    a queue per team with its quota in one cohort (idle quota
//              lent), DRF between them, preemption (reclaim, priority,
//              backfill), reservations and a starvation bound
//
// A pass runs every `pass_every_s`. A preempted gang stops after
// `grace_s`; it loses the work since its last checkpoint (every
// `checkpoint_every_s`) and the grace period, and resumes with the rest.
#ifndef BERTH_BENCH_REPLAY_QUEUE_SIMULATION_H_
#define BERTH_BENCH_REPLAY_QUEUE_SIMULATION_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/replay/team_workload.h"
#include "bench/replay/trace.h"
#include "placement/node_resource_table.h"
#include "queueing/placer_capacity.h"
#include "queueing/queue_scheduler.h"

namespace berth::replay {

enum class QueuePolicy { kFifo, kPriority, kQueues };
absl::string_view QueuePolicyName(QueuePolicy policy);

struct QueueRunOptions {
  int64_t pass_every_s = 60;
  int64_t grace_s = 60;
  int64_t checkpoint_every_s = 1800;
  // Whether the scheduler hears of each checkpoint (a train job's
  // berth.train.report), so that it preempts the gangs that lose least.
  bool report_checkpoints = true;
  int64_t starvation_bound_s = 4 * 3600;
  int64_t measure_hours = 72;  // the arrivals; the run goes on until every gang ends
  // How often each team's usable demand is sampled: every pass, as gangs
  // that run a few minutes otherwise count for the whole interval or not at all.
  int64_t usable_every_s = 60;
  // Each team queue's QueueSpec::within_queue_preemption, by name.
  std::string within_queue_preemption = "LowerOrNewerEqualPriority";
  // Queues policy, every 30 simulated minutes of the measured span: each
  // team's GPUs held, quota and wanted, the free GPUs on idle and partly
  // used nodes, and the waiting gangs by team, reason and size. Not owned.
  std::ostream* explain_waits = nullptr;
};

struct QueueRun {
  QueuePolicy policy;
  double gpus = 0;  // the cluster's
  // Allocated GPUs / capacity, mean of each hour of the measured span.
  std::vector<double> allocation_by_hour;
  // By team and hour of the measured span: mean allocated GPUs, and the
  // entitlement, min(quota, mean demand) where demand is the GPUs of its
  // running and waiting gangs; NaN for an hour the team has no demand.
  std::vector<std::vector<double>> team_allocated;
  std::vector<std::vector<double>> team_entitled;
  // By team and hour: the mean of min(quota, usable demand), where usable
  // demand is the GPUs of its running and waiting gangs it could hold at once
  // on the idle cluster (gangs placed in turn, those that do not fit
  // skipped); NaN for an hour without demand.
  std::vector<std::vector<double>> team_usable;
  // The same with the idle cluster shared by the teams (the entitlement the
  // fairness target is measured against): first the gangs each team runs
  // within its quota, then the rest in turns, the team with the smallest
  // share of its quota next; so gangs that need the same few nodes count
  // once, not once for each team.
  std::vector<std::vector<double>> team_shared;
  // First start - arrival, seconds, by gang size bucket (see SizeBucket).
  std::vector<std::vector<double>> waits;
  int64_t gangs = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;
  // The same by the rule each victim was preempted under.
  std::map<PreemptionRule, std::pair<int64_t, double>> lost_by_rule;
  double gpu_hours_run = 0;
  int64_t passes = 0;
  std::vector<double> pass_ms;  // wall time of each pass
  int64_t end_s = 0;            // when the last gang ended
};

// Each team's submitted gangs, each with whether it runs now.
using SubmittedGangs = std::vector<std::pair<const TeamGang*, bool>>;

// The GPUs each team (TeamGang::team indexes `quota`) could hold at once
// with the idle cluster to itself, up to its quota: its gangs placed in turn
// (running ones first, then by arrival), one that does not fit skipped.
// Demand beyond that no policy could serve (e.g. 32-GPU gangs whose bundles
// fit only a few nodes) is not entitlement; but every team is given those
// few nodes.
std::vector<double> UsableDemand(const NodeResourceTable& idle, const std::vector<double>& quota,
                                 SubmittedGangs gangs);

// The same with the teams sharing the idle cluster as the rules share it:
// first the gangs each team runs within its quota (the oldest up to it; no
// rule preempts them; placed largest first), then the rest, each round in
// turns, the team with the smallest share of its quota next (ties: the
// lower index), each gang placed by best fit. Gangs that need the same few
// nodes count once, for the team that holds them within its quota or whose
// turn comes first.
std::vector<double> SharedDemand(const NodeResourceTable& idle, const std::vector<double>& quota,
                                 SubmittedGangs gangs);

// A gang whose bundles fit on fewer nodes than this is "on few nodes": the
// placer's threshold for the nodes it spares.
inline constexpr int kFewNodes = static_cast<int>(PlacerCapacity::kFewPlaces);
// 0: up to 1 GPU; 1: 2-4; 2: 8; 3: 16 and more; 4: 16 and more whose
// bundles fit on fewer than kFewNodes nodes (in the replay, the G3-only
// gangs: no policy runs more than two at once, so they wait on capacity).
size_t SizeBucket(double gpus, bool few_nodes);
inline constexpr const char* kSizeBuckets[] = {"1 GPU", "2-4 GPU", "8 GPU", "16+ GPU",
                                               "16+ GPU on few nodes"};

// The gangs that fit the idle cluster, in their order. The others (a
// gpu_spec naming models the cluster lacks, or too few of their nodes) no
// policy could ever start: a head keeps them pending as infeasible, and in
// the replay they would wait forever.
absl::StatusOr<std::vector<TeamGang>> GangsThatFit(const std::vector<TraceNode>& nodes,
                                                   const std::vector<TeamGang>& gangs);

absl::StatusOr<QueueRun> RunQueues(const std::vector<TraceNode>& nodes,
                                   const std::vector<Team>& teams,
                                   const std::vector<TeamGang>& gangs, QueuePolicy policy,
                                   const QueueRunOptions& options);

// Wall time of QueueScheduler::Pass with `pending` gangs waiting in
// `queues` queues on a full cluster: the first pass and the mean of the
// next `repeats`, milliseconds.
struct PassTime {
  double first_ms = 0;
  double steady_ms = 0;
  double churn_ms = 0;  // mean pass when one running gang ended before it
  int64_t running = 0;
  // Of the first pass: trial placements, gangs admitted, gangs preempted.
  int64_t first_decisions = 0;
  int64_t first_admitted = 0;
  int64_t first_preempted = 0;
};
absl::StatusOr<PassTime> MeasurePass(const std::vector<TraceNode>& nodes,
                                     const std::vector<TeamGang>& gangs, int queues, int pending,
                                     int repeats);

}  // namespace berth::replay

#endif  // BERTH_BENCH_REPLAY_QUEUE_SIMULATION_H_
