// Random workloads through the QueueScheduler, in simulated time, on a
// counting pool and on the real placement core (PlacerCapacity over a node
// table, also with gangs pinned to its one H100 node), checking after every pass: no queue above
// its quota and borrowing limit, no cohort above its pool; every gang held whole or not at all;
// every preemption justified by its rule; and no gang waiting past the starvation bound plus the
// longest time limit for each gang that starved before it in its queue.
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "queueing/placer_capacity.h"
#include "queueing/queue_scheduler.h"
#include "tests/unit/placement_test_util.h"
#include "tests/unit/queueing/pool_capacity_test_util.h"

namespace berth {
namespace {

using testing::PoolCapacity;

struct Workload {
  QueueConfig config;
  double gpus = 0;
  struct Job {
    GangRequest request;
    int64_t submit_ms = 0;
    int64_t duration_ms = 0;
    PlacementStrategy strategy = PlacementStrategy::kPack;  // of its one-GPU bundles
    std::string accelerator;  // the type its bundles are pinned to; empty: any
  };
  std::vector<Job> jobs;
};

constexpr int64_t kStep = 1000;
constexpr int64_t kMaxLimit = 60 * kStep;

Workload RandomWorkload(std::mt19937_64& rng, bool cohort) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Workload w;
  w.gpus = 8 * uniform(2, 6);
  if (cohort) w.config = w.config.WithCohort("c").value();
  const int queues = uniform(2, 4);
  for (int q = 0; q < queues; ++q) {
    QueueInput in;
    in.name = "q" + std::to_string(q);
    in.nominal = {{"GPU", static_cast<double>(uniform(8, static_cast<int>(w.gpus)))}};
    if (cohort && uniform(0, 3) != 0) {
      in.cohort = "c";
      if (uniform(0, 1)) in.borrowing_limit = {{"GPU", static_cast<double>(uniform(0, 16))}};
      if (uniform(0, 1))
        in.lending_limit = {{"GPU", static_cast<double>(uniform(0, in.nominal["GPU"]))}};
    }
    in.weight = uniform(1, 3);
    in.within_queue_preemption = std::vector<std::string>{
        "Never", "LowerPriority", "LowerOrNewerEqualPriority"}[uniform(0, 2)];
    w.config = w.config.WithQueue(QueueSpecFromInput(in, "queue").value()).value();
  }
  const int jobs = uniform(20, 80);
  for (int j = 0; j < jobs; ++j) {
    Workload::Job job;
    const std::string queue = "q" + std::to_string(uniform(0, queues - 1));
    const double nominal = w.config.FindQueue(queue)->nominal.at("GPU").ToDouble();
    const double size = std::min<double>(nominal, std::vector<int>{1, 1, 2, 4, 8}[uniform(0, 4)]);
    job.request = {"j" + std::to_string(j), queue,
                   uniform(0, 2),           ResourceSet::Of({{kGpu, size}}),
                   uniform(0, 4) != 0,      std::nullopt};
    job.duration_ms = uniform(1, 30) * kStep;
    job.request.time_limit_ms = job.duration_ms + uniform(0, 30) * kStep;  // <= kMaxLimit
    job.submit_ms = uniform(0, 100) * kStep;
    job.strategy =
        std::vector<PlacementStrategy>{PlacementStrategy::kPack, PlacementStrategy::kSpread,
                                       PlacementStrategy::kStrictPack}[uniform(0, 2)];
    w.jobs.push_back(std::move(job));
  }
  return w;
}

// Checks the quota invariants of every queue and cohort.
void CheckQuota(const QueueScheduler& s, const std::string& where) {
  const QueueConfig& config = s.config();
  std::map<std::string, __int128> pool, used;
  for (const auto& [name, q] : config.queues()) {
    for (const auto& [r, n] : q.nominal) {
      const int64_t u = s.ledger().Usage(name).Get(r).units();
      if (q.cohort.empty()) {
        EXPECT_LE(u, n.units()) << where << " queue " << name;
        continue;
      }
      auto b = q.borrowing_limit.find(r);
      if (b != q.borrowing_limit.end()) {
        EXPECT_LE(u, n.units() + b->second.units()) << where << " queue " << name;
      }
      auto l = q.lending_limit.find(r);
      const int64_t lend = l == q.lending_limit.end() ? n.units() : l->second.units();
      pool[q.cohort + "/" + r] += lend;
      used[q.cohort + "/" + r] += std::max<int64_t>(0, u - (n.units() - lend));
    }
  }
  for (const auto& [key, p] : pool) EXPECT_LE(used[key], p) << where << " cohort " << key;
}

// The capacity a simulation runs on, and how the test checks it.
class TestCapacity {
 public:
  virtual ~TestCapacity() = default;
  virtual CapacityModel& model() = 0;
  // What the model keeps of the job's gang, for its record in `s`.
  virtual std::unique_ptr<CapacityModel::Gang> Add(const Workload::Job& job) = 0;
  // Holds all of the gang (never a part of it).
  virtual bool Holds(const QueueScheduler& s, const std::string& id) const = 0;
  // What the capacity holds is exactly what `holding` (id -> job) asks.
  virtual void CheckHeld(const QueueScheduler& s,
                         const std::map<std::string, const Workload::Job*>& holding,
                         const std::string& where) const = 0;
};

class OnPool : public TestCapacity {
 public:
  explicit OnPool(double gpus) : total_(ResourceSet::Of({{kGpu, gpus}})), pool_(total_) {}
  CapacityModel& model() override { return pool_; }
  std::unique_ptr<CapacityModel::Gang> Add(const Workload::Job& job) override {
    pool_.Add(job.request.id, job.request.demand);
    return nullptr;
  }
  bool Holds(const QueueScheduler& s, const std::string& id) const override {
    return pool_.Holds(id);
  }
  void CheckHeld(const QueueScheduler& s,
                 const std::map<std::string, const Workload::Job*>& holding,
                 const std::string& where) const override {
    ResourceSet total = pool_.free();
    for (const auto& [id, job] : holding) total.Add(job->request.demand).IgnoreError();
    EXPECT_EQ(total, total_) << where;
  }

