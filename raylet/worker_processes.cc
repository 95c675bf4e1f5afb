#include "raylet/worker_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "placement/resource_set.h"
#include "raylet/worker_error.h"
#include "raylet/worker_spawn.h"

namespace berth {
namespace {

// How often the reaper looks for ended workers when nothing wakes it sooner.
constexpr absl::Duration kReapInterval = absl::Milliseconds(20);
// How long StopAll waits past the grace period for SIGKILLed workers to go.
constexpr absl::Duration kKillWait = absl::Seconds(5);

// Ids end up in file and directory names: no separators, no "..".
absl::Status ValidateFileNameId(const std::string& id, const std::string& field, bool required) {
  if (id.empty()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(field, ": required"))
                    : absl::OkStatus();
  }
  if (id.size() > 128 || id == "." || id == "..") {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", id, "\" is not a valid id"));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", id, "\" may only hold letters, digits, '-', '_' and '.'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLaunch(const WorkerLaunch& launch) {
  if (absl::Status s = ValidateFileNameId(launch.worker_id, "spec.worker_id", true); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateFileNameId(launch.job_id, "spec.job_id", false); !s.ok()) return s;
  if (launch.argv.empty()) return absl::InvalidArgumentError("spec.argv: required");
  if (launch.argv[0].empty()) return absl::InvalidArgumentError("spec.argv[0]: empty program");
  for (const auto& [name, value] : launch.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.env[\"", name, "\"]: not a valid environment variable name"));
    }
  }
  return absl::OkStatus();
}

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

constexpr const char* kErrorFileEnv = "TORCHELASTIC_ERROR_FILE";

// torch's @record writes the exception to TORCHELASTIC_ERROR_FILE: the
// launch's own, else <log_prefix>.error.json.
std::string ErrorFilePath(const WorkerLaunch& launch, const std::string& log_prefix) {
  if (auto it = launch.env.find(kErrorFileEnv); it != launch.env.end()) return it->second;
  return log_prefix + ".error.json";
}

// The launch's environment, with CUDA_VISIBLE_DEVICES naming its GPUs,
// TORCHELASTIC_ERROR_FILE set (to `error_file`) unless the launch sets it,
// and BERTH_CONFINEMENT in a confined worker (berth.train's warm zygote
// forks ranks outside their cgroups, so it stands aside there).
std::vector<std::string> WorkerEnvironment(const WorkerLaunch& launch,
                                           const std::string& error_file, bool confined) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : launch.env) {
    if (name != "CUDA_VISIBLE_DEVICES") entries.push_back(absl::StrCat(name, "=", value));
  }
  if (launch.env.count(kErrorFileEnv) == 0) {
    entries.push_back(absl::StrCat(kErrorFileEnv, "=", error_file));
  }
  entries.push_back(
      absl::StrCat("CUDA_VISIBLE_DEVICES=", absl::StrJoin(launch.visible_gpu_indices, ",")));
  if (confined) entries.push_back(absl::StrCat("BERTH_CONFINEMENT=", WorkerCgroups::kLabel));
  return entries;
}

}  // namespace

WorkerProcessManager::WorkerProcessManager(Options options)
    : options_(std::move(options)), reaper_([this] { ReapLoop(); }) {
  // Without a lifeline the keepers could not tell that the raylet died.
  if (pipe2(lifeline_, O_CLOEXEC) != 0) {
    LogError("creating the workers' lifeline: ", std::strerror(errno));
    std::abort();
  }
}

