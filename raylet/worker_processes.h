// WorkerProcessManager: starts, watches and stops the node's worker
// processes.
//
// Each worker runs in its own process group, with exactly the environment it
// is given plus CUDA_VISIBLE_DEVICES and TORCHELASTIC_ERROR_FILE
// (`<log_dir>/<worker_id>.error.json`, unless given), and with stdout /
// stderr appended to `<log_dir>/<worker_id>.out` / `.err`. A worker that
// fails is described by its error file or its stderr's tail
// (worker_error.h). Start is idempotent by worker id and
// returns only once the program has been exec'd: a program that cannot be
// started is an error from Start, never a silent exit. A reaper thread
// records every exit (code or signal) and hands it to the on-exit callback.
// Stop signals the whole group: SIGTERM, then SIGKILL after the grace period.
// The destructor kills every worker still running. Thread-safe.
//
// With WorkerCgroups, each worker runs in cgroups of its own holding it to
// its bundle (worker_cgroups.h): its memory and CPU, the pids cap, and none
// of the node's GPUs but its own. Ending a worker kills every process left
// in them and removes them; a worker the OOM killer hit inside its limit
// fails with "out of memory: bundle limit 512Mi".
//
// No worker outlives the raylet, however the raylet ends (kill -9
// included): the group's leader is a small keeper process, forked from the
// raylet, that forks the program, passes on its exit status as its own and
// kills the whole group once the raylet's lifeline pipe closes (the kernel
// closes it when the raylet dies). The program's children go with it unless
// they leave the process group (setsid). Why not PR_SET_PDEATHSIG: it fires
// when the forking *thread* exits (gRPC threads come and go) and reaches only
// the direct child, not torchrun's ranks or DataLoader workers. The worker's
// pid is the keeper's (signals to it reach the program through the group).
#ifndef BERTH_RAYLET_WORKER_PROCESSES_H_
#define BERTH_RAYLET_WORKER_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "raylet/worker_cgroups.h"

namespace berth {

struct WorkerLaunch {
  std::string worker_id;  // [A-Za-z0-9_.-], names the log files
  std::string job_id;     // may be empty; names the default working directory
  std::string placement_group_id;
  uint32_t bundle_index = 0;
  std::vector<std::string> argv;  // argv[0] is searched in the raylet's PATH
  std::map<std::string, std::string> env;
  std::string cwd;  // empty = <work_dir_root>/<job_id or "no-job">
  std::vector<uint32_t> visible_gpu_indices;
  std::string rank;  // world rank, for metrics; empty for processes without one
  // The bundle's, which the worker's cgroup holds it to (0: no limit).
  int64_t memory_bytes = 0;
  double cpus = 0;
};

enum class WorkerState { kRunning, kExited, kFailed, kKilled };

struct WorkerRecord {
  std::string worker_id;
  std::string job_id;
  std::string placement_group_id;
  uint32_t bundle_index = 0;
  pid_t pid = 0;
  WorkerState state = WorkerState::kRunning;
  int exit_code = 0;  // when it exited normally
  int signal = 0;     // when a signal ended it
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;  // 0 while running
  std::string rank;           // as launched
  std::string cwd;            // the working directory it was started in
  // kFailed only: what the process said (worker_error.h) and when.
  std::string error;
  int64_t failed_unix_us = 0;
};

struct StartedWorker {
  pid_t pid = 0;
  bool already_running = false;  // the worker id was started before
};

struct SpawnedWorker;  // worker_spawn.h

class WorkerProcessManager {
 public:
  struct Options {
    std::string log_dir;
    std::string work_dir_root;
    // Called on the reaper thread, once per worker, after it ended.
    std::function<void(const WorkerRecord&)> on_exit;
    // Not owned; null: workers run unconfined, in the raylet's cgroups.
    WorkerCgroups* cgroups = nullptr;
    int64_t pids_max = 0;  // per worker, with cgroups; 0: no cap
    // Every GPU of the node: index -> its device node's number, so that a
    // worker's cgroup denies the ones it was not given.
    std::map<uint32_t, DeviceNumber> gpu_devices;
  };

  explicit WorkerProcessManager(Options options);
  ~WorkerProcessManager();
  WorkerProcessManager(const WorkerProcessManager&) = delete;
  WorkerProcessManager& operator=(const WorkerProcessManager&) = delete;

  // Forks and execs the worker. INVALID_ARGUMENT for a bad worker id, job id,
  // empty argv or env name (naming `spec.<field>`); INTERNAL if the log
  // files, the working directory or exec fail.
  absl::StatusOr<StartedWorker> Start(const WorkerLaunch& launch);
  // Sends SIGTERM to the worker's process group now and SIGKILL once `grace`
  // has passed (at once for zero); returns without waiting. A worker that
  // already ended is left alone. NOT_FOUND for an unknown worker id.
  absl::Status Stop(const std::string& worker_id, absl::Duration grace);
  // Stops every running worker like Stop and waits until all have been
  // reaped (SIGKILL after `grace`).
  void StopAll(absl::Duration grace);

  // Running and ended workers, ordered by worker id.
  std::vector<WorkerRecord> List() const;
  // `<log_dir>/<worker_id>.out` or `.err`; "" for an id that is not a plain
  // file name (no path separators), so callers cannot escape the log dir.
  std::string LogPath(const std::string& worker_id, bool stderr_log) const;
  size_t RunningCount() const;
  // What each running worker uses, from its cgroups, by worker id; empty
  // without cgroups.
  std::map<std::string, CgroupUsage> Usage() const;
  // The ended ones of `worker_ids` are forgotten: their records, and their
  // files in the log directory (`.out`, `.err`, the error file). Running or
  // unknown ids are left alone.
  void Forget(const std::vector<std::string>& worker_ids);

 private:
  struct Worker {
    WorkerRecord record;
    std::string error_file;  // TORCHELASTIC_ERROR_FILE
    bool stop_requested = false;
    absl::Time kill_at = absl::InfiniteFuture();  // SIGKILL deadline once stopping
  };

  // The launch's working directory (created unless the launch names one),
  // after creating the log directory.
  absl::StatusOr<std::string> CreateDirectories(const WorkerLaunch& launch) const;
  // Starts watching a worker that was just spawned.
  void Add(const WorkerLaunch& launch, const SpawnedWorker& spawned, std::string cwd,
           std::string error_file);
  void ReapLoop();
  // Collects ended workers and sends due SIGKILLs; returns the records of
  // workers that ended.
  std::vector<WorkerRecord> ReapOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker's cgroups, with its limits; empty without cgroups.
  absl::StatusOr<CgroupJoin> CreateCgroups(const WorkerLaunch& launch);
  // Kills what is left of an ended worker (its group, and with cgroups
  // everything in them) and notes the cgroups for removal.
  void KillRemains(const WorkerRecord& record) const;
  // "out of memory: bundle limit 512Mi" when the OOM killer hit the worker.
  std::string OutOfMemory(const std::string& worker_id) const;
  // Removes the cgroups of ended workers that have emptied; kills again in
  // those that have not.
  void RemoveEmptiedCgroups() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SignalStop(Worker& worker, absl::Duration grace) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  // Serializes Start so that one worker id is never forked twice.
  absl::Mutex start_mu_;
  mutable absl::Mutex mu_;
  absl::CondVar wake_reaper_;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  // Ended workers whose cgroups are still to be removed.
  std::set<std::string> cgroups_to_remove_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Read end for the keepers; the write end stays open, in the raylet only,
  // until the raylet ends.
  int lifeline_[2] = {-1, -1};
  std::thread reaper_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_WORKER_PROCESSES_H_