 private:
  ResourceSet total_;
  PoolCapacity pool_;
};

// Nodes of 8 GPUs of two accelerator types, every other node H100 unless
// `h100_nodes` says how many (the first ones); a gang of N GPUs is N
// one-GPU bundles under its job's strategy, pinned to its job's type.
class OnNodes : public TestCapacity {
 public:
  explicit OnNodes(double gpus, std::optional<int> h100_nodes = std::nullopt) {
    for (int n = 0; n < gpus / 8; ++n) {
      const bool h100 = h100_nodes ? n < *h100_nodes : n % 2 == 0;
      table_.AddNode(testing::MakeNode("node-" + std::to_string(n), 64, 8, h100 ? "H100" : "A10G"))
          .value();
    }
  }
  CapacityModel& model() override { return capacity_; }
  std::unique_ptr<CapacityModel::Gang> Add(const Workload::Job& job) override {
    const int gpus = static_cast<int>(job.request.demand.Get(kGpu).ToDouble());
    const Bundle bundle = testing::MakeBundle(
        ResourceSet::Of({{kGpu, 1}, {kCpu, 2}}),
        job.accelerator.empty()
            ? ""
            : absl::StrCat(kAcceleratorTypeLabel, " in (", job.accelerator, ")"));
    bundles_[job.request.id] = gpus;
    return capacity_.Add(testing::MakeGroup(testing::Repeat(bundle, gpus), job.strategy));
  }
  bool Holds(const QueueScheduler& s, const std::string& id) const override {
    return PlacerCapacity::Held(s.Ref(id)).size() == bundles_.at(id);
  }
  void CheckHeld(const QueueScheduler& s,
                 const std::map<std::string, const Workload::Job*>& holding,
                 const std::string& where) const override {
    std::vector<ResourceSet> used(table_.slot_count());
    for (const auto& [id, job] : holding) {
      EXPECT_TRUE(Holds(s, id)) << where << " gang " << id << " is held in part";
      for (const BundlePlacement& p : PlacerCapacity::Held(s.Ref(id)))
        used[p.allocation.node].Add(p.allocation.resources).IgnoreError();
    }
    for (NodeIndex n = 0; n < table_.slot_count(); ++n) {
      ResourceSet free = table_.node(n).available;
      free.Add(used[n]).IgnoreError();
      EXPECT_EQ(free, table_.node(n).total) << where << " node " << n;
    }
  }

