#include "bench/replay/queue_simulation.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "bench/replay/simulation.h"
#include "placement/placement_scorer.h"
#include "queueing/placer_capacity.h"
#include "queueing/queue_scheduler.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define BERTH_CALLGRIND_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#else
#define BERTH_CALLGRIND_TOGGLE()
#endif

namespace berth::replay {
namespace {

double ClusterGpus(const std::vector<TraceNode>& nodes) {
  double gpus = 0;
  for (const TraceNode& n : nodes) gpus += n.gpus;
  return gpus;
}

// A team's nominal quota of a cluster's GPUs.
double QuotaGpus(const Team& team, double gpus) { return team.quota_share * gpus; }

absl::StatusOr<QueueConfig> TeamQueues(const std::vector<Team>& teams, double gpus,
                                       const std::string& within_queue_preemption) {
  absl::StatusOr<QueueConfig> config = QueueConfig().WithCohort("cluster");
  for (const Team& t : teams) {
    if (!config.ok()) return config.status();
    QueueInput in;
    in.name = t.name;
    in.cohort = "cluster";
    in.nominal = {{"GPU", QuotaGpus(t, gpus)}};
    in.weight = t.quota_share;
    in.within_queue_preemption = within_queue_preemption;
    absl::StatusOr<QueueSpec> q = QueueSpecFromInput(in, t.name);
    if (!q.ok()) return q.status();
    config = config->WithQueue(*std::move(q));
  }
  return config;
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Those running first, then by arrival.
void RunningFirst(SubmittedGangs& gangs) {
  std::stable_sort(gangs.begin(), gangs.end(), [](const auto& a, const auto& b) {
    return std::make_pair(!a.second, a.first->arrive_s) <
           std::make_pair(!b.second, b.first->arrive_s);
  });
}

}  // namespace

std::vector<double> UsableDemand(const NodeResourceTable& idle, const std::vector<double>& quota,
                                 SubmittedGangs gangs) {
  RunningFirst(gangs);
  std::vector<double> usable(quota.size(), 0);
  for (size_t t = 0; t < quota.size(); ++t) {
    NodeResourceTable table = idle;
    PlacerCapacity capacity(&table, nullptr);
    capacity.set_spare_few_node_places(false);  // the measure, as before the schedulers spared them
    std::vector<std::unique_ptr<CapacityModel::Gang>> placed;  // before `capacity` goes
    for (const auto& [g, running] : gangs) {
      if (g->team != t || usable[t] >= quota[t]) continue;
      placed.push_back(capacity.Add(g->spec));
      PlacementReasonPtr why;
      if (capacity.Place({&g->id, placed.back().get()}, &why)) usable[t] += g->gpus;
    }
    usable[t] = std::min(usable[t], quota[t]);
  }
  return usable;
}

std::vector<double> SharedDemand(const NodeResourceTable& idle, const std::vector<double>& quota,
                                 SubmittedGangs gangs) {
  RunningFirst(gangs);
  const size_t teams = quota.size();
  std::vector<std::vector<const TeamGang*>> kept(teams), rest(teams);
  std::vector<double> kept_gpus(teams, 0);
  for (const auto& [g, running] : gangs) {
    if (running && kept_gpus[g->team] + g->gpus <= quota[g->team]) {
      kept[g->team].push_back(g);
      kept_gpus[g->team] += g->gpus;
    } else {
      rest[g->team].push_back(g);
    }
  }
  // The kept gangs all fit: largest first, so small ones do not take the
  // few nodes a large one needs.
  for (std::vector<const TeamGang*>& k : kept) {
    std::stable_sort(k.begin(), k.end(),
                     [](const TeamGang* a, const TeamGang* b) { return a->gpus > b->gpus; });
  }
  // Best fit over every resource: a small gang goes where the least is
  // left, not onto the few nodes a large one needs.
  NodeResourceTable table = idle;
  PlacementScorer best_fit(ScorerKind::kBestFit);
  PlacerCapacity capacity(&table, &best_fit);
  capacity.set_spare_few_node_places(false);
  std::vector<std::unique_ptr<CapacityModel::Gang>> placed;  // before `capacity` goes
  std::vector<double> usable(teams, 0);
  for (const auto* round : {&kept, &rest}) {
    std::vector<size_t> next(teams, 0);
    while (true) {
      size_t turn = teams;
      for (size_t t = 0; t < teams; ++t) {
        if (next[t] == (*round)[t].size() || usable[t] >= quota[t]) continue;
        if (turn == teams || usable[t] / quota[t] < usable[turn] / quota[turn]) turn = t;
      }
      if (turn == teams) break;
      const TeamGang* g = (*round)[turn][next[turn]++];
      placed.push_back(capacity.Add(g->spec));
      PlacementReasonPtr why;
      if (capacity.Place({&g->id, placed.back().get()}, &why)) usable[turn] += g->gpus;
    }
  }
  for (size_t t = 0; t < teams; ++t) usable[t] = std::min(usable[t], quota[t]);
  return usable;
}

namespace {

// One sample of QueueRunOptions::explain_waits.
struct WaitSample {
  const std::vector<Team>& teams;
  const std::vector<double>& held;
  const std::vector<double>& quota;
  const std::vector<double>& wanted;
  const NodeResourceTable& table;
};

template <typename Live>
void ExplainWaits(std::ostream& out, int64_t now_s, const WaitSample& at,
                  const std::map<std::string, Live>& live, const QueueScheduler& scheduler) {
  double on_idle = 0, on_partial = 0;
  int partial = 0;
  for (NodeIndex i = 0; i < at.table.slot_count(); ++i) {
    const NodeResourceTable::Node& n = at.table.node(i);
    if (n.removed || n.state != NodeState::kAlive) continue;
    const Quantity free = n.available.Get(kGpu);
    if (free == n.total.Get(kGpu)) {
      on_idle += free.ToDouble();
    } else if (!free.IsZero()) {
      on_partial += free.ToDouble();
      ++partial;
    }
  }
  out << absl::StrFormat("t=%.1fh free GPUs: %.0f on idle nodes, %.0f on %d partly used\n",
                         now_s / 3600.0, on_idle, on_partial, partial);
  for (size_t t = 0; t < at.teams.size(); ++t) {
    out << absl::StrFormat("  %s held %.0f quota %.0f wanted %.0f\n", at.teams[t].name, at.held[t],
                           at.quota[t], at.wanted[t]);
  }
  // (team, the reason's first words, 16+ GPUs) -> gangs, GPUs
  std::map<std::tuple<std::string, std::string, bool>, std::pair<int, double>> waiting;
  for (const auto& [id, l] : live) {
    const GangView* v = scheduler.Find(id);
    if (v == nullptr || v->state == GangState::kRunning) continue;
    // What it waits for now, without why it was last preempted.
    const std::string reason =
        v->reason.kind == GangWait::kStopping || v->reason.kind == GangWait::kTurn
            ? GangReasonText(*v)
            : GangWaitText(v->reason);
    auto& [gangs, gpus] =
        waiting[{at.teams[l.gang->team].name, reason.substr(0, 40), l.gang->gpus >= 16}];
    ++gangs;
    gpus += l.gang->gpus;
  }
  for (const auto& [key, count] : waiting) {
    const auto& [team, reason, big] = key;
    out << absl::StrFormat("    %s %-40s %s %5d gangs %7.1f GPUs\n", team, reason,
                           big ? "16+" : "   ", count.first, count.second);
  }
}

}  // namespace

absl::string_view QueuePolicyName(QueuePolicy policy) {
  switch (policy) {
    case QueuePolicy::kFifo:
      return "strict FIFO (berth before queues, Ray)";
    case QueuePolicy::kPriority:
      return "priority only";
    case QueuePolicy::kQueues:
      return "queues: quota + DRF + preemption + backfill";
  }
  return "unknown";
}

size_t SizeBucket(double gpus, bool few_nodes) {
  if (gpus <= 1) return 0;
  if (gpus <= 4) return 1;
  if (gpus < 16) return 2;
  return few_nodes ? 4 : 3;
}

absl::StatusOr<std::vector<TeamGang>> GangsThatFit(const std::vector<TraceNode>& nodes,
                                                   const std::vector<TeamGang>& gangs) {
  absl::StatusOr<NodeResourceTable> idle = BuildCluster(nodes);
  if (!idle.ok()) return idle.status();
  std::vector<TeamGang> fit;
  // By spec: thousands of gangs share a few hundred shapes.
  absl::flat_hash_map<PlacementGroupSpec, bool> fits_by_spec;
  for (const TeamGang& g : gangs) {
    auto [known, fresh] = fits_by_spec.try_emplace(g.spec, false);
    if (fresh) {
      absl::StatusOr<PlacementDecision> d =
          BundlePlacer(&*idle, nullptr).WithoutExplanations().Place(g.spec);
      known->second = d.ok() && d->outcome == PlacementOutcome::kPlaced;
      if (known->second) {
        for (const BundlePlacement& p : d->placements) idle->Release(p.allocation).IgnoreError();
      }
    }
    if (known->second) fit.push_back(g);
  }
  return fit;
}

absl::StatusOr<QueueRun> RunQueues(const std::vector<TraceNode>& nodes,
                                   const std::vector<Team>& teams,
                                   const std::vector<TeamGang>& gangs, QueuePolicy policy,
                                   const QueueRunOptions& options) {
  absl::StatusOr<NodeResourceTable> table = BuildCluster(nodes);
  if (!table.ok()) return table.status();
  const NodeResourceTable idle_table = *table;
  PlacementScorer scorer(ScorerKind::kFragmentation, {});
  PlacerCapacity capacity(&*table, &scorer);
  QueueRun run;
  run.policy = policy;
  run.gpus = ClusterGpus(nodes);
  QueueSchedulerOptions scheduler_options;
  QueueConfig config;
  if (policy == QueuePolicy::kQueues) {
    absl::StatusOr<QueueConfig> queues =
        TeamQueues(teams, run.gpus, options.within_queue_preemption);
    if (!queues.ok()) return queues.status();
    config = *std::move(queues);
    scheduler_options.starvation_bound_ms = options.starvation_bound_s * 1000;
  } else {  // berth before queues: no preemption, reservations or starvation bound
    scheduler_options.preemption = false;
    scheduler_options.reservations = false;
    scheduler_options.starvation_bound_ms = std::numeric_limits<int64_t>::max() / 2;
  }
  QueueScheduler scheduler(std::move(config), scheduler_options);

  const size_t hours = static_cast<size_t>(options.measure_hours);
  run.allocation_by_hour.assign(hours, 0);
  run.team_allocated.assign(teams.size(), std::vector<double>(hours, 0));
  std::vector<std::vector<double>> demand(teams.size(), std::vector<double>(hours, 0));
  std::vector<double> quota(teams.size());
  for (size_t t = 0; t < teams.size(); ++t) quota[t] = QuotaGpus(teams[t], run.gpus);
  run.team_usable.assign(teams.size(), std::vector<double>(hours, 0));
  run.team_shared = run.team_usable;
  std::vector<std::vector<int>> usable_samples(teams.size(), std::vector<int>(hours, 0));
  run.waits.resize(std::size(kSizeBuckets));
  run.gangs = static_cast<int64_t>(gangs.size());

  struct Live {
    const TeamGang* gang;
    int64_t remaining_s;
    int64_t start_s = -1;  // of the current run
    bool started_once = false;
    bool few_nodes = false;  // its bundles fit on fewer than kFewNodes nodes
  };
  std::map<std::string, Live> live;  // submitted and not ended
  std::multimap<int64_t, std::string> ends, stops;
  std::vector<double> held(teams.size(), 0), wanted(teams.size(), 0);
  size_t next = 0, done = 0;
  const int64_t dt = options.pass_every_s;
  for (int64_t now = 0; done < gangs.size(); now += dt) {
    for (auto it = stops.begin(); it != stops.end() && it->first <= now; it = stops.erase(it)) {
      Live& l = live.at(it->second);
      capacity.Release(scheduler.Ref(it->second));
      scheduler.Preempted(it->second, now * 1000);
      held[l.gang->team] -= l.gang->gpus;
    }
    for (auto it = ends.begin(); it != ends.end() && it->first <= now; it = ends.erase(it)) {
      Live& l = live.at(it->second);
      held[l.gang->team] -= l.gang->gpus;
      wanted[l.gang->team] -= l.gang->gpus;
      scheduler.Finish(it->second);  // releases what it holds
      live.erase(it->second);
      ++done;
    }
    for (; next < gangs.size() && gangs[next].arrive_s <= now; ++next) {
      const TeamGang& g = gangs[next];
      GangRequest request;
      request.id = g.id;
      request.demand = g.spec.total();
      request.shape = absl::HashOf(g.spec);
      if (policy == QueuePolicy::kQueues) {
        request.queue = teams[g.team].name;
        request.time_limit_ms = g.time_limit_s * 1000;
      }
      if (policy != QueuePolicy::kFifo) request.priority = g.priority;
      if (absl::Status s = scheduler.Submit(std::move(request), now * 1000, capacity.Add(g.spec));
          !s.ok())
        return s;
      Live& l = live.emplace(g.id, Live{&g, g.runtime_s}).first->second;
      if (g.gpus >= 16) {
        int holders = 0;
        for (NodeIndex n = 0; n < table->slot_count() && holders < kFewNodes; ++n)
          holders += capacity.CouldHold(scheduler.Ref(g.id), n);
        l.few_nodes = holders < kFewNodes;
      }
      wanted[g.team] += g.gpus;
    }
    // Running gangs save a checkpoint every checkpoint_every_s of their run.
    if (options.report_checkpoints) {
      for (const auto& [id, l] : live) {
        if (l.start_s >= 0 && now > l.start_s &&
            (now - l.start_s) % options.checkpoint_every_s == 0) {
          scheduler.Checkpointed(id, now * 1000);
        }
      }
    }
    const auto start = std::chrono::steady_clock::now();
    PassResult result = scheduler.Pass(now * 1000, capacity);
    run.pass_ms.push_back(MillisSince(start));
    ++run.passes;
    for (const std::string& id : result.admitted) {
      Live& l = live.at(id);
      if (!l.started_once) {
        run.waits[SizeBucket(l.gang->gpus, l.few_nodes)].push_back(
            static_cast<double>(now - l.gang->arrive_s));
        l.started_once = true;
      }
      l.start_s = now;
      ends.emplace(now + l.remaining_s, id);
      held[l.gang->team] += l.gang->gpus;
    }
    for (const Preemption& p : result.preempted) {
      Live& l = live.at(p.victim);
      for (auto it = ends.begin(); it != ends.end(); ++it) {
        if (it->second == p.victim) {
          ends.erase(it);
          break;
        }
      }
      const int64_t worked = now - l.start_s;
      const int64_t saved = worked / options.checkpoint_every_s * options.checkpoint_every_s;
      l.remaining_s -= saved;
      const double lost =
          static_cast<double>(worked - saved + options.grace_s) * l.gang->gpus / 3600;
      run.gpu_hours_lost += lost;
      auto& [count, lost_under_rule] = run.lost_by_rule[p.rule];
      ++count;
      lost_under_rule += lost;
      stops.emplace(now + options.grace_s, p.victim);
      ++run.preemptions;
    }
    const size_t hour = static_cast<size_t>(now / 3600);
    if (options.explain_waits != nullptr && policy == QueuePolicy::kQueues && hour < hours &&
        now % 1800 == 0) {
      ExplainWaits(*options.explain_waits, now, {teams, held, quota, wanted, *table}, live,
                   scheduler);
    }
    if (hour < hours && now % options.usable_every_s == 0) {
      SubmittedGangs submitted;
      for (const auto& [id, l] : live) {
        const GangView* view = scheduler.Find(id);
        submitted.emplace_back(l.gang, view != nullptr && view->state == GangState::kRunning);
      }
      const std::vector<double> shared = SharedDemand(idle_table, quota, submitted);
      const std::vector<double> usable = UsableDemand(idle_table, quota, std::move(submitted));
      for (size_t t = 0; t < teams.size(); ++t) {
        run.team_shared[t][hour] += shared[t];
        run.team_usable[t][hour] += usable[t];
        ++usable_samples[t][hour];
      }
    }
    double all = 0;
    for (size_t t = 0; t < teams.size(); ++t) {
      all += held[t];
      if (hour < hours) {
        run.team_allocated[t][hour] += held[t] * dt / 3600;
        demand[t][hour] += wanted[t] * dt / 3600;
      }
    }
    if (hour < hours) run.allocation_by_hour[hour] += all / run.gpus * dt / 3600;
    run.gpu_hours_run += all * dt / 3600;
    run.end_s = now;
    if (now > options.measure_hours * 3600 + 90 * 24 * 3600) {
      return absl::DeadlineExceededError(absl::StrCat(
          QueuePolicyName(policy), ": gangs still waiting 90 days after the arrivals"));
    }
  }
  run.team_entitled.assign(teams.size(), std::vector<double>(hours, 0));
  for (size_t t = 0; t < teams.size(); ++t) {
    for (size_t h = 0; h < hours; ++h) {
      const bool wants = demand[t][h] > 0;
      run.team_entitled[t][h] =
          wants ? std::min(quota[t], demand[t][h]) : std::numeric_limits<double>::quiet_NaN();
      for (auto* sampled : {&run.team_usable, &run.team_shared}) {
        (*sampled)[t][h] = wants && usable_samples[t][h] > 0
                               ? (*sampled)[t][h] / usable_samples[t][h]
                               : std::numeric_limits<double>::quiet_NaN();
      }
    }
  }
  return run;
}

absl::StatusOr<PassTime> MeasurePass(const std::vector<TraceNode>& nodes,
                                     const std::vector<TeamGang>& gangs, int queues, int pending,
                                     int repeats) {
  absl::StatusOr<NodeResourceTable> table = BuildCluster(nodes);
  if (!table.ok()) return table.status();
  PlacementScorer scorer(ScorerKind::kFragmentation, {});
  PlacerCapacity capacity(&*table, &scorer);
  const double gpus = ClusterGpus(nodes);
  std::vector<Team> teams;
  for (int q = 0; q < queues; ++q) {
    teams.push_back({absl::StrCat("queue-", q), 1.0 / queues, 1.0 / queues, 0});
  }
  absl::StatusOr<QueueConfig> config =
      TeamQueues(teams, gpus, QueueRunOptions().within_queue_preemption);
  if (!config.ok()) return config.status();
  QueueScheduler scheduler(*std::move(config), {});
  // Fill the cluster, then queue `pending` more.
  PassTime time;
  size_t i = 0;
  double submitted = 0;
  for (; i < gangs.size() && submitted < 1.2 * gpus; ++i) {
    GangRequest r{gangs[i].id, teams[i % queues].name, gangs[i].priority, gangs[i].spec.total()};
    r.time_limit_ms = gangs[i].time_limit_s * 1000;
    r.shape = absl::HashOf(gangs[i].spec);
    if (absl::Status s = scheduler.Submit(std::move(r), 0, capacity.Add(gangs[i].spec)); !s.ok())
      return s;
    submitted += gangs[i].gpus;
  }
  time.running = static_cast<int64_t>(scheduler.Pass(0, capacity).admitted.size());
  int added = 0;
  for (; i < gangs.size() && added < pending; ++i, ++added) {
    GangRequest r{gangs[i].id, teams[i % queues].name, gangs[i].priority, gangs[i].spec.total()};
    r.time_limit_ms = gangs[i].time_limit_s * 1000;
    r.shape = absl::HashOf(gangs[i].spec);
    if (absl::Status s = scheduler.Submit(std::move(r), 1000, capacity.Add(gangs[i].spec)); !s.ok())
      return s;
  }
  if (added < pending) return absl::InvalidArgumentError("not enough gangs for the pending queue");
  auto start = std::chrono::steady_clock::now();
  const int64_t before = capacity.decisions();
  // Under `valgrind --tool=callgrind --collect-atstart=no` the first pass
  // alone is counted: instructions, which this VM's drifting speed leaves
  // alone (no-ops otherwise).
  BERTH_CALLGRIND_TOGGLE();
  PassResult first = scheduler.Pass(2000, capacity);
  BERTH_CALLGRIND_TOGGLE();
  time.first_ms = MillisSince(start);
  time.first_decisions = capacity.decisions() - before;
  time.first_admitted = static_cast<int64_t>(first.admitted.size());
  time.first_preempted = static_cast<int64_t>(first.preempted.size());
  start = std::chrono::steady_clock::now();
  for (int k = 0; k < repeats; ++k) scheduler.Pass(3000 + 1000 * k, capacity);
  time.steady_ms = MillisSince(start) / repeats;
  // With churn: before each pass a running gang ends (its room is free
  // again, so every waiting shape is worth a new trial).
  double churn_ms = 0;
  for (int k = 0; k < repeats; ++k) {
    for (size_t j = 0; j < i; ++j) {
      const GangView* v = scheduler.Find(gangs[j].id);
      if (v == nullptr || v->state != GangState::kRunning) continue;
      scheduler.Finish(gangs[j].id);  // releases what it holds
      break;
    }
    start = std::chrono::steady_clock::now();
    scheduler.Pass(100000 + 1000 * k, capacity);
    churn_ms += MillisSince(start);
  }
  time.churn_ms = churn_ms / repeats;
  return time;
}

}  // namespace berth::replay
