// The values QueueScheduler takes and gives about gangs: a gang's request,
// its state as the scheduler sees it, a preemption and the rule behind it,
// one pass's result, and the scheduler's options. Apart from
// queue_scheduler.h (which includes this header, so its users need no
// other) so that the units a pass delegates to can name them.
//
// Promises: plain values; PreemptionRuleName and GangStateName give the
// names users see (reasons, status, metrics).
#ifndef BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_
#define BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "placement/resource_set.h"

namespace berth {

struct GangRequest {
  std::string id;
  std::string queue;  // empty: the default queue
  int32_t priority = 0;
  // What the gang charges its quota before it is placed (its bundles' sum,
  // `GPU:<T>` when it is pinned to type T); Place's charge replaces it.
  ResourceSet demand;
  bool preemptible = true;
  std::optional<int64_t> time_limit_ms;  // like Slurm's --time; none: unbounded
  // Gangs of one non-zero shape pose the same placement problem (the
  // caller's hash of their bundles and strategy): a pass that found no
  // victims for one does not search again for the others of its queue
  // and priority. 0: a shape of its own.
  uint64_t shape = 0;
};

// kNewer: a gang of the preemptor's queue and priority that arrived after
// it (WithinQueuePreemption::kLowerOrNewerEqualPriority).
enum class PreemptionRule { kReclaim, kPriority, kNewer, kBackfill, kSparedNodes };
absl::string_view PreemptionRuleName(PreemptionRule rule);

struct Preemption {
  std::string victim;
  std::string by;
  PreemptionRule rule;
  std::string reason;  // "preempted by gang X of queue Y (...)"
};

struct PassResult {
  std::vector<std::string> admitted;  // placed and held: start them
  std::vector<Preemption> preempted;  // stop them, then call Preempted
};

struct QueueSchedulerOptions {
  // How reasons name a gang to users (e.g. "job job-1f2e"), asked when a
  // reason names it: the caller knows what its gangs are. Unset: its id.
  std::function<std::string(const std::string& gang_id)> gang_name;
  bool preemption = true;
  // Reservations for gangs that fit their quota but not the nodes; without
  // them a pass skips a gang that does not fit (berth before queues).
  bool reservations = true;
  int64_t starvation_bound_ms = int64_t{4} * 3600 * 1000;
  size_t max_reservations = 8;  // each costs every later admission a check
  // Gangs past the starvation bound that a pass treats as starving (see
  // queue_scheduler.h): the oldest of each queue, then the oldest others while fewer
  // than this many are. In a long overload most waiting gangs pass the
  // bound, and each one treated drains nodes and searches for victims past
  // the budget, so treating them all costs allocation and pass time.
  size_t max_starving = 32;
  // Bounds on the work of one pass (each unit is a trial placement):
  // victims considered for one gang (the cheapest first), preemption
  // searches (a starving gang searches regardless, and is not counted; nor is a search that
  // finds no gang it may preempt on the nodes the gang could use), and running gangs a
  // reservation looks at (the soonest to end; a gang that fits only after more of them end reserves
  // the places it would take on an idle cluster).
  size_t max_victims_considered = 32;
  // Victims considered when the cheapest do not make room and the gang
  // needs places emptied whole (a multi-node gang of whole-node bundles).
  size_t max_victims_to_empty_places = 256;
  // How long such a gang waits before it empties places, if it would
  // borrow: emptying a node stops every gang on it, and gangs that end
  // often make the room first. A gang within its nominal quota does not
  // wait: the room is its own queue's, and waiting for chance would keep
  // its team below its entitlement at the start of a burst.
  int64_t empty_places_after_ms = int64_t{5} * 60 * 1000;
  size_t max_preemption_searches = 16;
  size_t max_reservation_horizon = 64;
};

enum class GangState { kPending, kClaimed, kRunning, kPreempting };
absl::string_view GangStateName(GangState state);

// A gang as the scheduler sees it, for status and tests.
struct GangView {
  GangState state = GangState::kPending;
  uint64_t arrival = 0;  // its place in line: the order gangs were submitted
  std::string reason;
  ResourceSet charge;  // counted against the quota (claimed, running)
  int64_t waiting_since_ms = 0;
  int64_t started_ms = 0;
  // Its last checkpoint in this run (Checkpointed); 0: none yet.
  int64_t checkpointed_ms = 0;
  uint32_t preemptions = 0;
  std::string preempted_by;  // why it was last preempted, until it runs again
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_
