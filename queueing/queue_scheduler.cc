#include "queueing/queue_scheduler.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

std::string QueueOf(const GangRequest& r) {
  return r.queue.empty() ? std::string(kDefaultQueue) : r.queue;
}

}  // namespace

absl::string_view PreemptionRuleName(PreemptionRule rule) {
  switch (rule) {
    case PreemptionRule::kReclaim:
      return "reclaim";
    case PreemptionRule::kPriority:
      return "priority";
    case PreemptionRule::kBackfill:
      return "backfill";
  }
  return "unknown";
}

absl::string_view GangStateName(GangState state) {
  switch (state) {
    case GangState::kPending:
      return "PENDING";
    case GangState::kClaimed:
      return "CLAIMED";
    case GangState::kRunning:
      return "RUNNING";
    case GangState::kPreempting:
      return "PREEMPTING";
  }
  return "UNKNOWN";
}

absl::Status QueueScheduler::Reconfigure(QueueConfig config) {
  for (const auto& [id, g] : gangs_) {
    if (config.FindQueue(g.request.queue) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "queues: queue '", g.request.queue, "' still has gang ", id, "; stop its work first"));
    }
  }
  config_ = std::move(config);
  ledger_.Reconfigure(&config_);
  return absl::OkStatus();
}

absl::Status QueueScheduler::Submit(GangRequest request, int64_t now_ms) {
  request.queue = QueueOf(request);
  if (absl::StatusOr<const QueueSpec*> q = config_.Resolve(request.queue, "queue"); !q.ok()) {
    return q.status();
  }
  if (gangs_.count(request.id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("gang ", request.id, " is already queued"));
  }
  Gang g;
  g.arrival = next_arrival_++;
  g.view.waiting_since_ms = now_ms;
  g.view.reason = "waiting for its turn";
  std::string id = request.id;
  g.request = std::move(request);
  gangs_.emplace(std::move(id), std::move(g));
  return absl::OkStatus();
}

absl::Status QueueScheduler::RestoreRunning(GangRequest request, ResourceSet charge,
                                            int64_t started_ms, int64_t waiting_since_ms) {
  const std::string id = request.id;
  if (absl::Status s = Submit(std::move(request), waiting_since_ms); !s.ok()) return s;
  Gang& g = gangs_.at(id);
  Admit(g, std::move(charge), started_ms, false);
  return absl::OkStatus();
}

void QueueScheduler::Finish(const std::string& id) {
  auto it = gangs_.find(id);
  if (it == gangs_.end()) return;
  const GangState state = it->second.view.state;
  if (state == GangState::kRunning || state == GangState::kClaimed) {
    ledger_.Remove(it->second.request.queue, it->second.view.charge);
  }
  gangs_.erase(it);
}

void QueueScheduler::Preempted(const std::string& id, int64_t now_ms) {
  auto it = gangs_.find(id);
  if (it == gangs_.end() || it->second.view.state != GangState::kPreempting) return;
  Gang& g = it->second;
  g.view.state = GangState::kPending;
  g.view.waiting_since_ms = now_ms;
  ++g.wait_epoch;
  g.backfilled_past.clear();
}

const GangView* QueueScheduler::Find(const std::string& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : &it->second.view;
}

QueueView QueueScheduler::Queue(const std::string& name, const ResourceSet& capacity) const {
  QueueView v;
  v.usage = ledger_.Usage(name);
  v.borrowed = ledger_.Borrowed(name);
  v.share = ledger_.Share(name, capacity);
  for (const auto& [id, g] : gangs_) {
    if (g.request.queue != name) continue;
    const GangState s = g.view.state;
    if (s == GangState::kPending || s == GangState::kClaimed) ++v.pending;
    if (s == GangState::kRunning) ++v.running;
  }
  return v;
}

