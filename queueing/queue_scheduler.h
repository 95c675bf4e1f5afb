// QueueScheduler: which waiting gangs start, in what order, and which
// running gangs make room, for a cluster shared by queues (teams).
//
// Pure and deterministic: the caller passes the time and the events in and
// carries out the decisions; the cluster's capacity is asked through a
// CapacityModel. Rules, in the order a pass applies them:
//
// - Whole gangs only. A gang is admitted when its whole charge fits its
//   queue's quota (QuotaLedger: nominal, borrowing, the cohort's pool) and
//   the capacity model placed all of it; otherwise nothing of it is held.
// - Order. Within a queue: priority (higher first), then arrival. Between
//   queues with waiting gangs: weighted dominant resource share (DRF), the
//   queue with the smallest share goes next, so shares converge to the
//   weights while queues have work.
// - Preemption, of running preemptible gangs only, whole, to lose the fewest
//   GPU-hours of work (lowest priority first, then the least run since its
//   start or its last checkpoint: the youngest when none reports
//   checkpoints; then the set is pruned to a minimal one). Victims are
//   taken a place (node) at a time, a multi-node gang with each of its
//   nodes; when the cheapest places do not make
//   room (a gang of whole-node bundles gains nothing from half-emptied
//   nodes), the places whose every gang may be preempted and where a
//   bundle of the gang fits are emptied, cheapest first: at once by a gang
//   within its queue's nominal quota, by another once it has waited
//   empty_places_after_ms. Rules: kReclaim, a gang within its
//   queue's nominal quota takes back what other queues of its cohort
//   borrow, and so does one of a queue below its nominal quota that it
//   would take past it, from queues whose share stays at least its queue's
//   share with it (Kueue's fair sharing); kPriority, within a queue a
//   higher priority preempts lower (unless the queue's
//   within_queue_preemption is Never); kNewer, with
//   LowerOrNewerEqualPriority, a gang preempts the later arrivals of its
//   queue and priority too (Kueue's rule, which asks that the gang fit
//   within its nominal quota; here a borrowing gang may too, as with
//   kPriority: it takes only its own queue's room, and whatever it borrows
//   stays reclaimable); kBackfill, a gang with
//   a reservation takes back the room of gangs that started past it as
//   preemptible; kSparedNodes, a gang within its queue's nominal quota
//   whose bundles fit on few nodes (CapacityModel::HoldsPlacesSparedFor)
//   takes them from gangs that could run on many, of any queue: they
//   came before it was known, or fell back there when nothing else was
//   free, and would otherwise hold its queue's quota out of reach for as
//   long as they run. The preemptor then
//   holds its quota and its reservation until the victims have stopped
//   (Preempted) and it fits; no gang starts on that room meanwhile,
//   preemptible or not (it would only be preempted in turn, and the
//   preemptor would find its room taken and preempt again).
// - Backfill. A gang that fits its quota but not the nodes gets a
//   reservation: the earliest time it fits once running
//   gangs end by their time limits, on the places (nodes) it would take
//   then; with no such time in sight, the places it would take on an idle
//   cluster, which then drain. A later gang may start on those places only
//   if it ends (by its limit) before that time, or as preemptible
//   (kBackfill; where it lands is left to the placer, which knows the
//   cluster's fragmentation better than the reservation does); otherwise it is
//   placed again off them if it fits there. The reservation of a gang that
//   would borrow holds only against gangs that would borrow too: a gang of
//   a queue within its nominal quota starts on its places freely and is
//   never its victim (that room is its own queue's quota). Without one, a
//   borrowing multi-node gang waits for whole nodes to come free by chance
//   while small gangs refill them. A gang waiting
//   longer than starvation_bound goes first in its queue, whatever the
//   priorities; within its nominal quota it gets a reservation no gang may
//   take and the oldest of its queue holds its quota for the rest of the
//   pass against the gangs behind it (whether it waits for room or for
//   quota its cohort lent out; other queues may still borrow that quota,
//   and it reclaims what they borrow when its room comes); one
//   that waits for its own queue's quota stops its queue: nothing behind it
//   is admitted until it fits. Its victim searches do not count against
//   max_preemption_searches. A pass treats so only the oldest such gang
//   of each queue and then the oldest others, while fewer than
//   max_starving are; the rest still go first in their queues. A gang
//   that fits not even the idle cluster (CapacityModel::Infeasible: a model
//   the cluster lacks) searches no victims, gets no reservation and holds
//   no quota: it waits as infeasible, as Ray's infeasible groups do.
// - A gang that may not be preempted (preemptible false) runs only within
//   its queue's nominal quota.
#ifndef BERTH_QUEUEING_QUEUE_SCHEDULER_H_
#define BERTH_QUEUEING_QUEUE_SCHEDULER_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "placement/resource_set.h"
#include "queueing/capacity_model.h"
#include "queueing/queue_config.h"
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
  // How reasons name it to users (e.g. "job job-1f2e"); empty: its id.
  std::string name;
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
  bool preemption = true;
  // Reservations for gangs that fit their quota but not the nodes; without
  // them a pass skips a gang that does not fit (berth before queues).
  bool reservations = true;
  int64_t starvation_bound_ms = int64_t{4} * 3600 * 1000;
  size_t max_reservations = 8;  // each costs every later admission a check
  // Gangs past the starvation bound that a pass treats as starving (see
  // above): the oldest of each queue, then the oldest others while fewer
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
  std::string reason;
  ResourceSet charge;  // counted against the quota (claimed, running)
  int64_t waiting_since_ms = 0;
  int64_t started_ms = 0;
  // Its last checkpoint in this run (Checkpointed); 0: none yet.
  int64_t checkpointed_ms = 0;
  uint32_t preemptions = 0;
  std::string preempted_by;  // why it was last preempted, until it runs again
};

