// Random workloads through the QueueScheduler, in simulated time, checking
// after every pass: no queue above its quota and borrowing limit, no cohort
// above its pool; every gang held whole or not at all; every preemption
// justified by its rule; and no gang waiting past the starvation bound plus
// the longest time limit for each gang that starved before it in its queue.
#include <random>

#include "gtest/gtest.h"
#include "queueing/queue_scheduler.h"
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
      if (b != q.borrowing_limit.end())
        EXPECT_LE(u, n.units() + b->second.units()) << where << " queue " << name;
      auto l = q.lending_limit.find(r);
      const int64_t lend = l == q.lending_limit.end() ? n.units() : l->second.units();
      pool[q.cohort + "/" + r] += lend;
      used[q.cohort + "/" + r] += std::max<int64_t>(0, u - (n.units() - lend));
    }
  }
  for (const auto& [key, p] : pool) EXPECT_LE(used[key], p) << where << " cohort " << key;
}

struct Outcome {
  int64_t admitted = 0;
  int64_t preempted = 0;
};

Outcome Simulate(const Workload& w, uint64_t seed) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = 100 * kStep;
  QueueScheduler s(w.config, options);
  PoolCapacity pool(ResourceSet::Of({{kGpu, w.gpus}}));
  std::map<std::string, const Workload::Job*> by_id;
  std::map<std::string, int64_t> ends, submitted;
  // Gangs past the starvation bound: how many of their queue were before them.
  std::map<std::string, int> starved_behind;
  std::vector<std::string> stopping;
  Outcome out;
  size_t done = 0;
  const std::string where = "seed " + std::to_string(seed);
  for (int64_t now = 0; done < w.jobs.size() && now < 5000 * kStep; now += kStep) {
    for (const std::string& id : std::exchange(stopping, {})) {  // a grace period of one step
      pool.Release(id);
      s.Preempted(id, now);
    }
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      pool.Release(it->first);
      s.Finish(it->first);
      ++done;
      it = ends.erase(it);
    }
    for (const Workload::Job& job : w.jobs) {
      if (job.submit_ms != now) continue;
      pool.Add(job.request.id, job.request.demand);
      EXPECT_TRUE(s.Submit(job.request, now).ok());
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
      EXPECT_TRUE(pool.Holds(id)) << where;
      EXPECT_EQ(s.Find(id)->state, GangState::kRunning);
      const int ahead = starved_behind.count(id) ? starved_behind[id] : 0;
      EXPECT_LE(now - before[id].waiting_since_ms,
                options.starvation_bound_ms + (ahead + 1) * (kMaxLimit + 4 * kStep))
          << where << " gang " << id << " starved";
      starved_behind.erase(id);
      ends[id] = now + by_id.at(id)->duration_ms;
      ++out.admitted;
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
          break;
        case PreemptionRule::kReclaim:
          EXPECT_NE(victim.request.queue, by.request.queue) << where;
          EXPECT_EQ(w.config.FindQueue(victim.request.queue)->cohort,
                    w.config.FindQueue(by.request.queue)->cohort);
          EXPECT_GT(usage[victim.request.queue].Get(kGpu),
                    w.config.FindQueue(victim.request.queue)->nominal.at("GPU"))
              << where << ": " << p.victim << " was reclaimed from a queue not borrowing";
          break;
        case PreemptionRule::kBackfill:
          EXPECT_GE(before[p.victim].started_ms, before[p.by].waiting_since_ms) << where;
          break;
      }
      ends.erase(p.victim);
      stopping.push_back(p.victim);
      ++out.preempted;
    }
    // Whole gangs: the pool holds exactly the running and stopping gangs.
    ResourceSet held;
    for (const auto& [id, job] : by_id) {
      const GangView* v = s.Find(id);
      const bool holds =
          v && (v->state == GangState::kRunning || v->state == GangState::kPreempting);
      EXPECT_EQ(pool.Holds(id), holds) << where << " gang " << id;
      if (holds) held.Add(job->request.demand).IgnoreError();
    }
    ResourceSet total = pool.free();
    total.Add(held).IgnoreError();
    EXPECT_EQ(total, ResourceSet::Of({{kGpu, w.gpus}})) << where;
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
    Outcome o = Simulate(w, seed);
    preempted += o.preempted;
    admitted += o.admitted;
    if (HasFailure()) break;
  }
  // The workloads exercise the rules, not only the easy path.
  EXPECT_GT(preempted, 50);
  EXPECT_GT(admitted, 5000);
}

}  // namespace
}  // namespace berth