void QueueScheduler::Admit(Gang& g, ResourceSet charge, int64_t now_ms, bool backfilled) {
  ledger_.Add(g.request.queue, charge);
  g.view.charge = std::move(charge);
  g.view.state = GangState::kRunning;
  g.view.started_ms = now_ms;
  g.view.reason = backfilled ? "running (backfilled past a reservation: preemptible by it)" : "";
  g.view.preempted_by.clear();
  g.awaiting.clear();
}

struct QueueScheduler::PassState {
  int64_t now_ms;
  CapacityModel& capacity;
  PassResult result;
  std::vector<Reservation> held;
  std::set<std::string> reserved;  // gangs of `held`
  std::set<std::string> tried;
  // Queues that admit nothing more this pass, and the starving gang each waits behind.
  std::map<std::string, std::string> closed;
  std::set<std::string> admitted;  // of result.admitted
};

std::optional<std::vector<Preemption>> QueueScheduler::ChooseVictims(const Gang& g,
                                                                     const PassState& pass) const {
  CapacityModel& capacity = pass.capacity;
  const QueueSpec* q = config_.FindQueue(g.request.queue);
  const bool within_nominal = ledger_.Check(g.request.queue, g.request.demand).within_nominal;
  struct Candidate {
    const Gang* gang;
    PreemptionRule rule;
  };
  std::vector<Candidate> candidates;
  for (const auto& [id, c] : gangs_) {
    if (c.view.state != GangState::kRunning || !c.request.preemptible || pass.reserved.count(id) ||
        pass.admitted.count(id)) {
      continue;
    }
    if (c.request.queue == g.request.queue && c.request.priority < g.request.priority) {
      candidates.push_back({&c, PreemptionRule::kPriority});
    } else if (c.backfilled_past.count({g.request.id, g.wait_epoch}) != 0) {
      candidates.push_back({&c, PreemptionRule::kBackfill});
    } else if (within_nominal && q != nullptr && !q->cohort.empty() &&
               c.request.queue != g.request.queue &&
               config_.FindQueue(c.request.queue)->cohort == q->cohort &&
               ledger_.IsBorrowing(c.request.queue, g.request.demand)) {
      candidates.push_back({&c, PreemptionRule::kReclaim});
    }
  }
  if (candidates.empty()) return std::nullopt;
  // Fewest GPU-hours lost: lowest priority, then the youngest, then the smallest.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const GangView& x = a.gang->view;
    const GangView& y = b.gang->view;
    return std::make_tuple(a.gang->request.priority, -x.started_ms, x.charge.Get(kGpu),
                           a.gang->request.id) < std::make_tuple(b.gang->request.priority,
                                                                 -y.started_ms, y.charge.Get(kGpu),
                                                                 b.gang->request.id);
  });
  std::vector<const Candidate*> chosen;
  auto released = [&](const std::vector<const Candidate*>& set) {
    std::vector<std::pair<std::string, ResourceSet>> out;
    for (const Candidate* c : set) out.emplace_back(c->gang->request.queue, c->gang->view.charge);
    return out;
  };
  auto quota_ok = [&](const std::vector<const Candidate*>& set) {
    return ledger_.Check(g.request.queue, g.request.demand, released(set)).fits;
  };
  auto room_ok = [&](const std::vector<const Candidate*>& set) {
    std::vector<std::string> ids;
    for (const Candidate* c : set) ids.push_back(c->gang->request.id);
    return capacity.FitsWithout(g.request.id, ids);
  };
  // A reclaim victim's queue must still be borrowing without the victims
  // chosen before it: reclaiming stops at a queue's own nominal quota.
  auto still_borrowing = [&](const Candidate& c) {
    ResourceSet usage = ledger_.Usage(c.gang->request.queue);
    for (const Candidate* d : chosen) {
      if (d->gang->request.queue == c.gang->request.queue)
        usage.Subtract(d->gang->view.charge).IgnoreError();
    }
    const QueueSpec* owner = config_.FindQueue(c.gang->request.queue);
    for (const auto& [r, amount] : g.request.demand.entries()) {
      auto n = owner->nominal.find(r);
      if (n != owner->nominal.end() && usage.Get(r) > n->second) return true;
    }
    return false;
  };
  bool satisfied = false;
  for (const Candidate& c : candidates) {
    if (c.rule == PreemptionRule::kReclaim && !still_borrowing(c)) continue;
    chosen.push_back(&c);
    if (quota_ok(chosen) && room_ok(chosen)) {
      satisfied = true;
      break;
    }
  }
  if (!satisfied) return std::nullopt;
  // Keep a minimal set: drop, newest choice first, any victim not needed.
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<const Candidate*> without = chosen;
    without.erase(without.begin() + i);
    if (!without.empty() && quota_ok(without) && room_ok(without)) chosen = std::move(without);
  }
  std::vector<Preemption> out;
  for (const Candidate* c : chosen) {
    out.push_back({c->gang->request.id, g.request.id, c->rule,
                   absl::StrCat("preempted by ", g.request.id, " of queue ", g.request.queue, " (",
                                PreemptionRuleName(c->rule), ")")});
  }
  return out;
}

