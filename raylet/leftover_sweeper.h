// LeftoverSweeper: removes what a node's ended jobs left (job_leftovers.h),
// now and then, on a thread of its own: their working folders once they are
// over on the node, their logs and worker records after the retention.
#ifndef BERTH_RAYLET_LEFTOVER_SWEEPER_H_
#define BERTH_RAYLET_LEFTOVER_SWEEPER_H_

#include <functional>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "common/periodic_thread.h"
#include "raylet/worker_processes.h"

namespace berth {

class LeftoverSweeper {
 public:
  struct Options {
    std::string work_root;  // WorkerProcessManager::Options::work_dir_root
    absl::Duration retention = absl::Hours(24 * 7);
    absl::Duration every = absl::Seconds(10);
    // The placement groups the node holds a bundle of.
    std::function<std::set<std::string>()> held_groups;
  };

  // `workers` must outlive it. Sweeps every `every` until destroyed.
  LeftoverSweeper(Options options, WorkerProcessManager* workers);
  LeftoverSweeper(const LeftoverSweeper&) = delete;
  LeftoverSweeper& operator=(const LeftoverSweeper&) = delete;

  // One sweep as of `now`.
  void SweepOnce(absl::Time now);

 private:
  const Options options_;
  WorkerProcessManager* const workers_;
  PeriodicThread thread_;  // last: it stops first
};

}  // namespace berth

#endif  // BERTH_RAYLET_LEFTOVER_SWEEPER_H_