WorkerProcessManager::~WorkerProcessManager() {
  StopAll(absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    wake_reaper_.Signal();
  }
  reaper_.join();
  // Killed processes take a moment to leave their cgroups.
  absl::MutexLock lock(&mu_);
  for (int attempt = 0; attempt < 50 && !cgroups_to_remove_.empty(); ++attempt) {
    RemoveEmptiedCgroups();
    if (!cgroups_to_remove_.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  close(lifeline_[0]);
  close(lifeline_[1]);
}

absl::StatusOr<StartedWorker> WorkerProcessManager::Start(const WorkerLaunch& launch) {
  if (absl::Status s = ValidateLaunch(launch); !s.ok()) return s;
  absl::MutexLock start_lock(&start_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(launch.worker_id);
    if (it != workers_.end()) return StartedWorker{it->second.record.pid, true};
    // An earlier life of this id was forgotten; its cgroups are replaced now.
    cgroups_to_remove_.erase(launch.worker_id);
  }
  absl::StatusOr<std::string> cwd = CreateDirectories(launch);
  if (!cwd.ok()) return cwd.status();
  absl::StatusOr<CgroupJoin> cgroups = CreateCgroups(launch);
  if (!cgroups.ok()) return cgroups.status();

  const std::string log_prefix = absl::StrCat(options_.log_dir, "/", launch.worker_id);
  std::string error_file = ErrorFilePath(launch, log_prefix);
  // A file of an earlier life of this worker id must not be taken for this
  // one's.
  std::error_code ignored;
  std::filesystem::remove(error_file, ignored);
  absl::StatusOr<SpawnedWorker> spawned =
      SpawnWorkerProcess({launch.worker_id, launch.argv,
                          WorkerEnvironment(launch, error_file, options_.cgroups != nullptr), *cwd,
                          log_prefix, lifeline_[0], cgroups->fds()});
  if (!spawned.ok()) {
    if (options_.cgroups != nullptr) options_.cgroups->Remove(launch.worker_id);
    return spawned.status();
  }
  Add(launch, *spawned, *std::move(cwd), std::move(error_file));
  return StartedWorker{spawned->pid, false};
}

absl::StatusOr<CgroupJoin> WorkerProcessManager::CreateCgroups(const WorkerLaunch& launch) {
  if (options_.cgroups == nullptr) return CgroupJoin();
  CgroupLimits limits;
  limits.memory_bytes = launch.memory_bytes;
  limits.cpus = launch.cpus;
  limits.pids = options_.pids_max;
  const std::set<uint32_t> visible(launch.visible_gpu_indices.begin(),
                                   launch.visible_gpu_indices.end());
  for (const auto& [index, device] : options_.gpu_devices) {
    if (visible.count(index) == 0) limits.denied_devices.push_back(device);
  }
  return options_.cgroups->Create(launch.worker_id, limits);
}

absl::StatusOr<std::string> WorkerProcessManager::CreateDirectories(
    const WorkerLaunch& launch) const {
  const std::string cwd = !launch.cwd.empty()
                              ? launch.cwd
                              : absl::StrCat(options_.work_dir_root, "/",
                                             launch.job_id.empty() ? "no-job" : launch.job_id);
  std::error_code error;
  std::filesystem::create_directories(options_.log_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("creating log directory ", options_.log_dir, ": ", error.message()));
  }
  if (launch.cwd.empty()) {
    std::filesystem::create_directories(cwd, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("creating working directory ", cwd, ": ", error.message()));
    }
  }
  return cwd;
}

void WorkerProcessManager::Add(const WorkerLaunch& launch, const SpawnedWorker& spawned,
                               std::string cwd, std::string error_file) {
  Worker worker;
  WorkerRecord& record = worker.record;
  record.worker_id = launch.worker_id;
  record.job_id = launch.job_id;
  record.placement_group_id = launch.placement_group_id;
  record.bundle_index = launch.bundle_index;
  record.pid = spawned.pid;
  record.state = WorkerState::kRunning;
  record.started_unix_ms = absl::ToUnixMillis(spawned.started);
  record.rank = launch.rank;
  record.cwd = std::move(cwd);
  worker.error_file = std::move(error_file);
  absl::MutexLock lock(&mu_);
  workers_.emplace(launch.worker_id, std::move(worker));
  wake_reaper_.Signal();
}

absl::Status WorkerProcessManager::Stop(const std::string& worker_id, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker_id: no worker \"", worker_id, "\" here"));
  }
  SignalStop(it->second, grace);
  return absl::OkStatus();
}

void WorkerProcessManager::StopAll(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, worker] : workers_) SignalStop(worker, grace);
  auto none_running = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [id, worker] : workers_) {
      if (worker.record.state == WorkerState::kRunning) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&none_running), grace + kKillWait);
}

void WorkerProcessManager::SignalStop(Worker& worker, absl::Duration grace) {
  if (worker.record.state != WorkerState::kRunning) return;
  worker.stop_requested = true;
  const absl::Time kill_at = absl::Now() + grace;
  if (kill_at >= worker.kill_at) return;  // a sooner SIGKILL is already due
  worker.kill_at = kill_at;
  if (grace <= absl::ZeroDuration()) {
    KillRemains(worker.record);
  } else {
    killpg(worker.record.pid, SIGTERM);
  }
  wake_reaper_.Signal();
}

std::string WorkerProcessManager::LogPath(const std::string& worker_id, bool stderr_log) const {
  if (worker_id.empty() || worker_id == "." || worker_id == ".." ||
      worker_id.find('/') != std::string::npos) {
    return "";
  }
  return absl::StrCat(options_.log_dir, "/", worker_id, stderr_log ? ".err" : ".out");
}

std::vector<WorkerRecord> WorkerProcessManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerRecord> out;
  for (const auto& [id, worker] : workers_) out.push_back(worker.record);
  return out;
}