QueueScheduler::Reservation QueueScheduler::Reserve(const Gang& g, int64_t now_ms, bool starving,
                                                    CapacityModel& capacity) const {
  // Running gangs by the time they end at the latest (preempting ones now).
  std::vector<std::pair<int64_t, std::string>> ending;
  std::vector<std::string> all;
  for (const auto& [id, c] : gangs_) {
    if (c.view.state == GangState::kPreempting) {
      ending.emplace_back(now_ms, id);
    } else if (c.view.state == GangState::kRunning && c.request.time_limit_ms) {
      ending.emplace_back(c.view.started_ms + *c.request.time_limit_ms, id);
    }
    if (c.view.state == GangState::kPreempting || c.view.state == GangState::kRunning)
      all.push_back(id);
  }
  std::sort(ending.begin(), ending.end());
  auto prefix = [&](size_t k) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < k; ++i) ids.push_back(ending[i].second);
    return ids;
  };
  Reservation r{g.request.id, {}, kNever, starving};
  if (ending.empty() || !capacity.FitsWithout(g.request.id, prefix(ending.size()))) {
    r.freed = std::move(all);
    return r;
  }
  // The fewest gangs to end (freeing more only helps): binary search.
  size_t lo = 0, hi = ending.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (capacity.FitsWithout(g.request.id, prefix(mid))) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  r.freed = prefix(lo);
  r.start_ms = lo == 0 ? now_ms : std::max(now_ms, ending[lo - 1].first);
  return r;
}

bool QueueScheduler::RespectsReservations(const Gang& g, int64_t now_ms,
                                          const std::vector<Reservation>& held,
                                          CapacityModel& capacity,
                                          std::set<std::pair<std::string, uint64_t>>* past,
                                          std::string* reason) const {
  for (const Reservation& r : held) {
    if (r.gang == g.request.id) continue;
    if (g.request.time_limit_ms && r.start_ms != kNever &&
        now_ms + *g.request.time_limit_ms <= r.start_ms) {
      continue;  // ends before the reserved gang can start
    }
    if (capacity.FitsWithout(r.gang, r.freed)) continue;  // leaves it its room
    if (!r.starving && g.request.preemptible) {
      past->emplace(r.gang, gangs_.at(r.gang).wait_epoch);
      continue;
    }
    *reason = absl::StrCat("would delay ", r.gang, ", which holds a reservation",
                           r.starving ? " (it has waited past the starvation bound)" : "");
    return false;
  }
  return true;
}

