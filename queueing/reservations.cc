#include "queueing/reservations.h"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "queueing/pass_state.h"

namespace berth {
namespace {

// Whether `g`, just placed, takes room reservation `r` needs: it does not
// end before `r` starts, `r` holds against it, and it landed on `r`'s
// places (a model without places: `r`'s gang no longer fits once `freed`
// end). *mine: where `g` landed, asked once.
bool TakesRoomOf(const QueuedGang& g, bool within_nominal, const Reservation& r,
                 const PassState& pass, std::optional<std::vector<uint64_t>>* mine) {
  if (r.gang == &g) return false;
  if (g.request.time_limit_ms && r.start_ms != kNever &&
      pass.now_ms + *g.request.time_limit_ms <= r.start_ms) {
    return false;  // ends before the reserved gang can start
  }
  // Room held for a borrowing gang is not taken from a queue's own quota.
  if (r.borrowing && within_nominal) return false;
  // It leaves the reserved gang its room: off its places, or (a model
  // without places) the reserved gang still fits once `freed` end.
  if (r.places && !r.places->empty()) {
    if (!*mine) *mine = pass.capacity.PlacesOf(g.ref());
    std::vector<uint64_t> shared;
    std::set_intersection((*mine)->begin(), (*mine)->end(), r.places->begin(), r.places->end(),
                          std::back_inserter(shared));
    if (shared.empty()) return false;
  } else if (pass.capacity.FitsWithout(r.gang->ref(), r.freed)) {
    return false;
  }
  return true;
}

}  // namespace

std::optional<Reservation> Reserve(const QueuedGang& g, bool starving, const PassState& pass,
                                   size_t max_horizon) {
  const int64_t now_ms = pass.now_ms;
  CapacityModel& capacity = pass.capacity;
  // Running gangs by the time they end at the latest (preempting ones now),
  // the soonest max_horizon of them.
  std::vector<std::pair<int64_t, const QueuedGang*>> ending;
  for (const QueuedGang* c : pass.live) {
    if (c->view.state == GangState::kPreempting) {
      ending.emplace_back(now_ms, c);
    } else if (c->view.state == GangState::kRunning && c->request.time_limit_ms) {
      ending.emplace_back(c->view.started_ms + *c->request.time_limit_ms, c);
    }
  }
  const size_t horizon = std::min(ending.size(), max_horizon);
  std::partial_sort(
      ending.begin(), ending.begin() + horizon, ending.end(), [](const auto& a, const auto& b) {
        return std::tie(a.first, a.second->request.id) < std::tie(b.first, b.second->request.id);
      });
  ending.resize(horizon);
  auto prefix = [&](size_t k) {
    std::vector<CapacityModel::GangRef> refs;
    for (size_t i = 0; i < k; ++i) refs.push_back(ending[i].second->ref());
    return refs;
  };
  Reservation r{&g, {}, kNever, starving, {}};
  // Where it goes with the fewest gangs ended found so far (the last trial
  // that fit: the answer's places, not asked again).
  std::optional<std::vector<uint64_t>> at_hi;
  if (!ending.empty()) at_hi = capacity.PlacesWithout(g.ref(), prefix(ending.size()));
  if (!at_hi) {
    // No start in sight: it keeps the places it would take on an idle
    // cluster, which drain as their gangs end.
    r.places = capacity.PlacesWhenIdle(g.ref());
    if (!r.places) return std::nullopt;
    for (const QueuedGang* c : pass.live) r.freed.push_back(c->ref());
    return r;
  }
  // The fewest gangs to end (freeing more only helps): binary search.
  size_t lo = 0, hi = ending.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (std::optional<std::vector<uint64_t>> places =
            capacity.PlacesWithout(g.ref(), prefix(mid))) {
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

bool RespectsReservations(const QueuedGang& g, bool within_nominal, const PassState& pass,
                          ReservationCheck* check) {
  std::optional<std::vector<uint64_t>> mine;  // where g landed, once asked
  bool respects = true, avoidable = true;
  for (const Reservation& r : pass.held) {
    if (!TakesRoomOf(g, within_nominal, r, pass, &mine)) continue;
    if (!r.starving && !r.claimed && g.request.preemptible) {
      check->past.emplace(r.gang->request.id, r.gang->wait_epoch);
      continue;
    }
    if (respects) {
      check->delays = r.gang->request.id;
      check->holder = r.starving  ? GangReason::Holder::kStarving
                      : r.claimed ? GangReason::Holder::kClaimed
                                  : GangReason::Holder::kWaiting;
    }
    respects = false;
    if (r.places && !r.places->empty()) {
      check->blocking.insert(check->blocking.end(), r.places->begin(), r.places->end());
    } else {
      avoidable = false;
    }
  }
  if (respects) return true;  // check->blocking is read only on a refusal
  std::vector<uint64_t>& blocking = check->blocking;
  if (!avoidable) blocking.clear();
  std::sort(blocking.begin(), blocking.end());
  blocking.erase(std::unique(blocking.begin(), blocking.end()), blocking.end());
  return false;
}

}  // namespace berth
