// Reservations: backfill for QueueScheduler. A gang that fits its quota but
// not the nodes reserves the earliest time it fits once running gangs end
// by their time limits, and the places it would take then; a gang placed
// later in the pass must leave every reservation its room, end before it,
// or start past it as preemptible (kBackfill). Internal to queueing/.
//
// Promises: Reserve changes nothing in the capacity model (trial
// placements only) and looks at most max_reservation_horizon running gangs
// ahead; RespectsReservations asks the model where the placed gang landed
// at most once.
#ifndef BERTH_QUEUEING_RESERVATIONS_H_
#define BERTH_QUEUEING_RESERVATIONS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "queueing/capacity_model.h"
#include "queueing/queued_gang.h"

namespace berth {

struct PassState;

// A reservation's start when no gang's end is in sight.
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct Reservation {
  const QueuedGang* gang;
  std::vector<CapacityModel::GangRef> freed;  // running gangs that end by `start_ms`
  int64_t start_ms = 0;
  bool starving = false;
  // Where it will go then (CapacityModel::PlacesOf), if the model says.
  std::optional<std::vector<uint64_t>> places;
  bool claimed = false;    // a preemptor's: its victims are stopping to make this room
  bool borrowing = false;  // its gang would borrow: it holds only against borrowers
};

// The reservation of `g`: the fewest running gangs (the soonest
// `max_horizon` to end, by their time limits) whose end lets it fit, or,
// with no such start in sight, the places it would take on an idle cluster
// (which then drain). None when `g` fits not even the idle cluster.
std::optional<Reservation> Reserve(const QueuedGang& g, bool starving, const PassState& pass,
                                   size_t max_horizon);

// What RespectsReservations found out about a gang just placed.
struct ReservationCheck {
  WaitKeys past;  // the waits of reservations it may start past as preemptible
  // On a refusal: the first reservation it would delay (its gang), and why
  // that gang holds it.
  std::string delays;
  GangReason::Holder holder = GangReason::Holder::kWaiting;
  // On a refusal: the places of the reservations it would delay (empty if
  // one of them has no places: no placement could keep off it).
  std::vector<uint64_t> blocking;
};

// Whether `g`, just placed, leaves each reservation of the pass its room;
// if not, whether it may start anyway as preemptible (check->past lists
// them). `within_nominal`: `g`'s quota verdict, which borrowers'
// reservations do not hold against.
bool RespectsReservations(const QueuedGang& g, bool within_nominal, const PassState& pass,
                          ReservationCheck* check);

}  // namespace berth

#endif  // BERTH_QUEUEING_RESERVATIONS_H_
