#include "queueing/queue_scheduler_types.h"

#include <tuple>

#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view PreemptionRuleName(PreemptionRule rule) {
  switch (rule) {
    case PreemptionRule::kReclaim:
      return "reclaim";
    case PreemptionRule::kPriority:
      return "priority";
    case PreemptionRule::kNewer:
      return "newer, same priority";
    case PreemptionRule::kBackfill:
      return "backfill";
    case PreemptionRule::kSparedNodes:
      return "spared nodes";
  }
  return "unknown";
}

std::optional<PreemptionRule> PreemptionRuleFromName(absl::string_view name) {
  for (PreemptionRule rule :
       {PreemptionRule::kReclaim, PreemptionRule::kPriority, PreemptionRule::kNewer,
        PreemptionRule::kBackfill, PreemptionRule::kSparedNodes}) {
    if (PreemptionRuleName(rule) == name) return rule;
  }
  return std::nullopt;
}

std::string PreemptionText(const Preemption& p) {
  return absl::StrCat("preempted by ", p.by_name, " of queue ", p.by_queue, " (",
                      PreemptionRuleName(p.rule), ")");
}

namespace {

const GangReason::Detail& DetailOf(const GangReason& r) {
  static const GangReason::Detail* const kNone = new GangReason::Detail();
  return r.detail == nullptr ? *kNone : *r.detail;
}

}  // namespace

const std::shared_ptr<const QuotaShortfall>& GangReason::quota() const {
  return DetailOf(*this).quota;
}
const std::string& GangReason::gang() const { return DetailOf(*this).gang; }
const PlacementReasonPtr& GangReason::placement() const { return DetailOf(*this).placement; }

bool operator==(const GangReason& a, const GangReason& b) {
  return SameShortfall(a.quota(), b.quota()) && SamePlacementReason(a.placement(), b.placement()) &&
         std::tie(a.kind, a.holder, a.victims, a.gang()) ==
             std::tie(b.kind, b.holder, b.victims, b.gang());
}

namespace {

std::string PlacementText(const PlacementReasonPtr& reason) {
  return reason == nullptr ? "" : PlacementReasonText(*reason);
}

}  // namespace

std::string GangWaitText(const GangReason& r) {
  const std::string quota = r.quota() == nullptr ? "" : QuotaShortfallText(*r.quota());
  switch (r.kind) {
    case GangWait::kTurn:
      return "waiting for its turn";
    case GangWait::kBehindStarving:
      return absl::StrCat("waiting behind ", r.gang(),
                          ", which has waited past the starvation bound");
    case GangWait::kNominalOnly:
      return absl::StrCat("preemptible: false runs only within the queue's nominal quota: ",
                          quota.empty() ? "it would borrow" : quota);
    case GangWait::kQuota:
      return absl::StrCat("waiting for quota: ", quota);
    case GangWait::kQuotaNever:
      return absl::StrCat(quota, "; it can never fit");
    case GangWait::kQuotaWherePlaced:
      return absl::StrCat("waiting for quota where it fits: ", quota);
    case GangWait::kInfeasible:
      return absl::StrCat("infeasible: ", PlacementText(r.placement()));
    case GangWait::kRoom:
      return absl::StrCat("waiting for room: ", PlacementText(r.placement()));
    case GangWait::kReservation:
      return absl::StrCat(
          "would delay ", r.gang(), ", which holds a reservation",
          r.holder == GangReason::Holder::kStarving  ? " (it has waited past the starvation bound)"
          : r.holder == GangReason::Holder::kClaimed ? " (it preempted gangs for that room)"
                                                     : "");
    case GangWait::kVictims:
      return absl::StrCat("waiting for ", r.victims, " preempted gang(s) to stop");
    case GangWait::kStopping:
    case GangWait::kRunning:
      return "";
    case GangWait::kBackfilled:
      return "running (backfilled past a reservation: preemptible by it)";
  }
  return "";
}

std::string GangReasonText(const GangView& v) {
  const std::string by = v.preempted_by == nullptr ? "" : PreemptionText(*v.preempted_by);
  switch (v.reason.kind) {
    case GangWait::kTurn:
      return by.empty() ? GangWaitText(v.reason) : by;
    case GangWait::kStopping:
      return by;
    case GangWait::kVictims:
    case GangWait::kRunning:
    case GangWait::kBackfilled:
      return GangWaitText(v.reason);
    default:
      return by.empty() ? GangWaitText(v.reason) : absl::StrCat(by, "; ", GangWaitText(v.reason));
  }
}

absl::string_view GangStateName(GangState state) {
  switch (state) {
    case GangState::kPending:
      return "PENDING";
    case GangState::kClaimed:
      return "CLAIMED";
    case GangState::kRunning:
      return "RUNNING";
    case GangState::kPreempting:
      return "PREEMPTING";
  }
  return "UNKNOWN";
}

}  // namespace berth