struct QueueView {
  ResourceSet usage;
  ResourceSet borrowed;
  double share = 0;
  size_t pending = 0;  // pending and claimed gangs
  size_t running = 0;
};

class QueueScheduler {
 public:
  QueueScheduler(QueueConfig config, QueueSchedulerOptions options)
      : config_(std::move(config)), options_(options), ledger_(&config_) {}
  QueueScheduler(const QueueScheduler&) = delete;
  QueueScheduler& operator=(const QueueScheduler&) = delete;

  // Replaces the configuration; a queue in use may not be deleted
  // (FAILED_PRECONDITION naming it), and then nothing changes.
  absl::Status Reconfigure(QueueConfig config);
  const QueueConfig& config() const { return config_; }

  // Queues a gang (NOT_FOUND naming `queue` for an unknown queue,
  // ALREADY_EXISTS for a known id).
  absl::Status Submit(GangRequest request, int64_t now_ms);
  // The gang is gone (ended, cancelled): its quota is given back. The
  // caller releases what the capacity model holds for it.
  void Finish(const std::string& id);
  // A preempted gang stopped and the caller released its capacity: it waits
  // again, in its old place in line.
  void Preempted(const std::string& id, int64_t now_ms);
  // A running gang saved a checkpoint at `at_ms`: preempting it now loses
  // only the work since then, so it costs less as a victim. Not kept by
  // Export: after a restore a gang costs its whole run until it reports
  // again (a train job reports at its next checkpoint).
  void Checkpointed(const std::string& id, int64_t at_ms);
  // What a head keeps across a restart: every gang, in its place in line.
  // A gang claiming room is saved as waiting (it claims again); one being
  // preempted stays so until the caller reports Preempted.
  struct GangRecord {
    GangRequest request;
    uint64_t arrival = 0;
    GangState state = GangState::kPending;  // kPending, kRunning or kPreempting
    ResourceSet charge;                     // kRunning: what it holds
    int64_t waiting_since_ms = 0;
    int64_t started_ms = 0;
    uint32_t preemptions = 0;
    std::string preempted_by;
  };
  // In place-in-line order.
  std::vector<GangRecord> Export() const;
  // Brings back what Export wrote, into a scheduler with no gangs: the same
  // usage, the same order. A record naming a queue the config lacks is
  // FAILED_PRECONDITION, and then nothing is restored.
  absl::Status Restore(const std::vector<GangRecord>& records);
  // Brings back one gang (a head restoring its groups one by one, in
  // arrival order); an unknown queue is FAILED_PRECONDITION, a known id
  // ALREADY_EXISTS.
  absl::Status Restore(const GangRecord& record);

