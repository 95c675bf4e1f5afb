#include "queueing/preemption_rules.h"

namespace berth {

PreemptionRules::PreemptionRules(const QueuedGang& preemptor, PassState& pass,
                                 const QuotaLedger& ledger)
    : g_(preemptor),
      pass_(pass),
      ledger_(ledger),
      queue_(pass.config->FindQueue(preemptor.request.queue)),
      within_nominal_(
          pass.quota.Check(preemptor.request.queue, preemptor.request.demand).within_nominal),
      within_queue_(queue_ != nullptr ? queue_->within_queue_preemption
                                      : WithinQueuePreemption::kLowerPriority),
      // A queue below its nominal quota whose gang would take it past it
      // reclaims too, from a queue whose share stays at least what its own
      // becomes (Kueue's fair sharing, LessThanOrEqualToFinalShare): else a
      // gang larger than what is left of its queue's quota never runs while
      // the cohort's quota is lent out.
      below_nominal_(!within_nominal_ &&
                     ledger.IsBelowNominal(preemptor.request.queue, preemptor.request.demand)),
      // Within its nominal quota, a gang that fits few nodes takes them back.
      few_places_(within_nominal_ && pass.capacity.FitsFewPlaces(preemptor.ref())) {
  if (below_nominal_) {
    ResourceSet after = ledger.Usage(preemptor.request.queue);
    after.Add(preemptor.request.demand).IgnoreError();
    share_after_ = ledger.ShareAt(preemptor.request.queue, after, pass.totals);
  }
}

std::vector<PreemptionCandidate> PreemptionRules::Candidates() {
  const std::vector<PassState::Victim>& victims = pass_.VictimOrder();
  reclaimable_.assign(pass_.victim_queues.size(), -1);
  // In victim order already (the pass's one list): lowest priority first,
  // then the fewest GPU-hours lost. None holds a reservation: those are
  // gangs that wait (pending or claimed).
  std::vector<PreemptionCandidate> candidates;
  for (const PassState::Victim& v : victims) {
    const QueuedGang* c = v.gang;
    if (c->view.state != GangState::kRunning) continue;  // preempted earlier in the pass
    const std::optional<PreemptionRule> rule = RuleFor(v);
    if (!rule) continue;
    if (!OnUsablePlaces(c)) continue;
    candidates.push_back({c, *rule, v.cost});
  }
  return candidates;
}

std::optional<PreemptionRule> PreemptionRules::RuleFor(const PassState::Victim& v) {
  const QueuedGang* c = v.gang;
  const GangRequest& by = g_.request;
  const bool same_queue = c->request.queue == by.queue;
  if (same_queue && c->request.priority < by.priority &&
      within_queue_ != WithinQueuePreemption::kNever) {
    return PreemptionRule::kPriority;
  }
  if (same_queue && c->request.priority == by.priority && c->view.arrival > g_.view.arrival &&
      within_queue_ == WithinQueuePreemption::kLowerOrNewerEqualPriority) {
    return PreemptionRule::kNewer;
  }
  if (c->backfilled_past().count({by.id, g_.wait_epoch}) != 0) {
    return PreemptionRule::kBackfill;
  }
  if (MayReclaimFrom(v)) return PreemptionRule::kReclaim;
  if (few_places_ && pass_.capacity.HoldsPlacesSparedFor(c->ref(), g_.ref())) {
    return PreemptionRule::kSparedNodes;
  }
  return std::nullopt;
}

bool PreemptionRules::MayReclaimFrom(const PassState::Victim& v) {
  int8_t& known = reclaimable_[v.queue];
  if (known < 0) {
    const QueueSpec* owner = pass_.victim_queues[v.queue];
    known =
        (within_nominal_ || below_nominal_) && queue_ != nullptr && !queue_->cohort.empty() &&
        owner != nullptr && owner != queue_ && owner->cohort == queue_->cohort &&
        ledger_.IsBorrowingAt(owner->name, pass_.quota.GangUsage(owner->name), g_.request.demand);
  }
  return known == 1;
}

bool PreemptionRules::OnUsablePlaces(const QueuedGang* c) {
  const std::vector<uint64_t>& where = pass_.PlacesOf(c);
  if (where.empty()) return true;
  for (uint64_t node : where) {
    auto [it, fresh] = usable_.try_emplace(node, false);
    if (fresh) it->second = pass_.capacity.CouldHold(g_.ref(), node);
    if (it->second) return true;
  }
  return false;
}

bool PreemptionRules::StillReclaims(const PreemptionCandidate& c,
                                    const ResourceSet& owner_usage) const {
  const std::string& owner = c.gang->request.queue;
  if (!ledger_.IsBorrowingAt(owner, owner_usage, g_.request.demand)) return false;
  return !(below_nominal_ &&
           ledger_.ShareAt(owner, owner_usage, pass_.totals, c.gang->view.charge) < share_after_);
}

}  // namespace berth
