#include "queueing/pass_quota.h"

namespace berth {

QuotaVerdict PassQuota::Check(absl::string_view queue, const ResourceSet& charge,
                              std::vector<std::pair<std::string, ResourceSet>> released) const {
  for (const auto& [q, demand] : held_) {
    if (q != queue) released.emplace_back(q, demand);
  }
  return ledger_->Check(queue, charge, released);
}

const QuotaVerdict& PassQuota::QuotaOf(const QueuedGang& g) {
  const GangRequest& r = g.request;
  if (r.shape == 0) return own_verdict_ = Check(r.queue, r.demand);
  auto [it, fresh] = verdicts_.try_emplace({r.queue, r.shape});
  Verdict& v = it->second;
  if (fresh || v.version != ledger_->version() || *v.demand != r.demand) {
    v = {ledger_->version(), &r.demand, Check(r.queue, r.demand)};
  }
  return v.verdict;
}

ResourceSet PassQuota::GangUsage(absl::string_view queue) const {
  ResourceSet usage = ledger_->Usage(queue);
  for (const auto& [q, demand] : held_) {
    if (q == queue) usage.Subtract(demand).IgnoreError();
  }
  return usage;
}

void PassQuota::Hold(const std::string& queue, const ResourceSet& demand) {
  if (!holding_.insert(queue).second) return;
  ledger_->Add(queue, demand);
  held_.emplace_back(queue, demand);
}

void PassQuota::ReleaseHeld() {
  for (const auto& [queue, demand] : held_) ledger_->Remove(queue, demand);
}

}  // namespace berth
