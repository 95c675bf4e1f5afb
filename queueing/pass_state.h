// PassState: the working state of one QueueScheduler pass: its result so
// far, the reservations it holds, the queues it closed, the gangs it treats
// as starving, and what it caches because nothing changes it within a pass
// (where a held gang is, who holds a place, the running gangs in victim
// order, the searches that found nothing). Internal to queueing/; made at
// the start of a pass and dropped at its end.
//
// Promises: each cache is filled on first use, asking the capacity model
// where a gang is at most once; Admitted keeps them true as gangs start.
#ifndef BERTH_QUEUEING_PASS_STATE_H_
#define BERTH_QUEUEING_PASS_STATE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "placement/resource_set.h"
#include "queueing/capacity_model.h"
#include "queueing/pass_quota.h"
#include "queueing/queue_config.h"
#include "queueing/queued_gang.h"
#include "queueing/reservations.h"

namespace berth {

struct PassState {
  PassState(int64_t now_ms, CapacityModel& capacity, const QueueConfig* config, QuotaLedger* ledger)
      : now_ms(now_ms),
        capacity(capacity),
        config(config),
        totals(capacity.Capacity()),
        quota(ledger) {}

  int64_t now_ms;
  CapacityModel& capacity;
  const QueueConfig* config;
  ResourceSet totals;  // the capacity's, for shares
  PassQuota quota;
  PassResult result;
  std::vector<Reservation> held;
  // Queues that admit nothing more this pass, and the starving gang each waits behind.
  std::map<std::string, std::string> closed;
  // Gangs past the starvation bound that this pass treats as starving.
  absl::flat_hash_set<const QueuedGang*> starving;
  std::set<std::string> admitted;  // of result.admitted
  // Gangs that hold room: running or preempting when the pass began, and
  // those admitted since (each may be preempting now).
  std::vector<const QueuedGang*> live;
  // Where a held gang is (CapacityModel::PlacesOf), asked once a pass: a
  // held gang does not move within a pass.
  const std::vector<uint64_t>& PlacesOf(const QueuedGang* g) const;
  // The gangs held on a place, indexed on first use.
  const std::vector<const QueuedGang*>& HoldersOf(uint64_t place) const;
  // `g` was admitted in this pass: it is in the result, and holds room now.
  void Admitted(const QueuedGang* g);
  // The gangs running when the pass's first victim search began, but those
  // admitted in this pass (never victims), in victim order: lowest priority,
  // then the fewest GPU-hours run since the start or the last checkpoint
  // (what a preemption loses), then the id.
  // Each search of the pass filters this one list: gangs admitted later are
  // not on it, and those preempted since are skipped by their state.
  struct Victim {
    const QueuedGang* gang;
    size_t queue;  // its index in victim_queues
    double cost;   // GPU-hours it would lose, in GPU-milliseconds
  };
  const std::vector<Victim>& VictimOrder() const;
  mutable std::vector<const QueueSpec*> victim_queues;  // the queues of VictimOrder, each once
  // (queue, priority, shape) of gangs for which no victims would do, this pass.
  std::set<std::tuple<absl::string_view, int32_t, uint64_t>> no_victims;
  // (queue, priority, shape) of gangs whose search had candidates when the
  // budget was spent: it stays spent this pass (starving gangs search anyway).
  std::set<std::tuple<absl::string_view, int32_t, uint64_t>> over_budget;
  size_t searches = 0;
  // (shape, hash of the places avoided) of gangs that did not fit off the
  // reservations they would delay, this pass.
  absl::flat_hash_set<std::pair<uint64_t, size_t>> unfit_off_reserved;

 private:
  mutable absl::flat_hash_map<const QueuedGang*, std::vector<uint64_t>> places_of_;
  mutable std::optional<std::map<uint64_t, std::vector<const QueuedGang*>>> holders_;
  mutable std::optional<std::vector<Victim>> victims_;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_PASS_STATE_H_
