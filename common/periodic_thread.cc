#include "common/periodic_thread.h"

#include <utility>

namespace berth {

PeriodicThread::PeriodicThread(absl::Duration every, std::function<void()> run, bool run_at_start) {
  thread_ = std::thread([this, every, run = std::move(run), run_at_start] {
    if (run_at_start) run();
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), every)) {
      mu_.Unlock();
      run();
      mu_.Lock();
    }
  });
}

PeriodicThread::~PeriodicThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace berth
