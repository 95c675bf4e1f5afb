#include "queueing/quota_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

using Wide = __int128;

const ResourceSet& Empty() {
  static const ResourceSet* empty = new ResourceSet();
  return *empty;
}

Quantity Limit(const QuotaAmounts& limits, const std::string& resource, Quantity otherwise) {
  auto it = limits.find(resource);
  return it == limits.end() ? otherwise : it->second;
}

std::string Show(Wide units) {
  return Quantity::FromUnits(static_cast<int64_t>(std::min<Wide>(units, Quantity::kMaxUnits)))
      .ToString();
}

}  // namespace

const ResourceSet& QuotaLedger::Usage(absl::string_view queue) const {
  auto it = usage_.find(queue);
  return it == usage_.end() ? Empty() : it->second;
}

void QuotaLedger::Add(absl::string_view queue, const ResourceSet& charge) {
  auto it = usage_.find(queue);
  if (it == usage_.end()) it = usage_.emplace(std::string(queue), ResourceSet()).first;
  it->second.Add(charge).IgnoreError();  // bounded: charges are validated amounts
}

void QuotaLedger::Remove(absl::string_view queue, const ResourceSet& charge) {
  auto it = usage_.find(queue);
  if (it == usage_.end()) return;
  it->second.Subtract(charge).IgnoreError();
  if (it->second.empty()) usage_.erase(it);
}

QuotaVerdict QuotaLedger::Check(
    absl::string_view queue, const ResourceSet& charge,
    const std::vector<std::pair<std::string, ResourceSet>>& released) const {
  QuotaVerdict v;
  const QueueSpec* q = config_->FindQueue(queue);
  if (q == nullptr) {
    v.never = true;
    v.reason = absl::StrCat("queue '", queue, "' was deleted");
    return v;
  }
  // Usage of a member as if `released` were given back.
  auto used = [&](const QueueSpec& member, const std::string& r) {
    Wide u = Usage(member.name).Get(r).units();
    for (const auto& [name, c] : released) {
      if (name == member.name) u -= c.Get(r).units();
    }
    return std::max<Wide>(u, 0);
  };
  v.fits = true;
  v.within_nominal = true;
  for (const auto& [r, nominal] : q->nominal) {
    const Wide d = charge.Get(r).units();
    if (d == 0) continue;
    const Wide u = used(*q, r);
    const Wide n = nominal.units();
    if (u + d > n) v.within_nominal = false;
    if (q->cohort.empty()) {
      if (u + d <= n) continue;
      v.fits = false;
      v.never = v.never || d > n;
      if (v.reason.empty()) {
        v.reason = absl::StrCat("queue ", q->name, ": ", r, " ", Show(u), " in use + ", Show(d),
                                " asked would pass its quota of ", Show(n));
      }
      continue;
    }
    const auto borrow = q->borrowing_limit.find(r);
    if (borrow != q->borrowing_limit.end() && u + d > n + borrow->second.units()) {
      v.fits = false;
      v.never = v.never || d > n + borrow->second.units();
      if (v.reason.empty()) {
        v.reason = absl::StrCat("queue ", q->name, ": ", r, " ", Show(u), " in use + ", Show(d),
                                " asked would pass its quota of ", Show(n),
                                " plus borrowing limit ", Show(borrow->second.units()));
      }
      continue;
    }
    Wide pool = 0, cohort_used = 0, own_guaranteed = 0;
    for (const auto& [name, member] : config_->queues()) {
      if (member.cohort != q->cohort) continue;
      auto mn = member.nominal.find(r);
      if (mn == member.nominal.end()) continue;
      const Wide lend = Limit(member.lending_limit, r, mn->second).units();
      const Wide guaranteed = mn->second.units() - lend;
      pool += lend;
      if (&member == q) {
        own_guaranteed = guaranteed;
        continue;
      }
      cohort_used += std::max<Wide>(0, used(member, r) - guaranteed);
    }
    const Wide own_after = std::max<Wide>(0, u + d - own_guaranteed);
    if (cohort_used + own_after <= pool) continue;
    v.fits = false;
    v.never = v.never || std::max<Wide>(0, d - own_guaranteed) > pool;
    if (v.reason.empty()) {
      v.reason = absl::StrCat("cohort ", q->cohort, " has no ", r, " to lend queue ", q->name, ": ",
                              Show(cohort_used), " of its ", Show(pool),
                              " is in use by the other queues; ", Show(d), " asked");
    }
  }
  return v;
}

ResourceSet QuotaLedger::Borrowed(absl::string_view queue) const {
  ResourceSet borrowed;
  const QueueSpec* q = config_->FindQueue(queue);
  if (q == nullptr) return borrowed;
  const ResourceSet& u = Usage(queue);
  for (const auto& [r, nominal] : q->nominal) {
    if (u.Get(r) > nominal)
      borrowed.Set(r, Quantity::FromUnits(u.Get(r).units() - nominal.units()));
  }
  return borrowed;
}

bool QuotaLedger::IsBorrowing(absl::string_view queue, const ResourceSet& of) const {
  const ResourceSet borrowed = Borrowed(queue);
  for (const auto& [r, amount] : of.entries()) {
    if (!borrowed.Get(r).IsZero()) return true;
  }
  return false;
}

double QuotaLedger::Share(absl::string_view queue, const ResourceSet& capacity) const {
  const QueueSpec* q = config_->FindQueue(queue);
  const ResourceSet& u = Usage(queue);
  double share = 0;
  for (const auto& [r, total] : capacity.entries()) {
    share = std::max(share, u.Get(r).ToDouble() / total.ToDouble());
  }
  return q == nullptr ? share : share / q->weight;
}

}  // namespace berth
