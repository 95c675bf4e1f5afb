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
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "placement/resource_set.h"
#include "queueing/capacity_model.h"
#include "queueing/queue_config.h"
#include "queueing/queue_scheduler_types.h"
#include "queueing/queued_gang.h"
#include "queueing/quota_ledger.h"

namespace berth {

struct PassState;  // one pass's working state (pass_state.h)

struct QueueView {
  ResourceSet usage;
  ResourceSet borrowed;
  double share = 0;
  size_t pending = 0;  // pending and claimed gangs
  size_t running = 0;
};

// Owns the gangs and runs a pass, which delegates to units internal to
// queueing/: queue_order (who is tried next), pass_quota (admission
// verdicts), preemption_rules and victim_search (whom to preempt),
// reservations (backfill), all over one PassState.
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
  // QueueSchedulerOptions::gang_name, for a caller that can name its gangs
  // only once it exists.
  void set_gang_name(std::function<std::string(const std::string& gang_id)> name) {
    options_.gang_name = std::move(name);
  }
  // QueueSchedulerOptions::lacking_backoff, likewise.
  void set_lacking_backoff(std::function<int64_t(int64_t previous_ms)> backoff) {
    options_.lacking_backoff = std::move(backoff);
  }

  // Queues a gang (NOT_FOUND naming `queue` for an unknown queue,
  // ALREADY_EXISTS for a known id), with what the capacity model keeps of
  // it (`placement`, null under a model that keeps nothing per gang), which
  // its record keeps from now on.
  absl::Status Submit(GangRequest request, int64_t now_ms,
                      std::unique_ptr<CapacityModel::Gang> placement = nullptr);
  // The gang is gone (ended, cancelled): its quota is given back. Returns
  // what the capacity model keeps of it (null for an unknown gang): what
  // it holds is released when that is dropped, which the caller may put off
  // (its bundles are still being committed on the nodes).
  std::unique_ptr<CapacityModel::Gang> Finish(const std::string& id);
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
    std::shared_ptr<const Preemption> preempted_by;  // null: none
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
  absl::Status Restore(const GangRecord& record,
                       std::unique_ptr<CapacityModel::Gang> placement = nullptr);

  PassResult Pass(int64_t now_ms, CapacityModel& capacity);

  // An admitted gang lacks bundles (`lost` with a node, or of a failed
  // commit): it keeps its quota and its place, and PlaceLacking places the
  // rest, lost ones first, then by priority and arrival; at once, or
  // (`after_backoff`) after the next wait of lacking_backoff. Not for a
  // gang being preempted (it lets go of the rest); unknown ids are ignored.
  void Lacks(const std::string& id, int64_t now_ms, bool lost, bool after_backoff);
  // Places the remainders of the lacking gangs due at `now_ms` (of every
  // lacking gang when `all`: room came free), in turn, until `most` are
  // placed; the rest keep their turn. A gang placed lacks nothing until
  // Lacks says so again.
  struct Remainder {
    std::string id;
    RemainderPlacement placement;
  };
  std::vector<Remainder> PlaceLacking(int64_t now_ms, CapacityModel& capacity, size_t most,
                                      bool all);
  // The nodes changed: remainders that no set of nodes could take are due.
  void NodesChanged(int64_t now_ms);
  // When the next lacking gang is due; nullopt when none waits on time.
  std::optional<int64_t> NextLackingDue() const;
  size_t lacking() const { return lacking_.size(); }
  // Whether `id` lacks bundles no set of nodes could take.
  bool LacksInfeasibly(const std::string& id) const;
  // Why what `id` lacks was not placed at its last try; null when it lacks
  // nothing or was not tried yet.
  PlacementReasonPtr WhyLacking(const std::string& id) const;

  const GangView* Find(const std::string& id) const;
  // How the capacity model is asked about gang `id` (its record null when
  // the gang is unknown: then `id` must outlive the answer).
  CapacityModel::GangRef Ref(const std::string& id) const;
  // What the gang was submitted with (its queue resolved); null when unknown.
  const GangRequest* Request(const std::string& id) const;
  QueueView Queue(const std::string& name, const ResourceSet& capacity) const;
  const QuotaLedger& ledger() const { return ledger_; }

 private:
  void Insert(const GangRecord& record, std::unique_ptr<CapacityModel::Gang> placement);
  void Admit(QueuedGang& g, ResourceSet charge, int64_t now_ms, bool backfilled);
  // A claimed gang starts once its victims' room is free, waits again if
  // that room went elsewhere (then it joins *pending), and else keeps a
  // reservation on it.
  void ResumeClaimed(QueuedGang& g, PassState& pass, std::vector<QueuedGang*>* pending);
  void StartPreemptions(QueuedGang& by, std::vector<Preemption> victims, PassResult* result);
  // Admits `g`, claims room for it by preemption, or says why it waits
  // (and whether its queue admits nothing more this pass).
  void TryGang(QueuedGang& g, PassState& pass);
  // `g` does not fit its quota: it preempts, or waits for quota (past the
  // starvation bound, holding room or closing its queue).
  void WaitForQuota(QueuedGang& g, PassState& pass, bool starving, const QuotaVerdict& quota);
  // Claims room for `g` by preemption, if some victims would make it.
  bool TryPreempt(QueuedGang& g, PassState& pass, bool starving);
  // Keeps room for waiting `g`: quota held for a starving gang within its
  // nominal quota, and a reservation.
  void HoldRoom(const QueuedGang& g, PassState& pass, bool starving, const QuotaVerdict& quota);
  // `g` was placed at `charge`: it starts if its quota there and the
  // reservations let it (placed again off them if need be), else the
  // placement is given back and it waits.
  void StartPlaced(QueuedGang& g, PassState& pass, const QuotaVerdict& quota,
                   std::optional<ResourceSet> charge);

  QueueConfig config_;
  QueueSchedulerOptions options_;
  QuotaLedger ledger_;
  std::map<std::string, QueuedGang> gangs_;
  uint64_t next_arrival_ = 0;
  uint64_t passes_ = 0;
  // Gangs that held a reservation at the end of the last pass: the next
  // pass tries them first, so no gang ordered before them takes their room.
  std::vector<std::string> reserved_;
  std::set<std::string> reserved_last_;  // reserved_ as this pass began
  // The lacking gangs in turn: (lost first, higher priority, arrival).
  using LackingKey = std::tuple<int, int32_t, uint64_t>;
  static LackingKey KeyOf(const QueuedGang& g);
  void StopLacking(QueuedGang& g);
  // Its next wait for room: the head's backoff after its last.
  void BackOff(QueuedGang& g) const;
  std::map<LackingKey, QueuedGang*> lacking_;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_SCHEDULER_H_
