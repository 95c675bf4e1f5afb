#include "queueing/queue_scheduler.h"

#include <algorithm>
#include <tuple>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "queueing/pass_state.h"
#include "queueing/queue_order.h"
#include "queueing/reservations.h"
#include "queueing/victim_search.h"

namespace berth {
namespace {

std::string QueueOf(const GangRequest& r) {
  return r.queue.empty() ? std::string(kDefaultQueue) : r.queue;
}

// Says why `g` waits. Most waiting gangs give the same reason pass after
// pass: it is written only when it changed (a gang keeps no new buffer).
void SayWaiting(QueuedGang& g, GangWait kind, std::shared_ptr<const QuotaShortfall> quota = nullptr,
                absl::string_view gang = "",
                GangReason::Holder holder = GangReason::Holder::kWaiting,
                PlacementReasonPtr placement = nullptr) {
  GangReason& now = g.view.reason;
  if (now.kind == kind && now.gang() == gang && now.holder == holder &&
      SameShortfall(now.quota(), quota) && SamePlacementReason(now.placement(), placement)) {
    return;
  }
  GangReason r;
  r.kind = kind;
  r.holder = holder;
  if (quota != nullptr || !gang.empty() || placement != nullptr) {
    r.detail = std::make_shared<const GangReason::Detail>(
        GangReason::Detail{std::move(quota), std::string(gang), std::move(placement)});
  }
  now = std::move(r);
}

// Says that `g` fits its quota but not the nodes (`kind`), and why not.
void SayUnplaced(QueuedGang& g, GangWait kind, PlacementReasonPtr why) {
  SayWaiting(g, kind, nullptr, "", GangReason::Holder::kWaiting, std::move(why));
}

// Where it landed, `g` may charge a typed quota its demand did not name:
// whether `charge` fits (else the placement is given back and it waits).
bool FitsQuotaWherePlaced(QueuedGang& g, PassState& pass, const ResourceSet& charge) {
  if (charge == g.request.demand) return true;
  const QuotaVerdict placed = pass.quota.Check(g.request.queue, charge);
  if (placed.fits) return true;
  pass.capacity.Release(g.ref());
  SayWaiting(g, GangWait::kQuotaWherePlaced, placed.shortfall);
  return false;
}

}  // namespace

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

absl::Status QueueScheduler::Submit(GangRequest request, int64_t now_ms,
                                    std::unique_ptr<CapacityModel::Gang> placement) {
  request.queue = QueueOf(request);
  if (absl::StatusOr<const QueueSpec*> q = config_.Resolve(request.queue, "queue"); !q.ok()) {
    return q.status();
  }
  if (gangs_.count(request.id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("gang ", request.id, " is already queued"));
  }
  QueuedGang g;
  g.view.arrival = next_arrival_++;
  g.view.waiting_since_ms = now_ms;
  std::string id = request.id;
  g.request = std::move(request);
  g.placement = std::move(placement);
  gangs_.emplace(std::move(id), std::move(g));
  return absl::OkStatus();
}

std::vector<QueueScheduler::GangRecord> QueueScheduler::Export() const {
  std::vector<GangRecord> records;
  for (const auto& [id, g] : gangs_) {
    GangRecord r;
    r.request = g.request;
    r.arrival = g.view.arrival;
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
  for (const GangRecord& r : records) Insert(r, nullptr);
  return absl::OkStatus();
}

absl::Status QueueScheduler::Restore(const GangRecord& record,
                                     std::unique_ptr<CapacityModel::Gang> placement) {
  if (config_.FindQueue(QueueOf(record.request)) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("gang ", record.request.id, " names queue '",
                                                      record.request.queue,
                                                      "', which is not configured"));
  }
  if (gangs_.count(record.request.id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("gang ", record.request.id, " is already queued"));
  }
  Insert(record, std::move(placement));
  return absl::OkStatus();
}

void QueueScheduler::Insert(const GangRecord& r, std::unique_ptr<CapacityModel::Gang> placement) {
  QueuedGang g;
  g.request = r.request;
  g.placement = std::move(placement);
  g.request.queue = QueueOf(r.request);
  g.view.arrival = r.arrival;
  g.view.waiting_since_ms = r.waiting_since_ms;
  g.view.preemptions = r.preemptions;
  g.view.preempted_by = r.preempted_by;
  QueuedGang& placed = gangs_.emplace(r.request.id, std::move(g)).first->second;
  if (r.state == GangState::kRunning) {
    Admit(placed, r.charge, r.started_ms, false);
  } else if (r.state == GangState::kPreempting) {
    placed.view.state = GangState::kPreempting;
    placed.view.started_ms = r.started_ms;
    placed.view.reason.kind = GangWait::kStopping;
  }
  next_arrival_ = std::max(next_arrival_, r.arrival + 1);
}

std::unique_ptr<CapacityModel::Gang> QueueScheduler::Finish(const std::string& id) {
  auto it = gangs_.find(id);
  if (it == gangs_.end()) return nullptr;
  const GangState state = it->second.view.state;
  if (state == GangState::kRunning || state == GangState::kClaimed) {
    ledger_.Remove(it->second.request.queue, it->second.view.charge);
  }
  StopLacking(it->second);
  std::unique_ptr<CapacityModel::Gang> placement = std::move(it->second.placement);
  gangs_.erase(it);
  return placement;
}

void QueueScheduler::Preempted(const std::string& id, int64_t now_ms) {
  auto it = gangs_.find(id);
  if (it == gangs_.end() || it->second.view.state != GangState::kPreempting) return;
  QueuedGang& g = it->second;
  g.view.state = GangState::kPending;
  g.view.waiting_since_ms = now_ms;
  ++g.wait_epoch;
  if (g.apart) g.apart->backfilled_past.clear();
  g.TidyApart();
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

CapacityModel::GangRef QueueScheduler::Ref(const std::string& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? CapacityModel::GangRef{&id, nullptr} : it->second.ref();
}

const GangRequest* QueueScheduler::Request(const std::string& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : &it->second.request;
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

void QueueScheduler::Admit(QueuedGang& g, ResourceSet charge, int64_t now_ms, bool backfilled) {
  ledger_.Add(g.request.queue, charge);
  g.view.charge = std::move(charge);
  g.view.state = GangState::kRunning;
  g.view.started_ms = now_ms;
  g.view.checkpointed_ms = 0;
  // Assigned, not cleared: a running gang keeps no buffer of its wait.
  g.view.reason = GangReason();
  g.view.reason.kind = backfilled ? GangWait::kBackfilled : GangWait::kRunning;
  g.view.preempted_by = nullptr;
  if (g.apart) g.apart->awaiting.clear();
  g.TidyApart();
  g.backoff_ms = 0;
}

void QueueScheduler::StartPreemptions(QueuedGang& by, std::vector<Preemption> victims,
                                      PassResult* result) {
  for (Preemption& p : victims) {
    QueuedGang& v = gangs_.at(p.victim);
    // The quota comes back now; the room when the caller reports Preempted.
    ledger_.Remove(v.request.queue, v.view.charge);
    StopLacking(v);
    v.view.charge = ResourceSet();
    v.view.state = GangState::kPreempting;
    v.view.reason = GangReason();
    v.view.reason.kind = GangWait::kStopping;
    v.view.preempted_by = std::make_shared<const Preemption>(p);
    ++v.view.preemptions;
    by.MutableApart().awaiting.insert(p.victim);
    result->preempted.push_back(std::move(p));
  }
  by.view.state = GangState::kClaimed;
  by.view.charge = by.request.demand;
  ledger_.Add(by.request.queue, by.view.charge);
  by.view.reason = GangReason();
  by.view.reason.kind = GangWait::kVictims;
  by.view.reason.victims = static_cast<uint32_t>(by.awaiting().size());
}

void QueueScheduler::TryGang(QueuedGang& g, PassState& pass) {
  g.tried_in_pass = passes_;
  const std::string& queue = g.request.queue;
  const bool starving = pass.starving.contains(&g);
  const QuotaVerdict& quota = pass.quota.QuotaOf(g);
  if (auto closed = pass.closed.find(queue); closed != pass.closed.end()) {
    SayWaiting(g, GangWait::kBehindStarving, nullptr, closed->second);
    return;
  }
  if (!g.request.preemptible && !quota.within_nominal) {
    SayWaiting(g, GangWait::kNominalOnly, quota.shortfall);
    if (starving) pass.closed.emplace(queue, g.request.id);
    return;
  }
  if (!quota.fits) {
    WaitForQuota(g, pass, starving, quota);
    return;
  }
  PlacementReasonPtr why;
  if (std::optional<ResourceSet> charge = pass.capacity.Place(g.ref(), &why)) {
    StartPlaced(g, pass, quota, std::move(charge));
    return;
  }
  // Fits its quota, not the nodes.
  if (pass.capacity.Infeasible(g.ref())) {
    SayUnplaced(g, GangWait::kInfeasible, std::move(why));
    return;
  }
  if (TryPreempt(g, pass, starving)) return;
  SayUnplaced(g, GangWait::kRoom, std::move(why));
  HoldRoom(g, pass, starving, quota);
}

void QueueScheduler::WaitForQuota(QueuedGang& g, PassState& pass, bool starving,
                                  const QuotaVerdict& quota) {
  if (!quota.never && TryPreempt(g, pass, starving)) return;
  if (quota.never) {
    SayWaiting(g, GangWait::kQuotaNever, quota.shortfall);
  } else {
    SayWaiting(g, GangWait::kQuota, quota.shortfall);
  }
  // Past the bound, within its nominal quota it waits for other queues to
  // give back what they borrow, which gangs behind it cannot take; beyond
  // it, for its own queue's usage: nothing behind it is admitted until it fits.
  if (starving && !quota.never) {
    if (quota.within_nominal) {
      HoldRoom(g, pass, starving, quota);
    } else {
      pass.closed.emplace(g.request.queue, g.request.id);
    }
  }
}

bool QueueScheduler::TryPreempt(QueuedGang& g, PassState& pass, bool starving) {
  // Gangs of one shape, queue and priority search once a pass (but not
  // one that held a reservation: gangs may have started past it).
  if (!options_.preemption) return false;
  const auto key =
      std::make_tuple(absl::string_view(g.request.queue), g.request.priority, g.request.shape);
  const bool memo = g.request.shape != 0 && !reserved_last_.count(g.request.id);
  if (memo && (pass.no_victims.count(key) || (!starving && pass.over_budget.count(key))))
    return false;
  // A starving gang searches past the budget, and does not spend it. A
  // gang that fits few nodes first looks whether any gang there may be
  // preempted (no trial placement): else gangs pinned to a model whose
  // nodes all run gangs they may not preempt spend the budget, and the
  // gangs after them never search.
  if (!starving && pass.searches == options_.max_preemption_searches &&
      !pass.capacity.FitsFewPlaces(g.ref())) {
    return false;
  }
  bool over_budget = false;
  std::optional<Victims> victims =
      ChooseVictims(g, pass, ledger_, options_, !starving, &over_budget);
  if (!victims) {
    if (memo) (over_budget ? pass.over_budget : pass.no_victims).insert(key);
    return false;
  }
  StartPreemptions(g, std::move(victims->preemptions), &pass.result);
  pass.held.push_back(
      {&g, std::move(victims->freed), pass.now_ms, false, std::move(victims->places), true});
  return true;
}

void QueueScheduler::HoldRoom(const QueuedGang& g, PassState& pass, bool starving,
                              const QuotaVerdict& quota) {
  // Within its nominal quota, the oldest starving gang of a queue holds its
  // quota for the rest of the pass (gangs behind it in its queue do not
  // take it) and gets a reservation no gang may take; while there are
  // fewer than max_reservations, any other gang that fits its quota (or is
  // within its nominal quota) gets one. A gang that fits not even the idle
  // cluster keeps no room: it would hold its queue's quota, and every later
  // admission would ask whether it fits with every gang gone.
  if (pass.capacity.Infeasible(g.ref())) return;
  const bool firm = starving && quota.within_nominal;
  if (firm) pass.quota.Hold(g.request.queue, g.request.demand);
  if (options_.reservations && (quota.within_nominal || quota.fits) &&
      (firm || pass.held.size() < options_.max_reservations)) {
    std::optional<Reservation> r = Reserve(g, firm, pass, options_.max_reservation_horizon);
    if (!r) return;
    r->borrowing = !quota.within_nominal;
    pass.held.push_back(*std::move(r));
  }
}

void QueueScheduler::StartPlaced(QueuedGang& g, PassState& pass, const QuotaVerdict& quota,
                                 std::optional<ResourceSet> charge) {
  if (!FitsQuotaWherePlaced(g, pass, *charge)) return;
  ReservationCheck check;
  if (!RespectsReservations(g, quota.within_nominal, pass, &check)) {
    pass.capacity.Release(g.ref());
    // The placer chose the reserved room (draining nodes are the emptiest);
    // off it the gang may still fit, as Slurm's backfill starts a job on
    // the nodes a reservation leaves. Free room only shrinks in a pass, so
    // a shape that does not fit off these places is not tried again.
    const auto key = std::make_pair(g.request.shape, absl::HashOf(check.blocking));
    const bool memo = g.request.shape != 0;
    if (check.blocking.empty() || (memo && pass.unfit_off_reserved.contains(key)) ||
        !(charge = pass.capacity.PlaceAvoiding(g.ref(), check.blocking))) {
      if (memo && !check.blocking.empty()) pass.unfit_off_reserved.insert(key);
      SayWaiting(g, GangWait::kReservation, nullptr, check.delays, check.holder);
      return;
    }
    if (!FitsQuotaWherePlaced(g, pass, *charge)) return;
    check.past.clear();
    check.blocking.clear();
    if (!RespectsReservations(g, quota.within_nominal, pass, &check)) {
      pass.capacity.Release(g.ref());
      SayWaiting(g, GangWait::kReservation, nullptr, check.delays, check.holder);
      return;
    }
  }
  Admit(g, *std::move(charge), pass.now_ms, !check.past.empty());
  if (!check.past.empty()) g.MutableApart().backfilled_past = std::move(check.past);
  pass.Admitted(&g);
}

void QueueScheduler::ResumeClaimed(QueuedGang& g, PassState& pass,
                                   std::vector<QueuedGang*>* pending) {
  // The victims still stopping, as the capacity model names them.
  std::vector<CapacityModel::GangRef> freed;
  if (g.apart) {
    absl::btree_set<std::string>& awaiting = g.apart->awaiting;
    for (auto it = awaiting.begin(); it != awaiting.end();) {
      auto v = gangs_.find(*it);
      if (v != gangs_.end() && v->second.view.state == GangState::kPreempting) {
        freed.push_back(v->second.ref());
        ++it;
      } else {
        it = awaiting.erase(it);
      }
    }
    g.TidyApart();
  }
  PlacementReasonPtr why;
  if (std::optional<ResourceSet> charge = pass.capacity.Place(g.ref(), &why)) {
    ledger_.Remove(g.request.queue, g.view.charge);
    Admit(g, *std::move(charge), pass.now_ms, false);
    pass.Admitted(&g);
    return;
  }
  if (g.awaiting().empty()) {  // its room went elsewhere: wait as before
    ledger_.Remove(g.request.queue, g.view.charge);
    g.view.charge = ResourceSet();
    g.view.state = GangState::kPending;
    pending->push_back(&g);
    return;
  }
  std::optional<std::vector<uint64_t>> places = pass.capacity.PlacesWithout(g.ref(), freed);
  pass.held.push_back({&g, std::move(freed), pass.now_ms, false, std::move(places), true});
}

PassResult QueueScheduler::Pass(int64_t now_ms, CapacityModel& capacity) {
  ++passes_;
  PassState pass(now_ms, capacity, &config_, &ledger_);
  // One walk of the gangs (thousands): those holding room, claimed, pending.
  std::vector<QueuedGang*> claimed, pending;
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
  // Claimed gangs hold their quota: they start as soon as their victims'
  // room is free, and keep a reservation on it meanwhile.
  for (QueuedGang* claimer : claimed) ResumeClaimed(*claimer, pass, &pending);

  // Gangs past the starvation bound first, oldest first, then last pass's
  // reservations: nothing ordered before them takes what they wait for.
  const QueueOrder order(now_ms, options_, ledger_, pass.totals);
  std::vector<QueuedGang*> first = order.StarvingFirst(pending, &pass.starving);
  reserved_last_ = {reserved_.begin(), reserved_.end()};
  for (const std::string& id : std::exchange(reserved_, {})) {
    auto it = gangs_.find(id);
    if (it != gangs_.end() && it->second.view.state == GangState::kPending)
      first.push_back(&it->second);
  }
  for (QueuedGang* g : first) {
    if (g->tried_in_pass != passes_) TryGang(*g, pass);
  }
  // Then the pending gangs, by queue, in queue order.
  order.TryInTurn(pending, passes_, [&](QueuedGang& g) { TryGang(g, pass); });

  pass.quota.ReleaseHeld();
  for (const Reservation& r : pass.held) {
    if (r.gang->view.state == GangState::kPending) reserved_.push_back(r.gang->request.id);
  }
  return std::move(pass.result);
}

}  // namespace berth
