#include "queueing/pass_state.h"

#include <algorithm>
#include <functional>

namespace berth {

const std::vector<uint64_t>& PassState::PlacesOf(const QueuedGang* g) const {
  auto [it, fresh] = places_of_.try_emplace(g);
  if (fresh) it->second = capacity.PlacesOf(g->ref());
  return it->second;
}

const std::vector<const QueuedGang*>& PassState::HoldersOf(uint64_t place) const {
  if (!holders_) {
    holders_.emplace();
    for (const QueuedGang* g : live) {
      for (uint64_t p : PlacesOf(g)) (*holders_)[p].push_back(g);
    }
  }
  static const std::vector<const QueuedGang*> kNone;
  auto it = holders_->find(place);
  return it == holders_->end() ? kNone : it->second;
}

void PassState::Admitted(const QueuedGang* g) {
  result.admitted.push_back(g->request.id);
  admitted.insert(g->request.id);
  live.push_back(g);
  if (!holders_) return;
  for (uint64_t p : PlacesOf(g)) (*holders_)[p].push_back(g);
}

const std::vector<PassState::Victim>& PassState::VictimOrder() const {
  if (victims_) return *victims_;
  victims_.emplace();
  absl::flat_hash_map<absl::string_view, size_t> index;
  for (const QueuedGang* c : live) {
    if (c->view.state != GangState::kRunning || !c->request.preemptible ||
        admitted.count(c->request.id))
      continue;
    auto [it, fresh] = index.try_emplace(c->request.queue, victim_queues.size());
    if (fresh) victim_queues.push_back(config->FindQueue(c->request.queue));
    const int64_t since = std::max(c->view.started_ms, c->view.checkpointed_ms);
    victims_->push_back(
        {c, it->second, c->view.charge.Get(kGpu).ToDouble() * static_cast<double>(now_ms - since)});
  }
  std::sort(victims_->begin(), victims_->end(), [](const Victim& a, const Victim& b) {
    return std::make_tuple(a.gang->request.priority, a.cost, std::cref(a.gang->request.id)) <
           std::make_tuple(b.gang->request.priority, b.cost, std::cref(b.gang->request.id));
  });
  return *victims_;
}

}  // namespace berth
