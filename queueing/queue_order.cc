#include "queueing/queue_order.h"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace berth {

bool QueueOrder::PastStarvationBound(const QueuedGang& g) const {
  return now_ms_ - g.view.waiting_since_ms >= options_.starvation_bound_ms;
}

std::vector<QueuedGang*> QueueOrder::StarvingFirst(
    const std::vector<QueuedGang*>& pending,
    absl::flat_hash_set<const QueuedGang*>* starving) const {
  std::vector<QueuedGang*> first;
  for (QueuedGang* g : pending) {
    if (PastStarvationBound(*g)) first.push_back(g);
  }
  std::sort(first.begin(), first.end(), [](const QueuedGang* a, const QueuedGang* b) {
    return a->view.arrival < b->view.arrival;
  });
  // Treated as starving: the oldest of each queue, then the oldest others.
  std::set<absl::string_view> queues_starving;
  std::vector<const QueuedGang*> starving_others;
  for (const QueuedGang* g : first) {
    if (queues_starving.insert(g->request.queue).second) {
      starving->insert(g);
    } else {
      starving_others.push_back(g);
    }
  }
  for (const QueuedGang* g : starving_others) {
    if (starving->size() >= options_.max_starving) break;
    starving->insert(g);
  }
  return first;
}

std::vector<QueueOrder::Turns> QueueOrder::ByQueue(const std::vector<QueuedGang*>& pending,
                                                   uint64_t pass_number) const {
  std::vector<Turns> queues;  // sorted by name below: ties of share go by name
  absl::flat_hash_map<absl::string_view, size_t> queue_index;
  for (QueuedGang* g : pending) {
    if (g->view.state != GangState::kPending || g->tried_in_pass == pass_number) continue;
    auto [it, fresh] = queue_index.try_emplace(g->request.queue, queues.size());
    if (fresh) queues.push_back({&g->request.queue, {}});
    queues[it->second].gangs.push_back(g);
  }
  std::sort(queues.begin(), queues.end(),
            [](const Turns& a, const Turns& b) { return *a.queue < *b.queue; });
  // Priority, then arrival; but a gang past the starvation bound goes
  // before every priority.
  auto key = [&](const QueuedGang* g) {
    const bool starving = PastStarvationBound(*g);
    return std::make_tuple(starving ? 0 : 1, starving ? 0 : -int64_t{g->request.priority},
                           g->view.arrival);
  };
  for (Turns& q : queues) {
    std::sort(q.gangs.begin(), q.gangs.end(),
              [&](const QueuedGang* a, const QueuedGang* b) { return key(a) < key(b); });
  }
  return queues;
}

void QueueOrder::TryInTurn(const std::vector<QueuedGang*>& pending, uint64_t pass_number,
                           const std::function<void(QueuedGang&)>& try_gang) const {
  std::vector<Turns> queues = ByQueue(pending, pass_number);
  // DRF: the queue of the lowest dominant share next, (share, index) a min-heap.
  using Turn = std::pair<double, size_t>;
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> order;
  for (size_t q = 0; q < queues.size(); ++q)
    order.emplace(ledger_.Share(*queues[q].queue, totals_), q);

  while (!order.empty()) {
    const auto [share, q] = order.top();
    order.pop();
    Turns& turns = queues[q];
    QueuedGang& g = *turns.gangs[turns.next++];
    const uint64_t ledger_version = ledger_.version();
    try_gang(g);
    if (turns.next == turns.gangs.size()) continue;
    // Its share changes only when the ledger does (most gangs tried wait).
    order.emplace(
        ledger_.version() == ledger_version ? share : ledger_.Share(*turns.queue, totals_), q);
  }
}

}  // namespace berth
