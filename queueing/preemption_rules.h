// PreemptionRules: which running gangs a waiting gang may preempt in a
// QueueScheduler pass, and by which rule (the rules are described in
// queue_scheduler.h). Internal to queueing/.
//
// Promises: a running gang is a candidate by the first rule that lets the
// preemptor take it, of kPriority, kNewer, kBackfill, kReclaim and
// kSparedNodes in that order, and only if it is on a node the preemptor
// could use; candidates come in the pass's victim order (PassState::
// VictimOrder). Each queue's reclaim verdict and each node's usability
// are asked once per preemptor.
#ifndef BERTH_QUEUEING_PREEMPTION_RULES_H_
#define BERTH_QUEUEING_PREEMPTION_RULES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "placement/resource_set.h"
#include "queueing/pass_state.h"
#include "queueing/queue_config.h"
#include "queueing/queued_gang.h"
#include "queueing/quota_ledger.h"

namespace berth {

struct PreemptionCandidate {
  const QueuedGang* gang;
  PreemptionRule rule;
  double cost;  // GPU-hours it would lose, in GPU-milliseconds
};

class PreemptionRules {
 public:
  // The rules as they apply to `preemptor` now; all three must outlive them.
  PreemptionRules(const QueuedGang& preemptor, PassState& pass, const QuotaLedger& ledger);

  // Whether the preemptor fits within its queue's nominal quota.
  bool within_nominal() const { return within_nominal_; }
  // The running gangs it may preempt, in victim order.
  std::vector<PreemptionCandidate> Candidates();
  // Reclaiming stops at a queue's own nominal quota: whether reclaim
  // candidate `c` still counts with its queue at `owner_usage` (without the
  // victims chosen before it): the queue still borrows a resource the
  // preemptor asks for, and (for a preemptor below its nominal quota) its
  // share without `c` stays at least the preemptor's queue's with it.
  bool StillReclaims(const PreemptionCandidate& c, const ResourceSet& owner_usage) const;

 private:
  // The first rule that lets the preemptor take `v`, if any.
  std::optional<PreemptionRule> RuleFor(const PassState::Victim& v);
  bool MayReclaimFrom(const PassState::Victim& v);
  // A gang on none of the nodes the preemptor could use frees nothing it
  // needs (one without places, of a model that does not say, may).
  bool OnUsablePlaces(const QueuedGang* c);

  const QueuedGang& g_;
  PassState& pass_;
  const QuotaLedger& ledger_;
  const QueueSpec* queue_;
  bool within_nominal_;
  WithinQueuePreemption within_queue_;
  bool below_nominal_;
  bool few_places_;
  double share_after_ = 0;
  // Whether the preemptor may reclaim from a queue, by victim queue (-1: not asked yet).
  std::vector<int8_t> reclaimable_;
  absl::flat_hash_map<uint64_t, bool> usable_;  // by node, asked once each
};

}  // namespace berth

#endif  // BERTH_QUEUEING_PREEMPTION_RULES_H_
