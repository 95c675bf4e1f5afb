#include "queueing/queue_scheduler.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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
    case PreemptionRule::kNewer:
      return "newer, same priority";
    case PreemptionRule::kBackfill:
      return "backfill";
    case PreemptionRule::kSparedNodes:
      return "spared nodes";
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

std::vector<QueueScheduler::GangRecord> QueueScheduler::Export() const {
  std::vector<GangRecord> records;
  for (const auto& [id, g] : gangs_) {
    GangRecord r;
    r.request = g.request;
    r.arrival = g.arrival;
    r.state = g.view.state == GangState::kClaimed ? GangState::kPending : g.view.state;
    if (r.state == GangState::kRunning) r.charge = g.view.charge;
    r.waiting_since_ms = g.view.waiting_since_ms;
    r.started_ms = g.view.started_ms;
    r.preemptions = g.view.preemptions;
    r.preempted_by = g.view.preempted_by;
    records.push_back(std::move(r));
  }
  std::sort(records.begin(), records.end(),
            [](const GangRecord& a, const GangRecord& b) { return a.arrival < b.arrival; });
  return records;
}

absl::Status QueueScheduler::Restore(const std::vector<GangRecord>& records) {
  if (!gangs_.empty()) {
    return absl::FailedPreconditionError("the scheduler already has gangs; restore into a new one");
  }
  std::set<std::string> ids;
  for (const GangRecord& r : records) {
    if (config_.FindQueue(QueueOf(r.request)) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gang ", r.request.id, " names queue '", r.request.queue, "', which is not configured"));
    }
    if (!ids.insert(r.request.id).second) {
      return absl::FailedPreconditionError(absl::StrCat("gang ", r.request.id, " is saved twice"));
    }
  }
  for (const GangRecord& r : records) Insert(r);
  return absl::OkStatus();
}

absl::Status QueueScheduler::Restore(const GangRecord& record) {
  if (config_.FindQueue(QueueOf(record.request)) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("gang ", record.request.id, " names queue '",
                                                      record.request.queue,
                                                      "', which is not configured"));
  }
  if (gangs_.count(record.request.id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("gang ", record.request.id, " is already queued"));
  }
  Insert(record);
  return absl::OkStatus();
}

