// StateWriter: group commit in front of a StateStore. The head stages each
// change under its own lock (cheap: no I/O), then waits, without that lock,
// until what it staged is durable. One waiter at a time writes everything
// staged so far as one batch (StateStore::Apply: one transaction, one
// fsync), so N changes made meanwhile by other requests, the scheduler and
// the committers cost one fsync, not N.
//
// Promises: WaitDurable(seq) returns OK only once every write staged up to
// `seq` is durable, in staging order (a later write of the same key wins);
// it returns the store's error when the batch that carried `seq` failed,
// and those writes are staged again (unless newer ones replaced them), so
// they are retried with the next batch. Thread-safe.
#ifndef BERTH_SCHEDULER_STATE_WRITER_H_
#define BERTH_SCHEDULER_STATE_WRITER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/state_store.h"

namespace berth {

class StateWriter {
 public:
  // `store` is not owned; nullptr = nothing is kept (every wait is OK).
  explicit StateWriter(StateStore* store) : store_(store) {}

  // Stages a put (or a delete: no `value`); returns the sequence number to
  // wait for.
  uint64_t Stage(std::string table, std::string key, std::optional<std::string> value);
  // The last sequence number staged: waiting for it covers every change
  // made so far.
  uint64_t staged() const;
  absl::Status WaitDurable(uint64_t seq);

  // Batches written and writes carried, for benchmarks and tests.
  uint64_t batches() const;
  uint64_t writes() const;

 private:
  StateStore* const store_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, std::optional<std::string>>>
      pending_ ABSL_GUARDED_BY(mu_);  // (table, key) -> (seq, value)
  uint64_t staged_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t durable_ ABSL_GUARDED_BY(mu_) = 0;  // every seq <= this was written (or failed)
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The last failed batch: seqs in (failed_after_, failed_upto_] got `failure_`.
  uint64_t failed_after_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_upto_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  uint64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_STATE_WRITER_H_
