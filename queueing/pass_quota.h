// PassQuota: the admission verdicts of one QueueScheduler pass, that is,
// whether a gang's charge fits its queue's quota (QuotaLedger::Check), with
// the quota the pass holds for starving gangs. Internal to queueing/.
//
// Promises: a verdict is the ledger's, as if the quota held for other
// queues' starving gangs were free: held quota holds only against its own
// queue (another queue may still borrow it, and the starving gang reclaims
// it when its room comes; held for every queue, it would leave GPUs idle
// that only other queues' gangs fit). QuotaOf answers the gangs of one
// shape in a queue with one Check while the ledger does not change. What
// Hold adds to the ledger, ReleaseHeld takes back, at the end of the pass.
#ifndef BERTH_QUEUEING_PASS_QUOTA_H_
#define BERTH_QUEUEING_PASS_QUOTA_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "placement/resource_set.h"
#include "queueing/queued_gang.h"
#include "queueing/quota_ledger.h"

namespace berth {

class PassQuota {
 public:
  // `ledger` must outlive the pass; Hold and ReleaseHeld change it.
  explicit PassQuota(QuotaLedger* ledger) : ledger_(ledger) {}

  // Whether `charge` fits `queue`'s quota in this pass (QuotaLedger::Check).
  QuotaVerdict Check(absl::string_view queue, const ResourceSet& charge,
                     std::vector<std::pair<std::string, ResourceSet>> released = {}) const;
  // The quota verdict of `g` now: one Check for the gangs of one shape in a
  // queue while the ledger does not change (most gangs tried wait).
  const QuotaVerdict& QuotaOf(const QueuedGang& g);
  // A queue's usage by its gangs: the ledger's less the quota held for its
  // starving gang. Reclaim looks at this one: held quota is not borrowed,
  // and must not make a queue within its quota look as if it borrowed.
  ResourceSet GangUsage(absl::string_view queue) const;
  // Counts `demand` against `queue` until ReleaseHeld, for the first
  // starving gang of the queue that asks; later ones hold nothing more.
  void Hold(const std::string& queue, const ResourceSet& demand);
  // Gives back what Hold counted: the pass is over.
  void ReleaseHeld();

 private:
  struct Verdict {
    uint64_t version = 0;
    const ResourceSet* demand = nullptr;  // a gang's of that shape (gangs stay put in a pass)
    QuotaVerdict verdict;
  };

  QuotaLedger* ledger_;
  absl::node_hash_map<std::pair<absl::string_view, uint64_t>, Verdict> verdicts_;
  QuotaVerdict own_verdict_;  // of a gang without a shape
  // Quota counted for starving gangs until the pass ends, and their queues.
  std::vector<std::pair<std::string, ResourceSet>> held_;
  std::set<std::string> holding_;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_PASS_QUOTA_H_
