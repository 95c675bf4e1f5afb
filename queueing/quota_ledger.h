// QuotaLedger: what each queue uses of its quota, and whether one more
// gang fits its queue's quota and what its cohort lends.
//
// For a queue q and a resource r its nominal quota names: N = nominal,
// L = lending limit (N when unset), G = N - L (what q never lends),
// B = borrowing limit (none when unset), U = usage. A cohort's pool of r is
// the sum of its members' L; its members use sum(max(0, U - G)) of it. A gang
// charging D fits when, for every r q's quota names:
//   without a cohort  U + D <= N;
//   in a cohort       U + D <= N + B, and the cohort's use with q at U + D
//                     stays within the pool.
// Resources q's quota does not name are not limited. The sums are exact
// (fixed point, 128-bit), and each cohort's use is kept as usage changes,
// so a check costs O(resources), not O(queues).
#ifndef BERTH_QUEUEING_QUOTA_LEDGER_H_
#define BERTH_QUEUEING_QUOTA_LEDGER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "placement/resource_set.h"
#include "queueing/queue_config.h"

namespace berth {

// Which limit a gang's charge would pass, and by what: the first resource of
// the queue's quota that does not fit. QuotaShortfallText renders it.
struct QuotaShortfall {
  enum class Limit : uint8_t {
    kNominal,         // a queue without a cohort: in_use + asked > quota
    kBorrowingLimit,  // in a cohort: in_use + asked > quota + borrowing_limit
    kCohortPool,      // the cohort lends less than it asks: others of pool in use
    kQueueDeleted,    // its queue is no longer configured
  };
  Limit limit = Limit::kNominal;
  std::string queue;
  std::string cohort;    // kCohortPool
  std::string resource;  // not for kQueueDeleted
  Quantity in_use;       // kNominal, kBorrowingLimit: the queue's usage
  Quantity asked;
  Quantity quota;            // kNominal, kBorrowingLimit: its nominal quota
  Quantity borrowing_limit;  // kBorrowingLimit
  Quantity others;           // kCohortPool: used by the cohort's other queues
  Quantity pool;             // kCohortPool: what the cohort lends
  friend bool operator==(const QuotaShortfall& a, const QuotaShortfall& b);
};
// Both none, or alike (shared by gangs of one shape, or made anew).
bool SameShortfall(const std::shared_ptr<const QuotaShortfall>& a,
                   const std::shared_ptr<const QuotaShortfall>& b);
// "queue a: GPU 6 in use + 4 asked would pass its quota of 8", ...
std::string QuotaShortfallText(const QuotaShortfall& s);

struct QuotaVerdict {
  bool fits = false;
  // U + D <= N on every resource the quota names: the queue takes no more
  // than its own quota, so it may reclaim what others borrowed of it.
  bool within_nominal = false;
  // No usage could ever make it fit (D alone passes N + B, or the pool).
  bool never = false;
  // Why it does not fit; null when it does. Shared: a pass gives gangs of
  // one shape one verdict.
  std::shared_ptr<const QuotaShortfall> shortfall;
};

class QuotaLedger {
 public:
  // `config` must outlive the ledger; after it changes call Reconfigure.
  explicit QuotaLedger(const QueueConfig* config) { Reconfigure(config); }
  void Reconfigure(const QueueConfig* config);

  // Whether `charge` fits `queue` (a queue of the config) now, as if the
  // charges of `released` (queue, charge) were already given back.
  QuotaVerdict Check(absl::string_view queue, const ResourceSet& charge,
                     const std::vector<std::pair<std::string, ResourceSet>>& released = {}) const;
  void Add(absl::string_view queue, const ResourceSet& charge);
  // `charge` must have been added to `queue`.
  void Remove(absl::string_view queue, const ResourceSet& charge);

  // Changes whenever any usage changes (Add, Remove, Reconfigure).
  uint64_t version() const { return version_; }
  // Zero for a queue with no usage.
  const ResourceSet& Usage(absl::string_view queue) const;
  // What the queue uses above its nominal quota, by resource.
  ResourceSet Borrowed(absl::string_view queue) const;
  // Whether it uses more than its nominal quota of any resource `of` names.
  bool IsBorrowing(absl::string_view queue, const ResourceSet& of) const;
  // The same at usage `usage`.
  bool IsBorrowingAt(absl::string_view queue, const ResourceSet& usage,
                     const ResourceSet& of) const;
  // Weighted dominant share: the largest of usage / capacity over the
  // resources of `capacity` (`GPU:<T>` only if the queue's quota names it),
  // divided by the queue's weight.
  double Share(absl::string_view queue, const ResourceSet& capacity) const;
  // The same at usage `usage` less `less` (what a preemption would leave).
  double ShareAt(absl::string_view queue, const ResourceSet& usage, const ResourceSet& capacity,
                 const ResourceSet& less = ResourceSet()) const;
  // Whether it uses less than its nominal quota of every resource `of`
  // names that the quota names (and the quota names one of them).
  bool IsBelowNominal(absl::string_view queue, const ResourceSet& of) const;

 private:
  using Wide = __int128;
  // What a member of a cohort uses of the cohort's pool of `r` at usage `u`.
  static Wide PoolUse(const QueueSpec& q, const std::string& r, Wide u);
  // Adds `sign` times the pool use of `queue` at its usage now.
  void CountPoolUse(const QueueSpec& q, int sign);
  // Check for one resource `r` of q's quota, charged `d` (not zero): clears
  // what of *v it fails, and gives the first reason.
  void CheckResource(const QueueSpec& q, const std::string& r, const Quantity& nominal, Wide d,
                     const std::vector<std::pair<std::string, ResourceSet>>& released,
                     QuotaVerdict* v) const;
  // Takes `released` off q's usage *u of `r` and off the pool use *others
  // of the cohort's other members.
  void CountReleased(const QueueSpec& q, const std::string& r,
                     const std::vector<std::pair<std::string, ResourceSet>>& released, Wide* u,
                     Wide* others) const;

  const QueueConfig* config_ = nullptr;
  uint64_t version_ = 0;
  std::map<std::string, ResourceSet, std::less<>> usage_;
  // By cohort, then resource: the pool (what its members lend) and its use.
  // Nested and transparent, so a check looks them up without building keys.
  struct Pool {
    Wide lent = 0;
    Wide used = 0;
  };
  using ResourcePools = std::map<std::string, Pool, std::less<>>;
  std::map<std::string, ResourcePools, std::less<>> pools_;
  const Pool* FindPool(absl::string_view cohort, absl::string_view resource) const;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUOTA_LEDGER_H_