void QueueScheduler::StartPreemptions(Gang& by, std::vector<Preemption> victims,
                                      PassResult* result) {
  for (Preemption& p : victims) {
    Gang& v = gangs_.at(p.victim);
    // The quota comes back now; the room when the caller reports Preempted.
    ledger_.Remove(v.request.queue, v.view.charge);
    v.view.charge = ResourceSet();
    v.view.state = GangState::kPreempting;
    v.view.reason = p.reason;
    v.view.preempted_by = p.reason;
    ++v.view.preemptions;
    by.awaiting.insert(p.victim);
    result->preempted.push_back(std::move(p));
  }
  by.view.state = GangState::kClaimed;
  by.view.charge = by.request.demand;
  ledger_.Add(by.request.queue, by.view.charge);
  by.view.reason = absl::StrCat("waiting for ", by.awaiting.size(), " preempted gang(s) to stop");
}

void QueueScheduler::TryGang(Gang& g, PassState& pass) {
  pass.tried.insert(g.request.id);
  const int64_t now_ms = pass.now_ms;
  const std::string& queue = g.request.queue;
  const bool starving = now_ms - g.view.waiting_since_ms >= options_.starvation_bound_ms;
  const QuotaVerdict quota = ledger_.Check(queue, g.request.demand);
  // A preempted gang keeps saying so while it waits.
  auto wait = [&g](std::string why) {
    g.view.reason =
        g.view.preempted_by.empty() ? std::move(why) : absl::StrCat(g.view.preempted_by, "; ", why);
  };
  if (auto closed = pass.closed.find(queue); closed != pass.closed.end()) {
    wait(absl::StrCat("waiting behind ", closed->second,
                      ", which has waited past the starvation bound"));
    return;
  }
  if (!g.request.preemptible && !quota.within_nominal) {
    wait(absl::StrCat("preemptible: false runs only within the queue's nominal quota: ",
                      quota.reason.empty() ? "it would borrow" : quota.reason));
    if (starving) pass.closed.emplace(queue, g.request.id);
    return;
  }
  auto claim = [&](std::vector<Preemption> victims) {
    std::vector<std::string> freed;
    for (const Preemption& p : victims) freed.push_back(p.victim);
    StartPreemptions(g, std::move(victims), &pass.result);
    pass.held.push_back({g.request.id, std::move(freed), now_ms, false});
    pass.reserved.insert(g.request.id);
  };
  if (!quota.fits) {
    if (!quota.never && options_.preemption) {
      if (auto victims = ChooseVictims(g, pass)) {
        claim(*std::move(victims));
        return;
      }
    }
    wait(quota.never ? absl::StrCat(quota.reason, "; it can never fit")
                     : absl::StrCat("waiting for quota: ", quota.reason));
    // Past the bound, nothing behind it takes the quota it waits for.
    if (starving && !quota.never) pass.closed.emplace(queue, g.request.id);
    return;
  }
  std::string why;
  if (std::optional<ResourceSet> charge = pass.capacity.Place(g.request.id, &why)) {
    if (*charge != g.request.demand) {
      const QuotaVerdict placed = ledger_.Check(queue, *charge);
      if (!placed.fits) {
        pass.capacity.Release(g.request.id);
        wait(absl::StrCat("waiting for quota where it fits: ", placed.reason));
        return;
      }
    }
    std::set<std::pair<std::string, uint64_t>> past;
    std::string reason;
    if (!RespectsReservations(g, now_ms, pass.held, pass.capacity, &past, &reason)) {
      pass.capacity.Release(g.request.id);
      wait(reason);
      return;
    }
    Admit(g, *std::move(charge), now_ms, !past.empty());
    g.backfilled_past = std::move(past);
    pass.result.admitted.push_back(g.request.id);
    pass.admitted.insert(g.request.id);
    return;
  }
  // Fits its quota, not the nodes.
  if (options_.preemption) {
    if (auto victims = ChooseVictims(g, pass)) {
      claim(*std::move(victims));
      return;
    }
  }
  wait(absl::StrCat("waiting for room: ", why));
  if (starving) pass.closed.emplace(queue, g.request.id);  // and for its quota
  if (options_.reservations && (starving || pass.held.size() < options_.max_reservations)) {
    pass.held.push_back(Reserve(g, now_ms, starving, pass.capacity));
    pass.reserved.insert(g.request.id);
  }
}

