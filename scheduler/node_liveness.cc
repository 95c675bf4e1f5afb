#include "scheduler/node_liveness.h"

#include <algorithm>

namespace berth {

int64_t NodeLiveness::MostCounted() const {
  // A busy head's liveness loop is late now and then; a quarter of a
  // second more still counts, beyond that it was not looking.
  const int64_t every = config_.check_every_ms();
  return every + std::max<int64_t>(every, 250);
}

void NodeLiveness::Heard(const std::string& node_id, int64_t grace_ms) {
  // observed_ms_ is as of the last check, which may be up to one counted
  // interval before the node was heard: that interval is added back.
  deadline_[node_id] = observed_ms_ + MostCounted() + config_.timeout_ms() + grace_ms;
}

void NodeLiveness::GraceAll(int64_t grace_ms) {
  const int64_t floor = observed_ms_ + MostCounted() + config_.timeout_ms() + grace_ms;
  for (auto& [id, deadline] : deadline_) deadline = std::max(deadline, floor);
}

LivenessVerdict NodeLiveness::Check(int64_t monotonic_ms) {
  LivenessVerdict verdict;
  if (last_check_monotonic_ms_) {
    const int64_t elapsed = std::max<int64_t>(0, monotonic_ms - *last_check_monotonic_ms_);
    const int64_t counted = std::min(elapsed, MostCounted());
    verdict.head_stall_ms = elapsed - counted;
    observed_ms_ += counted;
  }
  last_check_monotonic_ms_ = monotonic_ms;

  std::vector<std::string> overdue;
  for (const auto& [id, deadline] : deadline_) {
    if (observed_ms_ > deadline) overdue.push_back(id);
  }
  std::sort(overdue.begin(), overdue.end());
  if (overdue.empty()) {
    suspected_since_.reset();
    return verdict;
  }
  const bool most = overdue.size() >= 2 && overdue.size() * 2 > deadline_.size();
  if (most && !suspected_since_) {
    suspected_since_ = observed_ms_;
    verdict.suspicion_began = true;
  }
  if (suspected_since_ && observed_ms_ - *suspected_since_ <= config_.timeout_ms()) {
    verdict.suspected = std::move(overdue);
    return verdict;
  }
  suspected_since_.reset();
  for (const std::string& id : overdue) deadline_.erase(id);
  verdict.dead = std::move(overdue);
  return verdict;
}

}  // namespace berth
