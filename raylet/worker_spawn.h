// Worker spawning: forks one worker program under its keeper, the process
// that leads the worker's process group (worker_processes.h says why).
//
// SpawnWorkerProcess returns only once the program has been exec'd; a
// program that cannot be started is an error naming the step that failed
// (setpgid, joining its cgroups, redirecting output, chdir, fork, exec), and its keeper has been
// reaped. The program runs with exactly the given environment, stdin on
// /dev/null and stdout / stderr appended to `<log_prefix>.out` / `.err`.
// Between fork and exec the child makes only async-signal-safe calls, so it
// is safe to call from a threaded process. Reaping the worker afterwards is
// the caller's.
#ifndef BERTH_RAYLET_WORKER_SPAWN_H_
#define BERTH_RAYLET_WORKER_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth {

struct WorkerSpawn {
  std::string worker_id;          // names the worker in errors
  std::vector<std::string> argv;  // argv[0] is searched in the caller's PATH
  std::vector<std::string> env;   // "NAME=value": the program's whole environment
  std::string cwd;
  std::string log_prefix;  // output goes to <log_prefix>.out and .err
  // Read end of the caller's lifeline: the keeper kills the whole group once
  // it closes (the caller died).
  int lifeline_fd = -1;
  // cgroup.procs files the keeper joins before anything else (CgroupJoin);
  // empty: it stays in the caller's cgroups.
  std::vector<int> cgroup_procs_fds;
};

struct SpawnedWorker {
  pid_t pid = 0;  // the keeper's, which is the process group's id
  absl::Time started;
};

// INTERNAL if the log files cannot be opened, fork fails or the child
// cannot reach exec.
absl::StatusOr<SpawnedWorker> SpawnWorkerProcess(const WorkerSpawn& spawn);

}  // namespace berth

#endif  // BERTH_RAYLET_WORKER_SPAWN_H_
