// Backoff: the waits between tries of one thing: `initial`, then each
// `multiplier` times the one before, never more than `max`. The one backoff
// of berth (raylet registration and exit reports, the head client's
// retries, placement groups waiting for room).
//
// Pure: it says how long to wait and the caller waits, or, in a state
// machine that is given the time, schedules the next try. Reset() once the
// thing succeeded, so the next failure waits `initial` again.
#ifndef BERTH_COMMON_BACKOFF_H_
#define BERTH_COMMON_BACKOFF_H_

#include "absl/time/time.h"

namespace berth {

struct BackoffPolicy {
  absl::Duration initial = absl::Milliseconds(100);
  double multiplier = 2;  // >= 1
  absl::Duration max = absl::InfiniteDuration();

  // The wait after `previous` (zero: the first): `initial`, then each
  // `multiplier` times the one before, never more than `max`. For a caller
  // that keeps only the last wait of many things under one policy.
  absl::Duration After(absl::Duration previous) const {
    const absl::Duration next = previous == absl::ZeroDuration() ? initial : previous * multiplier;
    return next > max ? max : next;
  }
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {}) : policy_(policy) {}

  // The wait before the next try: `initial` the first time after
  // construction or Reset, then growing.
  absl::Duration Next() {
    next_ = policy_.After(next_);
    return next_;
  }
  void Reset() { next_ = absl::ZeroDuration(); }

 private:
  BackoffPolicy policy_;
  absl::Duration next_ = absl::ZeroDuration();
};

}  // namespace berth

#endif  // BERTH_COMMON_BACKOFF_H_
