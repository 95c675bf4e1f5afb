#include "scheduler/state_writer.h"

#include <vector>

namespace berth {

uint64_t StateWriter::Stage(std::string table, std::string key, std::optional<std::string> value) {
  absl::MutexLock lock(&mu_);
  const uint64_t seq = ++staged_;
  if (store_ != nullptr) pending_[{std::move(table), std::move(key)}] = {seq, std::move(value)};
  return seq;
}

uint64_t StateWriter::staged() const {
  absl::MutexLock lock(&mu_);
  return staged_;
}

absl::Status StateWriter::WaitDurable(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  while (durable_ < seq) {
    if (writing_) {
      // Another waiter is writing; its batch may carry ours too.
      mu_.Await(absl::Condition(
          +[](StateWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return !w->writing_; },
          this));
      continue;
    }
    // Become the writer of everything staged so far.
    writing_ = true;
    const uint64_t upto = staged_;
    auto batch = std::move(pending_);
    pending_.clear();
    mu_.Unlock();
    std::vector<StateStore::Write> writes;
    writes.reserve(batch.size());
    for (auto& [key, staged] : batch)
      writes.push_back({key.first, key.second, std::move(staged.second)});
    const absl::Status s =
        store_ == nullptr || writes.empty() ? absl::OkStatus() : store_->Apply(writes);
    mu_.Lock();
    if (!s.ok()) {
      failed_after_ = durable_;
      failed_upto_ = upto;
      failure_ = s;
      // Retried with the next batch, unless a newer write replaced them.
      for (size_t i = 0; i < writes.size(); ++i) {
        pending_.try_emplace({writes[i].table, writes[i].key}, upto, std::move(writes[i].value));
      }
    }
    ++batches_;
    writes_ += writes.size();
    durable_ = upto;
    writing_ = false;
  }
  if (seq > failed_after_ && seq <= failed_upto_) return failure_;
  return absl::OkStatus();
}

uint64_t StateWriter::batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}

uint64_t StateWriter::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

}  // namespace berth
