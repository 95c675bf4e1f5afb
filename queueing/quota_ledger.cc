#include "queueing/quota_ledger.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/match.h"
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

Quantity Capped(Wide units) {
  return Quantity::FromUnits(static_cast<int64_t>(std::min<Wide>(units, Quantity::kMaxUnits)));
}

// The first shortfall a check finds is the one it reports.
void Short(QuotaVerdict* v, QuotaShortfall s) {
  if (v->shortfall == nullptr) v->shortfall = std::make_shared<const QuotaShortfall>(std::move(s));
}

QuotaShortfall Over(QuotaShortfall::Limit limit, const QueueSpec& q, const std::string& r, Wide u,
                    Wide d, Wide n) {
  QuotaShortfall s;
  s.limit = limit;
  s.queue = q.name;
  s.resource = r;
  s.in_use = Capped(u);
  s.asked = Capped(d);
  s.quota = Capped(n);
  return s;
}

// A queue without a cohort: `d` of `r` fits when u + d <= n; else `v` says
// why not.
void CheckNominal(const QueueSpec& q, const std::string& r, Wide u, Wide d, Wide n,
                  QuotaVerdict* v) {
  if (u + d <= n) return;
  v->fits = false;
  v->never = v->never || d > n;
  Short(v, Over(QuotaShortfall::Limit::kNominal, q, r, u, d, n));
}

// A queue in a cohort: whether u + d passes its quota `n` plus its
// borrowing limit of `r`, if it has one (then `v` says so).
bool PassesBorrowingLimit(const QueueSpec& q, const std::string& r, Wide u, Wide d, Wide n,
                          QuotaVerdict* v) {
  const auto borrow = q.borrowing_limit.find(r);
  if (borrow == q.borrowing_limit.end() || u + d <= n + borrow->second.units()) return false;
  v->fits = false;
  v->never = v->never || d > n + borrow->second.units();
  QuotaShortfall s = Over(QuotaShortfall::Limit::kBorrowingLimit, q, r, u, d, n);
  s.borrowing_limit = borrow->second;
  Short(v, std::move(s));
  return true;
}

}  // namespace

bool operator==(const QuotaShortfall& a, const QuotaShortfall& b) {
  return std::tie(a.limit, a.queue, a.cohort, a.resource, a.in_use, a.asked, a.quota,
                  a.borrowing_limit, a.others,
                  a.pool) == std::tie(b.limit, b.queue, b.cohort, b.resource, b.in_use, b.asked,
                                      b.quota, b.borrowing_limit, b.others, b.pool);
}

