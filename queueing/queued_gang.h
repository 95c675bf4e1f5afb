// QueuedGang: what QueueScheduler keeps of one gang between passes, and
// what the units a pass delegates to (pass_state, pass_quota,
// preemption_rules, victim_search, reservations, queue_order) read of it.
// Internal to queueing/: users see a gang through GangView.
//
// Promises: plain data (what few gangs hold is kept apart), the one record
// of a gang: what the capacity model keeps of it lives here too. A gang's address is stable for as
// long as it is known (QueueScheduler keeps them in a node-based map), so a pass may key its caches
// by QueuedGang*.
#ifndef BERTH_QUEUEING_QUEUED_GANG_H_
#define BERTH_QUEUEING_QUEUED_GANG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/btree_set.h"
#include "queueing/capacity_model.h"
#include "queueing/queue_scheduler_types.h"

namespace berth {

// Waits (gang, wait_epoch); btree sets: a gang keeps two, mostly empty.
using WaitKeys = absl::btree_set<std::pair<std::string, uint64_t>>;

struct QueuedGang {
  GangRequest request;
  GangView view;
  // What the capacity model keeps of it (where it is placed); null under a
  // model that keeps nothing per gang.
  std::unique_ptr<CapacityModel::Gang> placement;
  // How the capacity model is asked about it.
  CapacityModel::GangRef ref() const { return {&request.id, placement.get()}; }
  // Each wait of a gang (it waits again after a preemption) is its own.
  uint64_t wait_epoch = 0;
  uint64_t tried_in_pass = 0;  // the number of the pass that last tried it
  int64_t backoff_ms = 0;      // its last wait for room while it lacked bundles
  // Admitted, it lacks bundles (QueueScheduler::Lacks): its remainder is
  // placed from next_try_ms, RESCHEDULING ones (`lost`) first;
  // `infeasible`: no set of nodes could take it, until the nodes change;
  // `why`: the placer's reason at its last try, if it was not placed.
  struct Lacking {
    bool lost = false;
    bool infeasible = false;
    int64_t next_try_ms = 0;
    PlacementReasonPtr why;
  };
  // What a gang holds only now and then: the waits (gang, wait_epoch) of
  // reservations it started past, the victims a claimed gang waits for,
  // what it lacks. Apart, made when first set and dropped when empty: a
  // gang with none (most) keeps a null pointer.
  struct Apart {
    WaitKeys backfilled_past;
    absl::btree_set<std::string> awaiting;
    std::optional<Lacking> lacking;
  };
  std::unique_ptr<Apart> apart;

  const WaitKeys& backfilled_past() const { return apart ? apart->backfilled_past : kNoWaits; }
  const absl::btree_set<std::string>& awaiting() const {
    return apart ? apart->awaiting : kNoVictims;
  }
  Lacking* lacking() { return apart && apart->lacking ? &*apart->lacking : nullptr; }
  const Lacking* lacking() const { return apart && apart->lacking ? &*apart->lacking : nullptr; }
  Apart& MutableApart() {
    if (!apart) apart = std::make_unique<Apart>();
    return *apart;
  }
  void TidyApart() {
    if (apart && apart->backfilled_past.empty() && apart->awaiting.empty() && !apart->lacking) {
      apart.reset();
    }
  }

 private:
  inline static const WaitKeys kNoWaits{};
  inline static const absl::btree_set<std::string> kNoVictims{};
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUED_GANG_H_
