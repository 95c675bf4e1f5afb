// A worker launch of a /bin/sh script, for the raylet's worker tests.
#ifndef BERTH_TESTS_UNIT_SHELL_WORKER_H_
#define BERTH_TESTS_UNIT_SHELL_WORKER_H_

#include <string>

#include "raylet/worker_processes.h"

namespace berth {

// Worker `id` of job "job", bundle 0 of group "pg", running `script`.
inline WorkerLaunch ShellWorker(const std::string& id, const std::string& script) {
  WorkerLaunch launch;
  launch.worker_id = id;
  launch.job_id = "job";
  launch.placement_group_id = "pg";
  launch.argv = {"/bin/sh", "-c", script};
  return launch;
}

}  // namespace berth

#endif  // BERTH_TESTS_UNIT_SHELL_WORKER_H_