void QueueScheduler::Insert(const GangRecord& r) {
  Gang g;
  g.request = r.request;
  g.request.queue = QueueOf(r.request);
  g.arrival = r.arrival;
  g.view.waiting_since_ms = r.waiting_since_ms;
  g.view.preemptions = r.preemptions;
  g.view.preempted_by = r.preempted_by;
  g.view.reason = r.preempted_by.empty() ? "waiting for its turn" : r.preempted_by;
  Gang& placed = gangs_.emplace(r.request.id, std::move(g)).first->second;
  if (r.state == GangState::kRunning) {
    Admit(placed, r.charge, r.started_ms, false);
  } else if (r.state == GangState::kPreempting) {
    placed.view.state = GangState::kPreempting;
    placed.view.started_ms = r.started_ms;
    placed.view.reason = r.preempted_by;
  }
  next_arrival_ = std::max(next_arrival_, r.arrival + 1);
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

void QueueScheduler::Checkpointed(const std::string& id, int64_t at_ms) {
  auto it = gangs_.find(id);
  // A checkpoint of an earlier run (a late report) saves nothing of this one.
  if (it == gangs_.end() || it->second.view.state != GangState::kRunning ||
      at_ms <= it->second.view.started_ms) {
    return;
  }
  it->second.view.checkpointed_ms = std::max(it->second.view.checkpointed_ms, at_ms);
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
  g.view.checkpointed_ms = 0;
  // Assigned, not cleared: a running gang keeps no buffer of its wait.
  g.view.reason = backfilled
                      ? std::string("running (backfilled past a reservation: preemptible by it)")
                      : std::string();
  g.view.preempted_by = std::string();
  g.awaiting.clear();
}

struct QueueScheduler::PassState {
  int64_t now_ms;
  CapacityModel& capacity;
  const QueueConfig* config;
  ResourceSet totals;  // the capacity's, for shares
  PassResult result;
  std::vector<Reservation> held;
  std::set<std::string> reserved;  // gangs of `held`
  // Queues that admit nothing more this pass, and the starving gang each waits behind.
  std::map<std::string, std::string> closed;
  // Gangs past the starvation bound that this pass treats as starving.
  absl::flat_hash_set<const Gang*> starving;
  std::set<std::string> admitted;  // of result.admitted
  // Gangs that hold room: running or preempting when the pass began, and
  // those admitted since (each may be preempting now).
  std::vector<const Gang*> live;
  // Where a held gang is (CapacityModel::PlacesOf), asked once a pass: a
  // held gang does not move within a pass.
  const std::vector<uint64_t>& PlacesOf(const Gang* g) const {
    auto [it, fresh] = places_of.try_emplace(g);
    if (fresh) it->second = capacity.PlacesOf(g->request.id);
    return it->second;
  }
  // The gangs held on a place, indexed on first use.
  const std::vector<const Gang*>& HoldersOf(uint64_t place) const {
    if (!holders) {
      holders.emplace();
      for (const Gang* g : live) {
        for (uint64_t p : PlacesOf(g)) (*holders)[p].push_back(g);
      }
    }
    static const std::vector<const Gang*> kNone;
    auto it = holders->find(place);
    return it == holders->end() ? kNone : it->second;
  }
  // A gang admitted in this pass holds room now.
  void Admitted(const Gang* g) {
    live.push_back(g);
    if (!holders) return;
    for (uint64_t p : PlacesOf(g)) (*holders)[p].push_back(g);
  }
  mutable absl::flat_hash_map<const Gang*, std::vector<uint64_t>> places_of;
  mutable std::optional<std::map<uint64_t, std::vector<const Gang*>>> holders;
  // The gangs running when the pass's first victim search began, but those
  // admitted in this pass (never victims), in victim order: lowest priority,
  // then the fewest GPU-hours run since the start or the last checkpoint
  // (what a preemption loses), then the id.
  // Each search of the pass filters this one list: gangs admitted later are
  // not on it, and those preempted since are skipped by their state.
  struct Victim {
    const Gang* gang;
    size_t queue;  // its index in victim_queues
    double cost;   // GPU-hours it would lose, in GPU-milliseconds
  };
  const std::vector<Victim>& VictimOrder() const {
    if (victims) return *victims;
    victims.emplace();
    absl::flat_hash_map<absl::string_view, size_t> index;
    for (const Gang* c : live) {
      if (c->view.state != GangState::kRunning || !c->request.preemptible ||
          admitted.count(c->request.id))
        continue;
      auto [it, fresh] = index.try_emplace(c->request.queue, victim_queues.size());
      if (fresh) victim_queues.push_back(config->FindQueue(c->request.queue));
      const int64_t since = std::max(c->view.started_ms, c->view.checkpointed_ms);
      victims->push_back(
          {c, it->second,
           c->view.charge.Get(kGpu).ToDouble() * static_cast<double>(now_ms - since)});
    }
    std::sort(victims->begin(), victims->end(), [](const Victim& a, const Victim& b) {
      return std::make_tuple(a.gang->request.priority, a.cost, std::cref(a.gang->request.id)) <
             std::make_tuple(b.gang->request.priority, b.cost, std::cref(b.gang->request.id));
    });
    return *victims;
  }
  mutable std::optional<std::vector<Victim>> victims;
  mutable std::vector<const QueueSpec*> victim_queues;  // the queues of `victims`, each once
  // Whether `charge` fits `queue`'s quota in this pass (QuotaLedger::Check).
  // Quota held for a starving gang is in the ledger but holds only against
  // its own queue: another queue may still borrow it, and the starving gang
  // reclaims it when its room comes. Held for every queue, it would leave
  // GPUs idle that only other queues' gangs fit.
  QuotaVerdict Check(const QuotaLedger& ledger, absl::string_view queue, const ResourceSet& charge,
                     std::vector<std::pair<std::string, ResourceSet>> released = {}) const {
    for (const auto& [q, demand] : quota_held) {
      if (q != queue) released.emplace_back(q, demand);
    }
    return ledger.Check(queue, charge, released);
  }
  // The quota verdict of `g` now: one Check for the gangs of one shape in a
  // queue while the ledger does not change (most gangs tried wait).
  const QuotaVerdict& QuotaOf(const Gang& g, const QuotaLedger& ledger) {
    const GangRequest& r = g.request;
    if (r.shape == 0) return own_verdict = Check(ledger, r.queue, r.demand);
    auto [it, fresh] = verdicts.try_emplace({r.queue, r.shape});
    Verdict& v = it->second;
    if (fresh || v.version != ledger.version() || *v.demand != r.demand) {
      v = {ledger.version(), &r.demand, Check(ledger, r.queue, r.demand)};
    }
    return v.verdict;
  }
  struct Verdict {
    uint64_t version = 0;
    const ResourceSet* demand = nullptr;  // a gang's of that shape (gangs stay put in a pass)
    QuotaVerdict verdict;
  };
  absl::node_hash_map<std::pair<absl::string_view, uint64_t>, Verdict> verdicts;
  QuotaVerdict own_verdict;  // of a gang without a shape
  // (queue, priority, shape) of gangs for which no victims would do, this pass.
  std::set<std::tuple<absl::string_view, int32_t, uint64_t>> no_victims;
  // (queue, priority, shape) of gangs whose search had candidates when the
  // budget was spent: it stays spent this pass (starving gangs search anyway).
  std::set<std::tuple<absl::string_view, int32_t, uint64_t>> over_budget;
  size_t searches = 0;
  // (shape, hash of the places avoided) of gangs that did not fit off the
  // reservations they would delay, this pass.
  absl::flat_hash_set<std::pair<uint64_t, size_t>> unfit_off_reserved;
  std::string why;  // TryGang's placement reason, kept for its buffer
  // Quota counted for starving gangs until the pass ends (see Check), and their queues.
  std::vector<std::pair<std::string, ResourceSet>> quota_held;
  std::set<std::string> holding;
  // A queue's usage by its gangs: the ledger's less the quota held for its
  // starving gang. Reclaim looks at this one: held quota is not borrowed,
  // and must not make a queue within its quota look as if it borrowed.
  ResourceSet GangUsage(const QuotaLedger& ledger, absl::string_view queue) const {
    ResourceSet usage = ledger.Usage(queue);
    for (const auto& [q, demand] : quota_held) {
      if (q == queue) usage.Subtract(demand).IgnoreError();
    }
    return usage;
  }
};

std::optional<QueueScheduler::Victims> QueueScheduler::ChooseVictims(const Gang& g, PassState& pass,
                                                                     bool spends_budget,
                                                                     bool* over_budget) const {
  CapacityModel& capacity = pass.capacity;
  const QueueSpec* q = config_.FindQueue(g.request.queue);
  const bool within_nominal = pass.Check(ledger_, g.request.queue, g.request.demand).within_nominal;
  const WithinQueuePreemption within_queue =
      q != nullptr ? q->within_queue_preemption : WithinQueuePreemption::kLowerPriority;
  // A queue below its nominal quota whose gang would take it past it
  // reclaims too, from a queue whose share stays at least what its own
  // becomes (Kueue's fair sharing, LessThanOrEqualToFinalShare): else a
  // gang larger than what is left of its queue's quota never runs while
  // the cohort's quota is lent out.
  const bool below_nominal =
      !within_nominal && ledger_.IsBelowNominal(g.request.queue, g.request.demand);
  // Within its nominal quota, a gang that fits few nodes takes them back.
  const bool few_places = within_nominal && capacity.FitsFewPlaces(g.request.id);
  double share_after = 0;
  if (below_nominal) {
    ResourceSet after = ledger_.Usage(g.request.queue);
    after.Add(g.request.demand).IgnoreError();
    share_after = ledger_.ShareAt(g.request.queue, after, pass.totals);
  }
  struct Candidate {
    const Gang* gang;
    PreemptionRule rule;
    double cost;
  };
  const std::vector<PassState::Victim>& victims = pass.VictimOrder();
  // Whether `g` may reclaim from a queue, by queue (asked once each).
  std::vector<int8_t> reclaimable(pass.victim_queues.size(), -1);
  auto may_reclaim_from = [&](const PassState::Victim& v) {
    int8_t& known = reclaimable[v.queue];
    if (known < 0) {
      const QueueSpec* owner = pass.victim_queues[v.queue];
      known = (within_nominal || below_nominal) && q != nullptr && !q->cohort.empty() &&
              owner != nullptr && owner != q && owner->cohort == q->cohort &&
              ledger_.IsBorrowingAt(owner->name, pass.GangUsage(ledger_, owner->name),
                                    g.request.demand);
    }
    return known == 1;
  };
  // A gang on none of the nodes `g` could use frees nothing it needs (one
  // without places, of a model that does not say, may).
  absl::flat_hash_map<uint64_t, bool> usable;  // by node, asked once each
  auto on_usable_places = [&](const Gang* c) {
    const std::vector<uint64_t>& where = pass.PlacesOf(c);
    if (where.empty()) return true;
    for (uint64_t node : where) {
      auto [it, fresh] = usable.try_emplace(node, false);
      if (fresh) it->second = capacity.CouldHold(g.request.id, node);
      if (it->second) return true;
    }
    return false;
  };
  // In victim order already (the pass's one list): lowest priority first,
  // then the fewest GPU-hours lost. None holds a reservation: those are
  // gangs that wait (pending or claimed).
  std::vector<Candidate> candidates;
  for (const PassState::Victim& v : victims) {
    const Gang* c = v.gang;
    if (c->view.state != GangState::kRunning) continue;  // preempted earlier in the pass
    PreemptionRule rule;
    const bool same_queue = c->request.queue == g.request.queue;
    if (same_queue && c->request.priority < g.request.priority &&
        within_queue != WithinQueuePreemption::kNever) {
      rule = PreemptionRule::kPriority;
    } else if (same_queue && c->request.priority == g.request.priority && c->arrival > g.arrival &&
               within_queue == WithinQueuePreemption::kLowerOrNewerEqualPriority) {
      rule = PreemptionRule::kNewer;
    } else if (!c->backfilled_past.empty() &&
               c->backfilled_past.count({g.request.id, g.wait_epoch}) != 0) {
      rule = PreemptionRule::kBackfill;
    } else if (may_reclaim_from(v)) {
      rule = PreemptionRule::kReclaim;
    } else if (few_places && capacity.HoldsPlacesSparedFor(c->request.id, g.request.id)) {
      rule = PreemptionRule::kSparedNodes;
    } else {
      continue;
    }
    if (!on_usable_places(c)) continue;
    candidates.push_back({c, rule, v.cost});
  }
  if (candidates.empty()) return std::nullopt;
  // What follows tries placements: it is what the budget bounds.
  if (spends_budget) {
    if (pass.searches == options_.max_preemption_searches) {
      *over_budget = true;
      return std::nullopt;
    }
    ++pass.searches;
  }
  // Places (nodes) are freed whole: the lowest priority among their victims
  // first, then the fewest GPU-hours, then the node. A victim is on each of
  // its places (a multi-node gang's end frees every node it holds, and a
  // node it shares can be emptied only with it); one without places (a
  // model that does not say) is a place of its own, after the nodes.
  struct Place {
    int32_t priority = std::numeric_limits<int32_t>::min();  // the highest among its victims
    double cost = 0;
    std::optional<uint64_t> node;
    std::vector<const Candidate*> victims;
  };
  std::vector<Place> places;
  size_t most_places = 0;
  for (const Candidate& c : candidates) {
    most_places += std::max<size_t>(1, pass.PlacesOf(c.gang).size());
  }
  places.reserve(most_places);  // Place* stay valid
  absl::flat_hash_map<uint64_t, Place*> place_of_node;
  for (const Candidate& c : candidates) {
    auto put_on = [&c](Place* place) {
      place->priority = std::max(place->priority, c.gang->request.priority);
      place->cost += c.cost;
      place->victims.push_back(&c);
    };
    const std::vector<uint64_t>& where = pass.PlacesOf(c.gang);
    if (where.empty()) put_on(&places.emplace_back());
    for (uint64_t node : where) {
      auto [it, fresh] = place_of_node.try_emplace(node, nullptr);
      if (fresh) {
        it->second = &places.emplace_back();
        it->second->node = node;
      }
      put_on(it->second);
    }
  }
  std::vector<Place*> by_cost;
  for (Place& place : places) by_cost.push_back(&place);
  // Ties: nodes by index, then placeless ones in candidate order (their
  // index in `places`).
  auto key = [&](const Place* p) {
    return std::make_tuple(p->priority, p->cost, !p->node.has_value(),
                           p->node ? *p->node : static_cast<uint64_t>(p - places.data()));
  };
  std::sort(by_cost.begin(), by_cost.end(),
            [&](const Place* a, const Place* b) { return key(a) < key(b); });
  // Places that preemption can empty, and where a bundle of `g` would fit
  // then: every gang held there is a candidate.
  auto emptiable = [&]() {
    absl::flat_hash_set<const Gang*> ids;
    for (const Candidate& c : candidates) ids.insert(c.gang);
    std::set<const Place*> out;
    for (const Place& place : places) {
      if (!place.node || !capacity.CouldHold(g.request.id, *place.node)) continue;
      bool all = true;
      for (const Gang* holder : pass.HoldersOf(*place.node)) all = all && ids.contains(holder);
      if (all) out.insert(&place);
    }
    return out;
  };
  // Reclaiming stops at a queue's own nominal quota: a reclaim candidate
  // counts only while its queue, without the candidates before it, still
  // borrows a resource `g` asks for. With `only` given, a place counts only
  // if it is one of them and all of its victims count (a gang that needs
  // empty places gains nothing from half-emptied ones).
  auto eligible_of = [&](const std::set<const Place*>* only, size_t max_victims) {
    std::vector<const Candidate*> eligible;
    absl::flat_hash_set<const Candidate*> taken;  // of `eligible`: a victim is on several places
    std::map<std::string, ResourceSet> left;      // usage without the eligible ones so far
    for (const Place* place : by_cost) {
      if (only != nullptr && only->count(place) == 0) continue;
      std::vector<const Candidate*> here;
      size_t already = 0;  // victims of this place taken with an earlier one
      for (const Candidate* c : place->victims) {
        if (taken.contains(c)) {
          ++already;
          continue;
        }
        if (c->rule == PreemptionRule::kReclaim) {
          const std::string& owner_name = c->gang->request.queue;
          auto [usage, fresh] = left.try_emplace(owner_name);
          if (fresh) usage->second = pass.GangUsage(ledger_, owner_name);
          if (!ledger_.IsBorrowingAt(owner_name, usage->second, g.request.demand)) continue;
          if (below_nominal && ledger_.ShareAt(owner_name, usage->second, pass.totals,
                                               c->gang->view.charge) < share_after) {
            continue;
          }
        }
        here.push_back(c);
        if (auto it = left.find(c->gang->request.queue); it != left.end())
          it->second.Subtract(c->gang->view.charge).IgnoreError();
        if (only == nullptr && eligible.size() + here.size() == max_victims) break;
      }
      if (only != nullptr && (here.size() + already != place->victims.size() ||
                              eligible.size() + here.size() > max_victims)) {
        // The place stays: its victims' usage counts again.
        for (const Candidate* c : here) {
          if (auto it = left.find(c->gang->request.queue); it != left.end())
            it->second.Add(c->gang->view.charge).IgnoreError();
        }
        continue;
      }
      eligible.insert(eligible.end(), here.begin(), here.end());
      taken.insert(here.begin(), here.end());
      if (eligible.size() == max_victims) break;
    }
    return eligible;
  };
  // Where `g` goes without the last set that was enough: every set tried
  // after it that is enough replaces it, so it is the chosen set's.
  std::optional<std::vector<uint64_t>> fit_places;
  auto enough = [&](const std::vector<const Candidate*>& set) {
    std::vector<std::pair<std::string, ResourceSet>> released;
    std::vector<std::string> ids;
    for (const Candidate* c : set) {
      released.emplace_back(c->gang->request.queue, c->gang->view.charge);
      ids.push_back(c->gang->request.id);
    }
    if (!pass.Check(ledger_, g.request.queue, g.request.demand, released).fits) return false;
    std::optional<std::vector<uint64_t>> places = capacity.PlacesWithout(g.request.id, ids);
    if (!places) return false;
    fit_places = std::move(places);
    return true;
  };
  // The cheapest places first; failing that (a gang that needs empty
  // places), the places that can be emptied, cheapest first: at once for a
  // gang within its nominal quota (the room is its own queue's), else once
  // it has waited empty_places_after_ms.
  std::vector<const Candidate*> eligible = eligible_of(nullptr, options_.max_victims_considered);
  if (eligible.empty() || !enough(eligible)) {
    if (!within_nominal && pass.now_ms - g.view.waiting_since_ms < options_.empty_places_after_ms) {
      return std::nullopt;
    }
    const std::set<const Place*> whole = emptiable();
    eligible = eligible_of(&whole, options_.max_victims_to_empty_places);
    if (eligible.empty() || !enough(eligible)) return std::nullopt;
  }
  // The shortest sufficient prefix (more victims only free more), then a
  // minimal set: drop, newest choice first, any victim not needed.
  size_t lo = 1, hi = eligible.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (enough({eligible.begin(), eligible.begin() + mid})) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::vector<const Candidate*> chosen(eligible.begin(), eligible.begin() + lo);
  // Victims off the places `g` took in the chosen set's trial did not make
  // its room (a cheap place too small on its own comes before the one that
  // was enough): dropped together, with one trial to confirm.
  if (fit_places) {
    std::vector<const Candidate*> on;
    for (const Candidate* c : chosen) {
      const std::vector<uint64_t>& where = pass.PlacesOf(c->gang);
      if (where.empty() || std::any_of(where.begin(), where.end(), [&](uint64_t p) {
            return std::binary_search(fit_places->begin(), fit_places->end(), p);
          })) {
        on.push_back(c);
      }
    }
    if (!on.empty() && on.size() < chosen.size() && enough(on)) chosen = std::move(on);
  }
  for (size_t i = chosen.size(); i-- > 0 && chosen.size() > 1 && chosen.size() <= 16;) {
    std::vector<const Candidate*> without = chosen;
    without.erase(without.begin() + i);
    if (enough(without)) chosen = std::move(without);
  }
  std::vector<Preemption> out;
  for (const Candidate* c : chosen) {
    out.push_back(
        {c->gang->request.id, g.request.id, c->rule,
         absl::StrCat("preempted by ", g.request.name.empty() ? g.request.id : g.request.name,
                      " of queue ", g.request.queue, " (", PreemptionRuleName(c->rule), ")")});
  }
  return Victims{std::move(out), std::move(fit_places)};
}

std::optional<QueueScheduler::Reservation> QueueScheduler::Reserve(const Gang& g, bool starving,
                                                                   const PassState& pass) const {
  const int64_t now_ms = pass.now_ms;
  CapacityModel& capacity = pass.capacity;
  // Running gangs by the time they end at the latest (preempting ones now),
  // the soonest max_reservation_horizon of them.
  std::vector<std::pair<int64_t, const std::string*>> ending;
  for (const Gang* c : pass.live) {
    if (c->view.state == GangState::kPreempting) {
      ending.emplace_back(now_ms, &c->request.id);
    } else if (c->view.state == GangState::kRunning && c->request.time_limit_ms) {
      ending.emplace_back(c->view.started_ms + *c->request.time_limit_ms, &c->request.id);
    }
  }
  const size_t horizon = std::min(ending.size(), options_.max_reservation_horizon);
  std::partial_sort(ending.begin(), ending.begin() + horizon, ending.end(),
                    [](const auto& a, const auto& b) {
                      return std::tie(a.first, *a.second) < std::tie(b.first, *b.second);
                    });
  ending.resize(horizon);
  auto prefix = [&](size_t k) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < k; ++i) ids.push_back(*ending[i].second);
    return ids;
  };
  Reservation r{g.request.id, {}, kNever, starving, {}};
  // Where it goes with the fewest gangs ended found so far (the last trial
  // that fit: the answer's places, not asked again).
  std::optional<std::vector<uint64_t>> at_hi;
  if (!ending.empty()) at_hi = capacity.PlacesWithout(g.request.id, prefix(ending.size()));
  if (!at_hi) {
    // No start in sight: it keeps the places it would take on an idle
    // cluster, which drain as their gangs end.
    r.places = capacity.PlacesWhenIdle(g.request.id);
    if (!r.places) return std::nullopt;
    for (const Gang* c : pass.live) r.freed.push_back(c->request.id);
    return r;
  }
  // The fewest gangs to end (freeing more only helps): binary search.
  size_t lo = 0, hi = ending.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (std::optional<std::vector<uint64_t>> places =
            capacity.PlacesWithout(g.request.id, prefix(mid))) {
      hi = mid;
      at_hi = std::move(places);
    } else {
      lo = mid + 1;
    }
  }
  r.freed = prefix(lo);
  r.start_ms = lo == 0 ? now_ms : std::max(now_ms, ending[lo - 1].first);
  r.places = std::move(at_hi);
  return r;
}