bool SameShortfall(const std::shared_ptr<const QuotaShortfall>& a,
                   const std::shared_ptr<const QuotaShortfall>& b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

std::string QuotaShortfallText(const QuotaShortfall& s) {
  switch (s.limit) {
    case QuotaShortfall::Limit::kNominal:
      return absl::StrCat("queue ", s.queue, ": ", s.resource, " ", s.in_use.ToString(),
                          " in use + ", s.asked.ToString(), " asked would pass its quota of ",
                          s.quota.ToString());
    case QuotaShortfall::Limit::kBorrowingLimit:
      return absl::StrCat("queue ", s.queue, ": ", s.resource, " ", s.in_use.ToString(),
                          " in use + ", s.asked.ToString(), " asked would pass its quota of ",
                          s.quota.ToString(), " plus borrowing limit ",
                          s.borrowing_limit.ToString());
    case QuotaShortfall::Limit::kCohortPool:
      return absl::StrCat("cohort ", s.cohort, " has no ", s.resource, " to lend queue ", s.queue,
                          ": ", s.others.ToString(), " of its ", s.pool.ToString(),
                          " is in use by the other queues; ", s.asked.ToString(), " asked");
    case QuotaShortfall::Limit::kQueueDeleted:
      return absl::StrCat("queue '", s.queue, "' was deleted");
  }
  return "";
}

const ResourceSet& QuotaLedger::Usage(absl::string_view queue) const {
  auto it = usage_.find(queue);
  return it == usage_.end() ? Empty() : it->second;
}

const QuotaLedger::Pool* QuotaLedger::FindPool(absl::string_view cohort,
                                               absl::string_view resource) const {
  auto c = pools_.find(cohort);
  if (c == pools_.end()) return nullptr;
  auto r = c->second.find(resource);
  return r == c->second.end() ? nullptr : &r->second;
}

QuotaLedger::Wide QuotaLedger::PoolUse(const QueueSpec& q, const std::string& r, Wide u) {
  auto n = q.nominal.find(r);
  if (n == q.nominal.end()) return 0;
  const Wide guaranteed = n->second.units() - Limit(q.lending_limit, r, n->second).units();
  return std::max<Wide>(0, u - guaranteed);
}

void QuotaLedger::CountPoolUse(const QueueSpec& q, int sign) {
  if (q.cohort.empty()) return;
  const ResourceSet& u = Usage(q.name);
  ResourcePools& pools = pools_[q.cohort];
  for (const auto& [r, nominal] : q.nominal) {
    pools[r].used += sign * PoolUse(q, r, u.Get(r).units());
  }
}

void QuotaLedger::Reconfigure(const QueueConfig* config) {
  config_ = config;
  ++version_;
  pools_.clear();
  for (const auto& [name, q] : config_->queues()) {
    if (q.cohort.empty()) continue;
    for (const auto& [r, nominal] : q.nominal) {
      pools_[q.cohort][r].lent += Limit(q.lending_limit, r, nominal).units();
    }
    CountPoolUse(q, +1);
  }
}

void QuotaLedger::Add(absl::string_view queue, const ResourceSet& charge) {
  ++version_;
  const QueueSpec* q = config_->FindQueue(queue);
  if (q != nullptr) CountPoolUse(*q, -1);
  auto it = usage_.find(queue);
  if (it == usage_.end()) it = usage_.emplace(std::string(queue), ResourceSet()).first;
  it->second.Add(charge).IgnoreError();  // bounded: charges are validated amounts
  if (q != nullptr) CountPoolUse(*q, +1);
}

void QuotaLedger::Remove(absl::string_view queue, const ResourceSet& charge) {
  ++version_;
  auto it = usage_.find(queue);
  if (it == usage_.end()) return;
  const QueueSpec* q = config_->FindQueue(queue);
  if (q != nullptr) CountPoolUse(*q, -1);
  it->second.Subtract(charge).IgnoreError();
  if (it->second.empty()) usage_.erase(it);
  if (q != nullptr) CountPoolUse(*q, +1);
}

QuotaVerdict QuotaLedger::Check(
    absl::string_view queue, const ResourceSet& charge,
    const std::vector<std::pair<std::string, ResourceSet>>& released) const {
  QuotaVerdict v;
  const QueueSpec* q = config_->FindQueue(queue);
  if (q == nullptr) {
    v.never = true;
    QuotaShortfall s;
    s.limit = QuotaShortfall::Limit::kQueueDeleted;
    s.queue = std::string(queue);
    Short(&v, std::move(s));
    return v;
  }
  v.fits = true;
  v.within_nominal = true;
  for (const auto& [r, nominal] : q->nominal) {
    const Wide d = charge.Get(r).units();
    if (d == 0) continue;
    CheckResource(*q, r, nominal, d, released, &v);
  }
  return v;
}

void QuotaLedger::CheckResource(const QueueSpec& q, const std::string& r, const Quantity& nominal,
                                Wide d,
                                const std::vector<std::pair<std::string, ResourceSet>>& released,
                                QuotaVerdict* v) const {
  // q's usage, and the use of the pool by the cohort's other members, as
  // if `released` were given back.
  Wide u = Usage(q.name).Get(r).units();
  Wide others = 0;
  const Pool* cohort_pool = q.cohort.empty() ? nullptr : FindPool(q.cohort, r);
  if (!q.cohort.empty())
    others = (cohort_pool == nullptr ? 0 : cohort_pool->used) - PoolUse(q, r, u);
  CountReleased(q, r, released, &u, &others);
  const Wide n = nominal.units();
  if (u + d > n) v->within_nominal = false;
  if (q.cohort.empty()) {
    CheckNominal(q, r, u, d, n, v);
    return;
  }
  if (PassesBorrowingLimit(q, r, u, d, n, v)) return;
  const Wide pool = cohort_pool == nullptr ? 0 : cohort_pool->lent;
  const Wide own_guaranteed = n - Limit(q.lending_limit, r, nominal).units();
  if (others + PoolUse(q, r, u + d) <= pool) return;
  v->fits = false;
  v->never = v->never || std::max<Wide>(0, d - own_guaranteed) > pool;
  if (v->shortfall == nullptr) {
    QuotaShortfall s;
    s.limit = QuotaShortfall::Limit::kCohortPool;
    s.queue = q.name;
    s.cohort = q.cohort;
    s.resource = r;
    s.asked = Capped(d);
    s.others = Capped(others);
    s.pool = Capped(pool);
    Short(v, std::move(s));
  }
}

void QuotaLedger::CountReleased(const QueueSpec& q, const std::string& r,
                                const std::vector<std::pair<std::string, ResourceSet>>& released,
                                Wide* u, Wide* others) const {
  for (const auto& [name, c] : released) {
    const Wide amount = c.Get(r).units();
    if (amount == 0) continue;
    if (name == q.name) {
      *u = std::max<Wide>(0, *u - amount);
      continue;
    }
    const QueueSpec* member = config_->FindQueue(name);
    if (member == nullptr || member->cohort != q.cohort || q.cohort.empty()) continue;
    const Wide mu = Usage(name).Get(r).units();
    *others -= PoolUse(*member, r, mu) - PoolUse(*member, r, std::max<Wide>(0, mu - amount));
  }
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
  return IsBorrowingAt(queue, Usage(queue), of);
}

bool QuotaLedger::IsBorrowingAt(absl::string_view queue, const ResourceSet& usage,
                                const ResourceSet& of) const {
  const QueueSpec* q = config_->FindQueue(queue);
  if (q == nullptr) return false;
  for (const auto& [r, amount] : of.entries()) {
    auto n = q->nominal.find(r);
    if (n != q->nominal.end() && usage.Get(r) > n->second) return true;
  }
  return false;
}

bool QuotaLedger::IsBelowNominal(absl::string_view queue, const ResourceSet& of) const {
  const QueueSpec* q = config_->FindQueue(queue);
  if (q == nullptr) return false;
  const ResourceSet& u = Usage(queue);
  bool named = false;
  for (const auto& [r, amount] : of.entries()) {
    auto n = q->nominal.find(r);
    if (n == q->nominal.end()) continue;
    if (!(u.Get(r) < n->second)) return false;
    named = true;
  }
  return named;
}

double QuotaLedger::Share(absl::string_view queue, const ResourceSet& capacity) const {
  return ShareAt(queue, Usage(queue), capacity);
}

double QuotaLedger::ShareAt(absl::string_view queue, const ResourceSet& u,
                            const ResourceSet& capacity, const ResourceSet& less) const {
  const QueueSpec* q = config_->FindQueue(queue);
  double share = 0;
  for (const auto& [r, total] : capacity.entries()) {
    // GPU:<T> counts GPUs already counted as GPU; unless the quota names it,
    // one of a handful of GPUs of a rare type would be the largest share.
    if (absl::StartsWith(r, kGpuOfTypePrefix) && (q == nullptr || !q->nominal.count(r))) continue;
    const double used = u.Get(r).ToDouble() - less.Get(r).ToDouble();
    share = std::max(share, used / total.ToDouble());
  }
  return q == nullptr ? share : share / q->weight;
}

}  // namespace berth
