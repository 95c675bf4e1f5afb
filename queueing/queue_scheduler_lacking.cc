// QueueScheduler's admitted gangs that lack bundles (queue_scheduler.h):
// the admission of their remainder, in turn and with backoff.
#include <algorithm>

#include "queueing/queue_scheduler.h"

namespace berth {

QueueScheduler::LackingKey QueueScheduler::KeyOf(const QueuedGang& g) {
  return {g.lacking()->lost ? 0 : 1, -g.request.priority, g.view.arrival};
}

void QueueScheduler::StopLacking(QueuedGang& g) {
  if (g.lacking() == nullptr) return;
  lacking_.erase(KeyOf(g));
  g.apart->lacking.reset();
  g.TidyApart();
}

void QueueScheduler::BackOff(QueuedGang& g) const {
  if (options_.lacking_backoff) g.backoff_ms = options_.lacking_backoff(g.backoff_ms);
}

void QueueScheduler::Lacks(const std::string& id, int64_t now_ms, bool lost, bool after_backoff) {
  auto it = gangs_.find(id);
  if (it == gangs_.end() || it->second.view.state != GangState::kRunning) return;
  QueuedGang& g = it->second;
  StopLacking(g);
  if (after_backoff) {
    BackOff(g);
  } else {
    g.backoff_ms = 0;
  }
  g.MutableApart().lacking =
      QueuedGang::Lacking{lost, false, now_ms + (after_backoff ? g.backoff_ms : 0), nullptr};
  lacking_.emplace(KeyOf(g), &g);
}

std::vector<QueueScheduler::Remainder> QueueScheduler::PlaceLacking(int64_t now_ms,
                                                                    CapacityModel& capacity,
                                                                    size_t most, bool all) {
  std::vector<Remainder> out;
  size_t placed = 0;
  for (auto it = lacking_.begin(); it != lacking_.end() && placed < most;) {
    QueuedGang& g = *it->second;
    ++it;  // a gang placed leaves lacking_
    QueuedGang::Lacking& lacks = *g.lacking();
    if (lacks.infeasible || (!all && lacks.next_try_ms > now_ms)) continue;
    Remainder& r = out.emplace_back(Remainder{g.request.id, capacity.PlaceRemainder(g.ref())});
    switch (r.placement.outcome) {
      case PlacementOutcome::kPlaced:
        StopLacking(g);
        ++placed;
        break;
      case PlacementOutcome::kInfeasible:
        lacks.infeasible = true;
        lacks.why = r.placement.reason;
        break;
      case PlacementOutcome::kRetryLater:
        lacks.why = r.placement.reason;
        BackOff(g);
        lacks.next_try_ms = now_ms + g.backoff_ms;
        break;
    }
  }
  return out;
}

void QueueScheduler::NodesChanged(int64_t now_ms) {
  for (auto& [key, g] : lacking_) {
    QueuedGang::Lacking& lacks = *g->lacking();
    if (!lacks.infeasible) continue;
    lacks.infeasible = false;
    lacks.next_try_ms = now_ms;
  }
}

std::optional<int64_t> QueueScheduler::NextLackingDue() const {
  std::optional<int64_t> due;
  for (const auto& [key, g] : lacking_) {
    const QueuedGang::Lacking& lacks = *g->lacking();
    if (lacks.infeasible) continue;
    if (!due || lacks.next_try_ms < *due) due = lacks.next_try_ms;
  }
  return due;
}

PlacementReasonPtr QueueScheduler::WhyLacking(const std::string& id) const {
  auto it = gangs_.find(id);
  if (it == gangs_.end() || it->second.lacking() == nullptr) return nullptr;
  return it->second.lacking()->why;
}

bool QueueScheduler::LacksInfeasibly(const std::string& id) const {
  auto it = gangs_.find(id);
  return it != gangs_.end() && it->second.lacking() != nullptr && it->second.lacking()->infeasible;
}

}  // namespace berth
