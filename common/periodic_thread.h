// PeriodicThread: runs a function every so often on a thread of its own,
// until destroyed (the destructor waits for a run under way to end). For a
// daemon's background chores: a raylet's leftover sweep, its health watch.
#ifndef BERTH_COMMON_PERIODIC_THREAD_H_
#define BERTH_COMMON_PERIODIC_THREAD_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth {

class PeriodicThread {
 public:
  // Runs `run` every `every`, the first time `every` from now (or at once,
  // with `run_at_start`).
  PeriodicThread(absl::Duration every, std::function<void()> run, bool run_at_start = false);
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace berth

#endif  // BERTH_COMMON_PERIODIC_THREAD_H_