void WorkerProcessManager::Forget(const std::vector<std::string>& worker_ids) {
  std::vector<std::string> files;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : worker_ids) {
      auto it = workers_.find(id);
      if (it == workers_.end() || it->second.record.state == WorkerState::kRunning) continue;
      files.push_back(LogPath(id, false));
      files.push_back(LogPath(id, true));
      // Only an error file berth chose: one the launch named may be anyone's.
      if (absl::StartsWith(it->second.error_file, options_.log_dir + "/"))
        files.push_back(it->second.error_file);
      workers_.erase(it);
    }
  }
  std::error_code ignored;
  for (const std::string& file : files) {
    if (!file.empty()) std::filesystem::remove(file, ignored);
  }
}

size_t WorkerProcessManager::RunningCount() const {
  absl::MutexLock lock(&mu_);
  size_t running = 0;
  for (const auto& [id, worker] : workers_) running += worker.record.state == WorkerState::kRunning;
  return running;
}

std::map<std::string, CgroupUsage> WorkerProcessManager::Usage() const {
  std::map<std::string, CgroupUsage> usage;
  if (options_.cgroups == nullptr) return usage;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    if (worker.record.state == WorkerState::kRunning) usage[id] = options_.cgroups->Usage(id);
  }
  return usage;
}

void WorkerProcessManager::ReapLoop() {
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    std::vector<WorkerRecord> ended = ReapOnce();
    if (!ended.empty() && options_.on_exit) {
      mu_.Unlock();
      for (const WorkerRecord& record : ended) options_.on_exit(record);
      mu_.Lock();
      continue;
    }
    absl::Duration wait = kReapInterval;
    const absl::Time now = absl::Now();
    for (const auto& [id, worker] : workers_) {
      if (worker.record.state == WorkerState::kRunning &&
          worker.kill_at != absl::InfiniteFuture()) {
        wait = std::min(wait, std::max(worker.kill_at - now, absl::ZeroDuration()));
      }
    }
    wake_reaper_.WaitWithTimeout(&mu_, wait);
  }
}

std::vector<WorkerRecord> WorkerProcessManager::ReapOnce() {
  std::vector<WorkerRecord> ended;
  const absl::Time now = absl::Now();
  for (auto& [id, worker] : workers_) {
    WorkerRecord& record = worker.record;
    if (record.state != WorkerState::kRunning) continue;
    siginfo_t info = {};
    // Peek without reaping: while the leader is a zombie its group id cannot
    // be reused, so killing what the worker left in its group is safe. That
    // keeps strays from outliving the worker and holding its GPUs.
    if (waitid(P_PID, record.pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == record.pid) {
      KillRemains(record);
      int status = 0;
      while (waitpid(record.pid, &status, 0) < 0 && errno == EINTR) {
      }
      record.ended_unix_ms = NowUnixMs();
      if (WIFEXITED(status)) record.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) record.signal = WTERMSIG(status);
      record.state = worker.stop_requested                        ? WorkerState::kKilled
                     : WIFEXITED(status) && record.exit_code == 0 ? WorkerState::kExited
                                                                  : WorkerState::kFailed;
      if (record.state == WorkerState::kFailed) {
        WorkerError error =
            ReadWorkerError(worker.error_file, LogPath(id, true),
                            absl::FromUnixMillis(record.started_unix_ms), absl::Now());
        record.error = std::move(error.message);
        record.failed_unix_us = error.failed_unix_us;
        // What the program said of it comes after: a launcher only saw a
        // rank end by SIGKILL.
        if (std::string oom = OutOfMemory(id); !oom.empty()) {
          record.error = record.error.empty() ? oom : absl::StrCat(oom, "; ", record.error);
        }
      }
      if (options_.cgroups != nullptr) cgroups_to_remove_.insert(id);
      ended.push_back(record);
    } else if (worker.kill_at <= now) {
      KillRemains(record);
      worker.kill_at = absl::InfiniteFuture();  // sent
    }
  }
  RemoveEmptiedCgroups();
  return ended;
}

void WorkerProcessManager::KillRemains(const WorkerRecord& record) const {
  killpg(record.pid, SIGKILL);
  // Also what left the process group (setsid) but not the cgroups.
  if (options_.cgroups != nullptr) options_.cgroups->KillAll(record.worker_id);
}

std::string WorkerProcessManager::OutOfMemory(const std::string& worker_id) const {
  if (options_.cgroups == nullptr || options_.cgroups->OomKills(worker_id) == 0) return "";
  const int64_t limit = options_.cgroups->MemoryLimit(worker_id);
  return absl::StrCat("out of memory: bundle limit ",
                      limit > 0 ? FormatMemory(Quantity::Whole(limit)) : "none");
}

void WorkerProcessManager::RemoveEmptiedCgroups() {
  for (auto it = cgroups_to_remove_.begin(); it != cgroups_to_remove_.end();) {
    if (options_.cgroups->Remove(*it)) {
      it = cgroups_to_remove_.erase(it);
    } else {
      options_.cgroups->KillAll(*it);
      ++it;
    }
  }
}

}  // namespace berth
