// QueueOrder: the order in which a QueueScheduler pass tries its waiting
// gangs. Internal to queueing/.
//
// First the gangs past the starvation bound, oldest first (the pass treats
// the oldest of each queue as starving, then the oldest others while fewer
// than max_starving are). Then the rest: within a queue, a gang past the
// starvation bound before every priority (it ages, as in Slurm's
// multifactor priority), then priority (higher first), then arrival;
// between queues, weighted dominant resource share (DRF): the queue with
// the smallest share goes next, ties by name, so shares converge to the
// weights while queues have work.
//
// Promises: deterministic; each gang is tried at most once; a queue's
// share is asked again only when the ledger changed.
#ifndef BERTH_QUEUEING_QUEUE_ORDER_H_
#define BERTH_QUEUEING_QUEUE_ORDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "placement/resource_set.h"
#include "queueing/queued_gang.h"
#include "queueing/quota_ledger.h"

namespace berth {

class QueueOrder {
 public:
  // `ledger` and `totals` (the cluster's, for shares) must outlive it.
  QueueOrder(int64_t now_ms, const QueueSchedulerOptions& options, const QuotaLedger& ledger,
             const ResourceSet& totals)
      : now_ms_(now_ms), options_(options), ledger_(ledger), totals_(totals) {}

  // The gangs of `pending` past the starvation bound, oldest first;
  // *starving gets those the pass treats as starving.
  std::vector<QueuedGang*> StarvingFirst(const std::vector<QueuedGang*>& pending,
                                         absl::flat_hash_set<const QueuedGang*>* starving) const;
  // Calls `try_gang` once for each gang of `pending` still pending and not
  // tried in pass `pass_number`, in queue order and DRF between queues.
  void TryInTurn(const std::vector<QueuedGang*>& pending, uint64_t pass_number,
                 const std::function<void(QueuedGang&)>& try_gang) const;

 private:
  // A queue's pending gangs, in its order, and the next to try.
  struct Turns {
    const std::string* queue;
    std::vector<QueuedGang*> gangs;
    size_t next = 0;
  };
  bool PastStarvationBound(const QueuedGang& g) const;
  // The gangs to try by queue, sorted by queue name, each in queue order.
  std::vector<Turns> ByQueue(const std::vector<QueuedGang*>& pending, uint64_t pass_number) const;

  int64_t now_ms_;
  const QueueSchedulerOptions& options_;
  const QuotaLedger& ledger_;
  const ResourceSet& totals_;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_ORDER_H_