 private:
  NodeResourceTable table_;
  PlacerCapacity capacity_{&table_, nullptr};
  std::map<std::string, size_t> bundles_;
};

struct Outcome {
  int64_t admitted = 0;
  int64_t preempted = 0;
  int64_t for_spared_nodes = 0;  // of `preempted`
};

Outcome Simulate(const Workload& w, uint64_t seed, TestCapacity& capacity,
                 bool check_starvation = true) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = 100 * kStep;
  QueueScheduler s(w.config, options);
  CapacityModel& pool = capacity.model();
  std::map<std::string, const Workload::Job*> by_id;
  std::map<std::string, int64_t> ends, submitted;
  std::map<std::string, size_t> arrival;  // the order of submission
  // Gangs past the starvation bound: how many of their queue were before them.
  std::map<std::string, int> starved_behind;
  std::vector<std::string> stopping;
  Outcome out;
  size_t done = 0;
  const std::string where = "seed " + std::to_string(seed);
  for (int64_t now = 0; done < w.jobs.size() && now < 5000 * kStep; now += kStep) {
    for (const std::string& id : std::exchange(stopping, {})) {  // a grace period of one step
      pool.Release(s.Ref(id));
      s.Preempted(id, now);
    }
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      pool.Release(s.Ref(it->first));
      s.Finish(it->first);
      ++done;
      it = ends.erase(it);
    }
    // Some running gangs report a checkpoint (victims then cost less).
    for (const auto& [id, n] : arrival) {
      const GangView* v = s.Find(id);
      if (v != nullptr && v->state == GangState::kRunning && (n + now / kStep) % 5 == 0)
        s.Checkpointed(id, now);
    }
    for (const Workload::Job& job : w.jobs) {
      if (job.submit_ms != now) continue;
      EXPECT_TRUE(s.Submit(job.request, now, capacity.Add(job)).ok());
      arrival[job.request.id] = arrival.size();
      by_id[job.request.id] = &job;
      submitted[job.request.id] = now;
    }
    // What the rules look at, before the pass.
    std::map<std::string, GangView> before;
    std::map<std::string, ResourceSet> usage;
    for (const auto& [id, job] : by_id) {
      if (const GangView* v = s.Find(id)) before[id] = *v;
    }
    for (const auto& [name, q] : w.config.queues()) usage[name] = s.ledger().Usage(name);
    for (const auto& [id, job] : by_id) {
      const GangView* v = s.Find(id);
      if (v == nullptr || v->state != GangState::kPending ||
          now - v->waiting_since_ms < options.starvation_bound_ms || starved_behind.count(id))
        continue;
      int ahead = 0;
      for (const auto& [other, n] : starved_behind) {
        const GangView* o = s.Find(other);
        ahead += o && o->state == GangState::kPending &&
                 by_id.at(other)->request.queue == job->request.queue;
      }
      starved_behind[id] = ahead;
    }
    const std::map<std::string, ResourceSet> usage_before = usage;
    PassResult r = s.Pass(now, pool);
    CheckQuota(s, where);
    // The most each queue used during the pass: before, plus what it
    // admitted and what its preempting gangs claimed.
    std::set<std::string> gained(r.admitted.begin(), r.admitted.end());
    for (const Preemption& p : r.preempted) gained.insert(p.by);
    for (const std::string& id : gained) {
      usage[by_id.at(id)->request.queue].Add(by_id.at(id)->request.demand).IgnoreError();
    }
    for (const std::string& id : r.admitted) {
      EXPECT_TRUE(capacity.Holds(s, id)) << where;
      EXPECT_EQ(s.Find(id)->state, GangState::kRunning);
      const int ahead = starved_behind.count(id) ? starved_behind[id] : 0;
      if (check_starvation) {
        EXPECT_LE(now - before[id].waiting_since_ms,
                  options.starvation_bound_ms + (ahead + 1) * (kMaxLimit + 4 * kStep))
            << where << " gang " << id << " starved";
      }
      starved_behind.erase(id);
      ends[id] = now + by_id.at(id)->duration_ms;
      ++out.admitted;
    }
    // A queue's usage when a preemption was decided is at most its usage
    // before the pass less its claimed gangs' (a claim whose room went
    // elsewhere is given back first) and the victims preempted from it before.
    std::map<std::string, ResourceSet> at_most = usage_before;
    for (const auto& [id, v] : before) {
      if (v.state == GangState::kClaimed)
        at_most[by_id.at(id)->request.queue].Subtract(v.charge).IgnoreError();
    }
    for (const Preemption& p : r.preempted) {
      const Workload::Job& victim = *by_id.at(p.victim);
      const Workload::Job& by = *by_id.at(p.by);
      EXPECT_EQ(before[p.victim].state, GangState::kRunning) << where;
      EXPECT_TRUE(victim.request.preemptible) << where;
      switch (p.rule) {
        case PreemptionRule::kPriority:
          EXPECT_EQ(victim.request.queue, by.request.queue) << where;
          EXPECT_LT(victim.request.priority, by.request.priority) << where;
          EXPECT_NE(w.config.FindQueue(by.request.queue)->within_queue_preemption,
                    WithinQueuePreemption::kNever)
              << where;
          break;
        case PreemptionRule::kNewer:
          EXPECT_EQ(victim.request.queue, by.request.queue) << where;
          EXPECT_EQ(victim.request.priority, by.request.priority) << where;
          EXPECT_GT(arrival.at(p.victim), arrival.at(p.by)) << where;
          EXPECT_EQ(w.config.FindQueue(by.request.queue)->within_queue_preemption,
                    WithinQueuePreemption::kLowerOrNewerEqualPriority)
              << where;
          break;
        case PreemptionRule::kReclaim:
          EXPECT_NE(victim.request.queue, by.request.queue) << where;
          EXPECT_EQ(w.config.FindQueue(victim.request.queue)->cohort,
                    w.config.FindQueue(by.request.queue)->cohort);
          EXPECT_GT(usage[victim.request.queue].Get(kGpu),
                    w.config.FindQueue(victim.request.queue)->nominal.at("GPU"))
              << where << ": " << p.victim << " was reclaimed from a queue not borrowing";
          EXPECT_LT(at_most.at(by.request.queue).Get(kGpu),
                    w.config.FindQueue(by.request.queue)->nominal.at("GPU"))
              << where << ": " << p.by << " reclaimed for a queue not below its quota";
          break;
        case PreemptionRule::kBackfill:
          EXPECT_GE(before[p.victim].started_ms, before[p.by].waiting_since_ms) << where;
          break;
        case PreemptionRule::kSparedNodes:
          EXPECT_TRUE(pool.HoldsPlacesSparedFor(s.Ref(p.victim), s.Ref(p.by))) << where;
          ++out.for_spared_nodes;
          EXPECT_LT(at_most.at(by.request.queue).Get(kGpu),
                    w.config.FindQueue(by.request.queue)->nominal.at("GPU"))
              << where << ": " << p.by << " took spared nodes for a queue not below its quota";
          break;
      }
      at_most[victim.request.queue].Subtract(victim.request.demand).IgnoreError();
      ends.erase(p.victim);
      stopping.push_back(p.victim);
      ++out.preempted;
    }
    // Whole gangs: the capacity holds exactly the running and stopping gangs.
    std::map<std::string, const Workload::Job*> holding;
    for (const auto& [id, job] : by_id) {
      const GangView* v = s.Find(id);
      const bool holds =
          v && (v->state == GangState::kRunning || v->state == GangState::kPreempting);
      EXPECT_EQ(capacity.Holds(s, id), holds) << where << " gang " << id;
      if (holds) holding[id] = job;
    }
    capacity.CheckHeld(s, holding, where);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(done, w.jobs.size()) << where << ": every gang ends";
  return out;
}

