// JobLeftovers: what of a node's ended jobs can go. A job's default working
// folder (<work root>/<job id>) goes as soon as the job is over on the node
// (no worker of it runs and no bundle of its groups is held here: it ended,
// or moved on), and so does a folder no worker the node knows used (left
// by an earlier life of the raylet) once it is a minute old; its workers'
// log files and records are kept for the retention period after its last
// worker ended (`berth logs` reads them), then go too. Workers started
// without a job are kept like a job of their own. Pure: the caller lists
// the workers, bundles and folders, and removes the files
// (leftover_sweeper.h).
#ifndef BERTH_RAYLET_JOB_LEFTOVERS_H_
#define BERTH_RAYLET_JOB_LEFTOVERS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "raylet/worker_processes.h"

namespace berth {

// A folder under the work root.
struct WorkFolder {
  std::string name;  // a job id, or "no-job"
  absl::Time modified;
};

struct Leftovers {
  std::vector<std::string> work_dirs;  // names under the work root, to remove
  std::vector<std::string> workers;    // ended workers whose logs and records go
};

// `workers`: every worker record the node keeps; `held_groups`: the
// placement groups it holds a bundle of; `folders`: what is under the work
// root (WorkerProcessManager::Options::work_dir_root).
Leftovers FindLeftovers(absl::Time now, absl::Duration retention,
                        const std::vector<WorkerRecord>& workers,
                        const std::set<std::string>& held_groups,
                        const std::vector<WorkFolder>& folders);

}  // namespace berth

#endif  // BERTH_RAYLET_JOB_LEFTOVERS_H_