  PassResult Pass(int64_t now_ms, CapacityModel& capacity);

  const GangView* Find(const std::string& id) const;
  QueueView Queue(const std::string& name, const ResourceSet& capacity) const;
  const QuotaLedger& ledger() const { return ledger_; }

 private:
  struct PassState;  // one pass's working state
  // Waits (gang, wait_epoch); btree sets: a gang keeps two, mostly empty.
  using WaitKeys = absl::btree_set<std::pair<std::string, uint64_t>>;
  struct Gang {
    GangRequest request;
    uint64_t arrival = 0;
    GangView view;
    // Each wait of a gang (it waits again after a preemption) is its own.
    uint64_t wait_epoch = 0;
    // The waits (gang, wait_epoch) of reservations it started past.
    WaitKeys backfilled_past;
    absl::btree_set<std::string> awaiting;  // victims a claimed gang waits for
    uint64_t tried_in_pass = 0;             // the number of the pass that last tried it
  };
  struct Reservation {
    std::string gang;
    std::vector<std::string> freed;  // running gangs that end by `start_ms`
    int64_t start_ms = 0;
    bool starving = false;
    // Where it will go then (CapacityModel::PlacesOf), if the model says.
    std::optional<std::vector<uint64_t>> places;
    bool claimed = false;    // a preemptor's: its victims are stopping to make this room
    bool borrowing = false;  // its gang would borrow: it holds only against borrowers
  };

  void Insert(const GangRecord& record);
  void Admit(Gang& g, ResourceSet charge, int64_t now_ms, bool backfilled);
  struct Victims {
    std::vector<Preemption> preemptions;
    std::optional<std::vector<uint64_t>> places;  // where `g` goes once they stop
  };
  // The minimal set of running gangs whose end makes room for `g`, or none.
  // Gangs admitted in this pass or holding a reservation are not victims,
  // nor gangs on none of the nodes `g` could use. Finding none such ends the
  // search for free; else, with `spends_budget`, it spends one of the pass's
  // max_preemption_searches, and none left ends it with *over_budget set.
  std::optional<Victims> ChooseVictims(const Gang& g, PassState& pass, bool spends_budget,
                                       bool* over_budget) const;
  // None when `g` fits not even the idle cluster.
  std::optional<Reservation> Reserve(const Gang& g, bool starving, const PassState& pass) const;
  // Whether `g`, just placed, leaves each reservation its room; if not,
  // whether it may start anyway as preemptible (*past lists them). When it
  // may not, *blocking gets the places of the reservations it would delay
  // (empty if one of them has no places: no placement could keep off it).
  // `within_nominal`: `g`'s quota verdict, which borrowers' reservations
  // do not hold against.
  bool RespectsReservations(const Gang& g, bool within_nominal, int64_t now_ms,
                            const std::vector<Reservation>& held, CapacityModel& capacity,
                            WaitKeys* past, std::string* reason,
                            std::vector<uint64_t>* blocking) const;
  void StartPreemptions(Gang& by, std::vector<Preemption> victims, PassResult* result);
  // Admits `g`, claims room for it by preemption, or says why it waits
  // (and whether its queue admits nothing more this pass).
  void TryGang(Gang& g, PassState& pass);

  QueueConfig config_;
  QueueSchedulerOptions options_;
  QuotaLedger ledger_;
  std::map<std::string, Gang> gangs_;
  uint64_t next_arrival_ = 0;
  uint64_t passes_ = 0;
  // Gangs that held a reservation at the end of the last pass: the next
  // pass tries them first, so no gang ordered before them takes their room.
  std::vector<std::string> reserved_;
  std::set<std::string> reserved_last_;  // reserved_ as this pass began
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_SCHEDULER_H_