TEST(QueueingProperty, RandomWorkloadsKeepEveryRule) {
  int64_t preempted = 0, admitted = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    std::mt19937_64 rng(seed);
    Workload w = RandomWorkload(rng, /*cohort=*/seed % 3 != 0);
    OnPool pool(w.gpus);
    Outcome o = Simulate(w, seed, pool);
    preempted += o.preempted;
    admitted += o.admitted;
    if (HasFailure()) break;
  }
  // The workloads exercise the rules, not only the easy path.
  EXPECT_GT(preempted, 50);
  EXPECT_GT(admitted, 5000);
}

// The same on nodes: gangs placed whole by the real placement core, the
// node table always holding exactly the running gangs' bundles. Nodes
// fragment, so the starvation bound is not asserted here (a gang may wait
// for its places to drain), only every rule and that every gang ends.
TEST(QueueingProperty, OnTheRealPlacementCoreGangsAreHeldWholeAndTheTableAddsUp) {
  int64_t preempted = 0, admitted = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    Workload w = RandomWorkload(rng, /*cohort=*/seed % 3 != 0);
    OnNodes nodes(w.gpus);
    Outcome o = Simulate(w, seed, nodes, /*check_starvation=*/false);
    preempted += o.preempted;
    admitted += o.admitted;
    if (HasFailure()) break;
  }
  EXPECT_GT(preempted, 10);
  EXPECT_GT(admitted, 1500);
}

// Gangs pinned to the one H100 node of eight fit few nodes: those of a
// queue within its quota take it back from gangs that could run anywhere
// ("spared nodes"), and every rule still holds.
TEST(QueueingProperty, GangsPinnedToFewNodesTakeThemBackByTheRules) {
  int64_t for_spared_nodes = 0, admitted = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    Workload w = RandomWorkload(rng, /*cohort=*/true);
    for (Workload::Job& job : w.jobs) {
      if (std::uniform_int_distribution<int>(0, 5)(rng) == 0) job.accelerator = "H100";
    }
    OnNodes nodes(64, /*h100_nodes=*/1);
    Outcome o = Simulate(w, seed, nodes, /*check_starvation=*/false);
    for_spared_nodes += o.for_spared_nodes;
    admitted += o.admitted;
    if (HasFailure()) break;
  }
  EXPECT_GT(for_spared_nodes, 5);
  EXPECT_GT(admitted, 1500);
}

}  // namespace
}  // namespace berth