PassResult QueueScheduler::Pass(int64_t now_ms, CapacityModel& capacity) {
  PassState pass{now_ms, capacity, {}, {}, {}, {}, {}, {}};
  const ResourceSet totals = capacity.Capacity();

  // Claimed gangs hold their quota: they start as soon as their victims'
  // room is free, and keep a reservation on it meanwhile.
  for (auto& [id, g] : gangs_) {
    if (g.view.state != GangState::kClaimed) continue;
    for (auto it = g.awaiting.begin(); it != g.awaiting.end();) {
      auto v = gangs_.find(*it);
      it = v != gangs_.end() && v->second.view.state == GangState::kPreempting
               ? std::next(it)
               : g.awaiting.erase(it);
    }
    std::string why;
    if (std::optional<ResourceSet> charge = capacity.Place(id, &why)) {
      ledger_.Remove(g.request.queue, g.view.charge);
      Admit(g, *std::move(charge), now_ms, false);
      pass.result.admitted.push_back(id);
      pass.admitted.insert(id);
      continue;
    }
    if (g.awaiting.empty()) {  // its room went elsewhere: wait as before
      ledger_.Remove(g.request.queue, g.view.charge);
      g.view.charge = ResourceSet();
      g.view.state = GangState::kPending;
      continue;
    }
    pass.held.push_back({id, {g.awaiting.begin(), g.awaiting.end()}, now_ms, false});
    pass.reserved.insert(id);
  }

  // Gangs past the starvation bound first, oldest first, then last pass's
  // reservations: nothing ordered before them takes what they wait for.
  std::vector<Gang*> first;
  for (auto& [id, g] : gangs_) {
    if (g.view.state == GangState::kPending &&
        now_ms - g.view.waiting_since_ms >= options_.starvation_bound_ms)
      first.push_back(&g);
  }
  std::sort(first.begin(), first.end(),
            [](const Gang* a, const Gang* b) { return a->arrival < b->arrival; });
  for (const std::string& id : std::exchange(reserved_, {})) {
    auto it = gangs_.find(id);
    if (it != gangs_.end() && it->second.view.state == GangState::kPending)
      first.push_back(&it->second);
  }
  for (Gang* g : first) {
    if (pass.tried.count(g->request.id) == 0) TryGang(*g, pass);
  }

  // Pending gangs, by queue, in queue order.
  std::map<std::string, std::vector<Gang*>> by_queue;
  for (auto& [id, g] : gangs_) {
    if (g.view.state == GangState::kPending && pass.tried.count(id) == 0)
      by_queue[g.request.queue].push_back(&g);
  }
  // Priority, then arrival; but a gang past the starvation bound goes
  // before every priority (it ages, as in Slurm's multifactor priority).
  auto key = [&](const Gang* g) {
    const bool starving = now_ms - g->view.waiting_since_ms >= options_.starvation_bound_ms;
    return std::make_tuple(starving ? 0 : 1, starving ? 0 : -int64_t{g->request.priority},
                           g->arrival);
  };
  for (auto& [name, list] : by_queue) {
    std::sort(list.begin(), list.end(),
              [&](const Gang* a, const Gang* b) { return key(a) < key(b); });
  }
  std::map<std::string, size_t> cursor;
  std::set<std::pair<double, std::string>> order;  // (share, queue): DRF
  for (const auto& [name, list] : by_queue) order.emplace(ledger_.Share(name, totals), name);

  while (!order.empty()) {
    const std::string name = order.begin()->second;
    order.erase(order.begin());
    std::vector<Gang*>& list = by_queue[name];
    size_t& i = cursor[name];
    Gang& g = *list[i++];
    TryGang(g, pass);
    if (i < list.size()) order.emplace(ledger_.Share(name, totals), name);
  }
  for (const Reservation& r : pass.held) {
    if (gangs_.at(r.gang).view.state == GangState::kPending) reserved_.push_back(r.gang);
  }
  return std::move(pass.result);
}

}  // namespace berth
