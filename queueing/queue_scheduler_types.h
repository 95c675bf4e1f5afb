// The values QueueScheduler takes and gives about gangs: a gang's request,
// its state as the scheduler sees it, why it waits or runs as it does, a
// preemption and the rule behind it, one pass's result, and the
// scheduler's options. Apart from queue_scheduler.h (which includes this
// header, so its users need no other) so that the units a pass delegates
// to can name them.
//
// Promises: plain values. Decisions are typed (GangWait, PreemptionRule,
// QuotaShortfall) and rendered to the text users see only here:
// PreemptionRuleName, GangStateName, PreemptionText, GangReasonText.
#ifndef BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_
#define BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "placement/placement_reason.h"
#include "placement/resource_set.h"
#include "queueing/quota_ledger.h"

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
// The rule PreemptionRuleName names `name`; nullopt for none.
std::optional<PreemptionRule> PreemptionRuleFromName(absl::string_view name);

struct Preemption {
  std::string victim;
  std::string by;
  PreemptionRule rule = PreemptionRule::kReclaim;
  std::string by_name;   // how reasons named `by` then (QueueSchedulerOptions::gang_name)
  std::string by_queue;  // `by`'s queue
};
// "preempted by job X of queue Y (reclaim)"
std::string PreemptionText(const Preemption& p);

struct PassResult {
  std::vector<std::string> admitted;  // placed and held: start them
  std::vector<Preemption> preempted;  // stop them, then call Preempted
};

struct QueueSchedulerOptions {
  // How reasons name a gang to users (e.g. "job job-1f2e"), asked when a
  // reason names it: the caller knows what its gangs are. Unset: its id.
  std::function<std::string(const std::string& gang_id)> gang_name;
  // The wait before an admitted gang lacking bundles is tried again, after
  // `previous_ms` (0: the first): the caller's backoff. Unset: none.
  std::function<int64_t(int64_t previous_ms)> lacking_backoff;
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

// Why a gang waits, or how it runs: the kind, and what the kind names.
enum class GangWait : uint8_t {
  kTurn,              // not tried yet
  kBehindStarving,    // its queue waits behind `gang`, past the starvation bound
  kNominalOnly,       // not preemptible, and would borrow (`quota`; null: no limit passed)
  kQuota,             // its queue's quota (`quota`)
  kQuotaNever,        // its queue's quota, which it can never fit (`quota`)
  kQuotaWherePlaced,  // the quota of where it landed (`quota`: a typed GPU, say)
  kInfeasible,        // no set of nodes could hold it (`placement`)
  kRoom,              // no free room (`placement`)
  kReservation,       // it would delay `gang`'s reservation (`holder`)
  kVictims,           // claimed room: `victims` preempted gangs are stopping
  kStopping,          // preempted: it stops what runs (GangView::preempted_by)
  kRunning,
  kBackfilled,  // running past a reservation, preemptible by it
};
struct GangReason {
  // Of a reservation a gang would delay: why it holds it.
  enum class Holder : uint8_t { kWaiting, kStarving, kClaimed };
  // What the kind names besides itself. Apart: most gangs run, and a
  // running gang names nothing.
  struct Detail {
    std::shared_ptr<const QuotaShortfall> quota;
    std::string gang;              // kBehindStarving, kReservation: the gang's id
    PlacementReasonPtr placement;  // kInfeasible, kRoom: the placer's reason
  };
  GangWait kind = GangWait::kTurn;
  Holder holder = Holder::kWaiting;
  uint32_t victims = 0;
  std::shared_ptr<const Detail> detail;  // null: it names nothing

  // Detail's fields; empty when there is none.
  const std::shared_ptr<const QuotaShortfall>& quota() const;
  const std::string& gang() const;
  const PlacementReasonPtr& placement() const;
  friend bool operator==(const GangReason& a, const GangReason& b);
};

// A gang as the scheduler sees it, for status and tests.
struct GangView {
  GangState state = GangState::kPending;
  uint64_t arrival = 0;  // its place in line: the order gangs were submitted
  GangReason reason;
  ResourceSet charge;  // counted against the quota (claimed, running)
  int64_t waiting_since_ms = 0;
  int64_t started_ms = 0;
  // Its last checkpoint in this run (Checkpointed); 0: none yet.
  int64_t checkpointed_ms = 0;
  uint32_t preemptions = 0;
  // Its last preemption, until it runs again; null when none.
  std::shared_ptr<const Preemption> preempted_by;
};
// Why the gang waits (or how it runs), as users read it: after why it was
// last preempted, while it waits again. GangWaitText: without that.
std::string GangReasonText(const GangView& view);
std::string GangWaitText(const GangReason& reason);

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_SCHEDULER_TYPES_H_