bool QueueScheduler::RespectsReservations(const Gang& g, bool within_nominal, int64_t now_ms,
                                          const std::vector<Reservation>& held,
                                          CapacityModel& capacity, WaitKeys* past,
                                          std::string* reason,
                                          std::vector<uint64_t>* blocking) const {
  std::optional<std::vector<uint64_t>> mine;  // where g landed, once asked
  bool respects = true, avoidable = true;
  for (const Reservation& r : held) {
    if (r.gang == g.request.id) continue;
    if (g.request.time_limit_ms && r.start_ms != kNever &&
        now_ms + *g.request.time_limit_ms <= r.start_ms) {
      continue;  // ends before the reserved gang can start
    }
    // Room held for a borrowing gang is not taken from a queue's own quota.
    if (r.borrowing && within_nominal) continue;
    // It leaves the reserved gang its room: off its places, or (a model
    // without places) the reserved gang still fits once `freed` end.
    if (r.places && !r.places->empty()) {
      if (!mine) mine = capacity.PlacesOf(g.request.id);
      std::vector<uint64_t> shared;
      std::set_intersection(mine->begin(), mine->end(), r.places->begin(), r.places->end(),
                            std::back_inserter(shared));
      if (shared.empty()) continue;
    } else if (capacity.FitsWithout(r.gang, r.freed)) {
      continue;
    }
    if (!r.starving && !r.claimed && g.request.preemptible) {
      past->emplace(r.gang, gangs_.at(r.gang).wait_epoch);
      continue;
    }
    if (respects) {
      *reason = absl::StrCat("would delay ", r.gang, ", which holds a reservation",
                             r.starving  ? " (it has waited past the starvation bound)"
                             : r.claimed ? " (it preempted gangs for that room)"
                                         : "");
    }
    respects = false;
    if (r.places && !r.places->empty()) {
      blocking->insert(blocking->end(), r.places->begin(), r.places->end());
    } else {
      avoidable = false;
    }
  }
  if (respects) return true;  // *blocking is read only on a refusal
  if (!avoidable) blocking->clear();
  std::sort(blocking->begin(), blocking->end());
  blocking->erase(std::unique(blocking->begin(), blocking->end()), blocking->end());
  return false;
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
  g.tried_in_pass = passes_;
  const int64_t now_ms = pass.now_ms;
  const std::string& queue = g.request.queue;
  const bool starving = pass.starving.contains(&g);
  const QuotaVerdict& quota = pass.QuotaOf(g, ledger_);
  // A preempted gang keeps saying so while it waits. Most waiting gangs
  // give the same reason pass after pass: it is written only when it changed.
  auto wait = [&g](absl::string_view what, absl::string_view detail = "") {
    const std::string& by = g.view.preempted_by;
    const absl::string_view sep = by.empty() ? "" : "; ";
    absl::string_view now = g.view.reason;
    if (now.size() == by.size() + sep.size() + what.size() + detail.size() &&
        absl::ConsumePrefix(&now, by) && absl::ConsumePrefix(&now, sep) &&
        absl::ConsumePrefix(&now, what) && now == detail) {
      return;
    }
    g.view.reason = absl::StrCat(by, sep, what, detail);
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
  // Claims room for `g` by preemption, if some victims would make it.
  // Gangs of one shape, queue and priority search once a pass (but not
  // one that held a reservation: gangs may have started past it).
  auto preempt = [&]() {
    if (!options_.preemption) return false;
    const auto key = std::make_tuple(absl::string_view(queue), g.request.priority, g.request.shape);
    const bool memo = g.request.shape != 0 && !reserved_last_.count(g.request.id);
    if (memo && (pass.no_victims.count(key) || (!starving && pass.over_budget.count(key))))
      return false;
    // A starving gang searches past the budget, and does not spend it. A
    // gang that fits few nodes first looks whether any gang there may be
    // preempted (no trial placement): else gangs pinned to a model whose
    // nodes all run gangs they may not preempt spend the budget, and the
    // gangs after them never search.
    if (!starving && pass.searches == options_.max_preemption_searches &&
        !pass.capacity.FitsFewPlaces(g.request.id)) {
      return false;
    }
    bool over_budget = false;
    std::optional<Victims> victims = ChooseVictims(g, pass, !starving, &over_budget);
    if (!victims) {
      if (memo) (over_budget ? pass.over_budget : pass.no_victims).insert(key);
      return false;
    }
    std::vector<std::string> freed;
    for (const Preemption& p : victims->preemptions) freed.push_back(p.victim);
    StartPreemptions(g, std::move(victims->preemptions), &pass.result);
    pass.held.push_back(
        {g.request.id, std::move(freed), now_ms, false, std::move(victims->places), true});
    pass.reserved.insert(g.request.id);
    return true;
  };
  // A waiting gang keeps room: within its nominal quota, the oldest
  // starving gang of a queue holds its quota for the rest of the pass
  // (gangs behind it in its queue do not take it) and gets a reservation no gang may
  // take; while there are fewer than max_reservations, any other gang that
  // fits its quota (or is within its nominal quota) gets one.
  auto hold = [&]() {
    // A gang that fits not even the idle cluster keeps no room: it would
    // hold its queue's quota, and every later admission would ask whether
    // it fits with every gang gone.
    if (pass.capacity.Infeasible(g.request.id)) return;
    const bool firm = starving && quota.within_nominal;
    if (firm && pass.holding.insert(queue).second) {
      ledger_.Add(queue, g.request.demand);
      pass.quota_held.emplace_back(queue, g.request.demand);
    }
    if (options_.reservations && (quota.within_nominal || quota.fits) &&
        (firm || pass.held.size() < options_.max_reservations)) {
      std::optional<Reservation> r = Reserve(g, firm, pass);
      if (!r) return;
      r->borrowing = !quota.within_nominal;
      pass.held.push_back(*std::move(r));
      pass.reserved.insert(g.request.id);
    }
  };
  if (!quota.fits) {
    if (!quota.never && preempt()) return;
    if (quota.never) {
      wait(quota.reason, "; it can never fit");
    } else {
      wait("waiting for quota: ", quota.reason);
    }
    // Past the bound, within its nominal quota it waits for other queues to
    // give back what they borrow, which gangs behind it cannot take; beyond
    // it, for its own queue's usage: nothing behind it is admitted until it fits.
    if (starving && !quota.never) {
      if (quota.within_nominal) {
        hold();
      } else {
        pass.closed.emplace(queue, g.request.id);
      }
    }
    return;
  }
  std::string& why = pass.why;  // reused: most gangs tried wait, each with a long reason
  if (std::optional<ResourceSet> charge = pass.capacity.Place(g.request.id, &why)) {
    // Where it landed, it may charge a typed quota its demand did not name.
    auto quota_where_placed = [&]() {
      if (*charge == g.request.demand) return true;
      const QuotaVerdict placed = pass.Check(ledger_, queue, *charge);
      if (placed.fits) return true;
      pass.capacity.Release(g.request.id);
      wait("waiting for quota where it fits: ", placed.reason);
      return false;
    };
    if (!quota_where_placed()) return;
    WaitKeys past;
    std::string reason;
    std::vector<uint64_t> blocking;
    if (!RespectsReservations(g, quota.within_nominal, now_ms, pass.held, pass.capacity, &past,
                              &reason, &blocking)) {
      pass.capacity.Release(g.request.id);
      // The placer chose the reserved room (draining nodes are the emptiest);
      // off it the gang may still fit, as Slurm's backfill starts a job on
      // the nodes a reservation leaves. Free room only shrinks in a pass, so
      // a shape that does not fit off these places is not tried again.
      const auto key = std::make_pair(g.request.shape, absl::HashOf(blocking));
      const bool memo = g.request.shape != 0;
      if (blocking.empty() || (memo && pass.unfit_off_reserved.contains(key)) ||
          !(charge = pass.capacity.PlaceAvoiding(g.request.id, blocking))) {
        if (memo && !blocking.empty()) pass.unfit_off_reserved.insert(key);
        wait(reason);
        return;
      }
      if (!quota_where_placed()) return;
      past.clear();
      blocking.clear();
      if (!RespectsReservations(g, quota.within_nominal, now_ms, pass.held, pass.capacity, &past,
                                &reason, &blocking)) {
        pass.capacity.Release(g.request.id);
        wait(reason);
        return;
      }
    }
    Admit(g, *std::move(charge), now_ms, !past.empty());
    g.backfilled_past = std::move(past);
    pass.result.admitted.push_back(g.request.id);
    pass.admitted.insert(g.request.id);
    pass.Admitted(&g);
    return;
  }
  // Fits its quota, not the nodes.
  if (pass.capacity.Infeasible(g.request.id)) {
    wait("infeasible: ", why);
    return;
  }
  if (preempt()) return;
  wait("waiting for room: ", why);
  hold();
}

PassResult QueueScheduler::Pass(int64_t now_ms, CapacityModel& capacity) {
  ++passes_;
  PassState pass{now_ms, capacity, &config_, capacity.Capacity()};
  // One walk of the gangs (thousands): those holding room, claimed, pending.
  std::vector<Gang*> claimed, pending;
  for (auto& [id, g] : gangs_) {
    switch (g.view.state) {
      case GangState::kRunning:
      case GangState::kPreempting:
        pass.live.push_back(&g);
        break;
      case GangState::kClaimed:
        claimed.push_back(&g);
        break;
      case GangState::kPending:
        pending.push_back(&g);
        break;
    }
  }
  const ResourceSet& totals = pass.totals;

  // Claimed gangs hold their quota: they start as soon as their victims'
  // room is free, and keep a reservation on it meanwhile.
  for (Gang* claimer : claimed) {
    Gang& g = *claimer;
    const std::string& id = g.request.id;
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
      pass.Admitted(&g);
      continue;
    }
    if (g.awaiting.empty()) {  // its room went elsewhere: wait as before
      ledger_.Remove(g.request.queue, g.view.charge);
      g.view.charge = ResourceSet();
      g.view.state = GangState::kPending;
      pending.push_back(&g);
      continue;
    }
    std::vector<std::string> freed(g.awaiting.begin(), g.awaiting.end());
    std::optional<std::vector<uint64_t>> places = capacity.PlacesWithout(id, freed);
    pass.held.push_back({id, std::move(freed), now_ms, false, std::move(places), true});
    pass.reserved.insert(id);
  }

  // Gangs past the starvation bound first, oldest first, then last pass's
  // reservations: nothing ordered before them takes what they wait for.
  std::vector<Gang*> first;
  for (Gang* g : pending) {
    if (now_ms - g->view.waiting_since_ms >= options_.starvation_bound_ms) first.push_back(g);
  }
  std::sort(first.begin(), first.end(),
            [](const Gang* a, const Gang* b) { return a->arrival < b->arrival; });
  // Treated as starving: the oldest of each queue, then the oldest others.
  std::set<absl::string_view> queues_starving;
  std::vector<const Gang*> starving_others;
  for (const Gang* g : first) {
    if (queues_starving.insert(g->request.queue).second) {
      pass.starving.insert(g);
    } else {
      starving_others.push_back(g);
    }
  }
  for (const Gang* g : starving_others) {
    if (pass.starving.size() >= options_.max_starving) break;
    pass.starving.insert(g);
  }
  reserved_last_ = {reserved_.begin(), reserved_.end()};
  for (const std::string& id : std::exchange(reserved_, {})) {
    auto it = gangs_.find(id);
    if (it != gangs_.end() && it->second.view.state == GangState::kPending)
      first.push_back(&it->second);
  }
  for (Gang* g : first) {
    if (g->tried_in_pass != passes_) TryGang(*g, pass);
  }

  // Pending gangs, by queue, in queue order.
  struct Turns {
    const std::string* queue;
    std::vector<Gang*> gangs;
    size_t next = 0;
  };
  std::vector<Turns> queues;  // sorted by name below: ties of share go by name
  absl::flat_hash_map<absl::string_view, size_t> queue_index;
  for (Gang* g : pending) {
    if (g->view.state != GangState::kPending || g->tried_in_pass == passes_) continue;
    auto [it, fresh] = queue_index.try_emplace(g->request.queue, queues.size());
    if (fresh) queues.push_back({&g->request.queue, {}});
    queues[it->second].gangs.push_back(g);
  }
  std::sort(queues.begin(), queues.end(),
            [](const Turns& a, const Turns& b) { return *a.queue < *b.queue; });
  // Priority, then arrival; but a gang past the starvation bound goes
  // before every priority (it ages, as in Slurm's multifactor priority).
  auto key = [&](const Gang* g) {
    const bool starving = now_ms - g->view.waiting_since_ms >= options_.starvation_bound_ms;
    return std::make_tuple(starving ? 0 : 1, starving ? 0 : -int64_t{g->request.priority},
                           g->arrival);
  };
  for (Turns& q : queues) {
    std::sort(q.gangs.begin(), q.gangs.end(),
              [&](const Gang* a, const Gang* b) { return key(a) < key(b); });
  }
  // DRF: the queue of the lowest dominant share next, (share, index) a min-heap.
  using Turn = std::pair<double, size_t>;
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> order;
  for (size_t q = 0; q < queues.size(); ++q)
    order.emplace(ledger_.Share(*queues[q].queue, totals), q);

  while (!order.empty()) {
    const auto [share, q] = order.top();
    order.pop();
    Turns& turns = queues[q];
    Gang& g = *turns.gangs[turns.next++];
    const uint64_t ledger_version = ledger_.version();
    TryGang(g, pass);
    if (turns.next == turns.gangs.size()) continue;
    // Its share changes only when the ledger does (most gangs tried wait).
    order.emplace(ledger_.version() == ledger_version ? share : ledger_.Share(*turns.queue, totals),
                  q);
  }
  for (const auto& [queue, demand] : pass.quota_held) ledger_.Remove(queue, demand);
  for (const Reservation& r : pass.held) {
    if (gangs_.at(r.gang).view.state == GangState::kPending) reserved_.push_back(r.gang);
  }
  return std::move(pass.result);
}

}  // namespace berth
