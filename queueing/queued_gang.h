// QueuedGang: what QueueScheduler keeps of one gang between passes, and
// what the units a pass delegates to (pass_state, pass_quota,
// preemption_rules, victim_search, reservations, queue_order) read of it.
// Internal to queueing/: users see a gang through GangView.
//
// Promises: plain data. A gang's address is stable for as long as it is
// known (QueueScheduler keeps them in a node-based map), so a pass may
// key its caches by QueuedGang*.
#ifndef BERTH_QUEUEING_QUEUED_GANG_H_
#define BERTH_QUEUEING_QUEUED_GANG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/btree_set.h"
#include "queueing/queue_scheduler_types.h"

namespace berth {

// Waits (gang, wait_epoch); btree sets: a gang keeps two, mostly empty.
using WaitKeys = absl::btree_set<std::pair<std::string, uint64_t>>;

struct QueuedGang {
  GangRequest request;
  GangView view;
  // Each wait of a gang (it waits again after a preemption) is its own.
  uint64_t wait_epoch = 0;
  // The waits (gang, wait_epoch) of reservations it started past.
  WaitKeys backfilled_past;
  absl::btree_set<std::string> awaiting;  // victims a claimed gang waits for
  uint64_t tried_in_pass = 0;             // the number of the pass that last tried it
  // Admitted, it lacks bundles (QueueScheduler::Lacks): its remainder is
  // placed from next_try_ms (its last wait backoff_ms), RESCHEDULING ones
  // (`lost`) first; `infeasible`: no set of nodes could take it, until
  // the nodes change.
  struct Lacking {
    bool lost = false;
    bool infeasible = false;
    int64_t next_try_ms = 0;
  };
  std::optional<Lacking> lacking;
  int64_t backoff_ms = 0;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUED_GANG_H_
