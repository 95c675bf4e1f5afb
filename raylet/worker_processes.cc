#include "raylet/worker_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "raylet/worker_error.h"

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

// What a child reports through its CLOEXEC pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { kProcessGroup, kRedirect, kChdir, kFork, kExec } stage;
  int error;
};

const char* StageName(int stage) {
  switch (stage) {
    case ChildFailure::kProcessGroup:
      return "setpgid";
    case ChildFailure::kRedirect:
      return "redirecting output";
    case ChildFailure::kChdir:
      return "chdir";
    case ChildFailure::kFork:
      return "fork";
    default:
      return "exec";
  }
}

int OpenForAppend(const std::string& path) {
  return open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

constexpr const char* kErrorFileEnv = "TORCHELASTIC_ERROR_FILE";

// The keeper's descriptors besides stdio (CLOEXEC: the program gets neither).
constexpr int kReportFd = 3;
constexpr int kLifelineFd = 4;

// The keeper: waits for the program and exits as it did, so the raylet
// reaps the same status it would from the program itself; if the raylet's
// lifeline ends first (the raylet died, however), kills the whole group,
// itself included. Only async-signal-safe calls (raw syscalls).
[[noreturn]] void KeepUntilExit(pid_t program) {
  prctl(PR_SET_NAME, "berth-keeper", 0, 0, 0);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, program, 0));
  struct pollfd fds[2] = {{kLifelineFd, POLLIN, 0}, {pidfd, POLLIN, 0}};
  while (true) {
    // Without pidfds (kernels before 5.3) the program is polled.
    const int ready = poll(fds, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 100);
    if (ready > 0 && fds[0].revents != 0) killpg(0, SIGKILL);  // the raylet is gone
    int status = 0;
    if (waitpid(program, &status, WNOHANG) != program) continue;
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    const int sig = WTERMSIG(status);
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // the program's core, if any, is written
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    sigaction(sig, &default_action, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);  // a signal whose default is to continue
  }
}

// Only async-signal-safe calls from fork to exec: the raylet is threaded.
// The child leads the worker's process group as its keeper and forks the
// program; exec failures reach the raylet through `report_fd`.
[[noreturn]] void RunChild(int report_fd, int lifeline_fd, int stdin_fd, int stdout_fd,
                           int stderr_fd, const char* cwd, char* const argv[], char* const envp[]) {
  auto fail = [&report_fd](ChildFailure::Stage stage) {
    const ChildFailure failure{stage, errno};
    ssize_t ignored = write(report_fd, &failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(ChildFailure::kProcessGroup);
  // The raylet blocks or ignores some signals; workers start clean.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  // Out of the way of 0-4 first, then into place: any of these may be 3 or 4.
  const int report_high = fcntl(report_fd, F_DUPFD_CLOEXEC, 10);
  const int lifeline_high = fcntl(lifeline_fd, F_DUPFD_CLOEXEC, 10);
  if (report_high < 0 || lifeline_high < 0) fail(ChildFailure::kRedirect);
  report_fd = report_high;
  if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0 ||
      dup3(report_high, kReportFd, O_CLOEXEC) < 0 ||
      dup3(lifeline_high, kLifelineFd, O_CLOEXEC) < 0) {
    fail(ChildFailure::kRedirect);
  }
  report_fd = kReportFd;
  // Nothing else of the raylet's stays open: not the sockets of libraries,
  // not the lifeline's write end (the keeper must see it close).
  if (close_range(kLifelineFd + 1, ~0U, 0) != 0) fail(ChildFailure::kRedirect);
  if (chdir(cwd) != 0) fail(ChildFailure::kChdir);
  // Stop signals are for the program; the keeper outlives it to pass on
  // its status, and SIGKILL to the group ends both. Ignored before the
  // fork: else a program that started and said so at once could be stopped
  // while the keeper had not yet run on, and the keeper died of the SIGTERM
  // meant for the program (ASan CI: a worker that ignores SIGTERM reported
  // killed by it 20 ms after a stop with a 300 ms grace).
  const int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : kStopSignals) sigaction(sig, &ignore, nullptr);
  const pid_t program = fork();
  if (program < 0) fail(ChildFailure::kFork);
  if (program == 0) {
    // An ignored signal stays ignored across exec.
    for (int sig : kStopSignals) sigaction(sig, &default_action, nullptr);
    execvpe(argv[0], argv, envp);
    fail(ChildFailure::kExec);
  }
  close(kReportFd);  // EOF for the raylet once the program has exec'd
  KeepUntilExit(program);
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
  }

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

  // Everything the child needs is built before fork.
  const std::string log_prefix = absl::StrCat(options_.log_dir, "/", launch.worker_id);
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : launch.env) {
    if (name != "CUDA_VISIBLE_DEVICES") env_entries.push_back(absl::StrCat(name, "=", value));
  }
  // torch's @record writes the exception here; a file of an earlier life
  // of this worker id must not be taken for this one's.
  std::string error_file = log_prefix + ".error.json";
  if (auto it = launch.env.find(kErrorFileEnv); it != launch.env.end()) {
    error_file = it->second;
  } else {
    env_entries.push_back(absl::StrCat(kErrorFileEnv, "=", error_file));
  }
  std::filesystem::remove(error_file, error);
  env_entries.push_back(
      absl::StrCat("CUDA_VISIBLE_DEVICES=", absl::StrJoin(launch.visible_gpu_indices, ",")));
  std::vector<char*> argv;
  for (const std::string& arg : launch.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& entry : env_entries) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  const int stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int stdout_fd = OpenForAppend(log_prefix + ".out");
  const int stderr_fd = OpenForAppend(log_prefix + ".err");
  int report_pipe[2] = {-1, -1};
  const bool opened =
      stdin_fd >= 0 && stdout_fd >= 0 && stderr_fd >= 0 && pipe2(report_pipe, O_CLOEXEC) == 0;
  const int open_errno = errno;
  auto close_all = [&] {
    for (int fd : {stdin_fd, stdout_fd, stderr_fd, report_pipe[0], report_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  if (!opened) {
    close_all();
    return absl::InternalError(
        absl::StrCat("opening ", log_prefix, ".{out,err}: ", std::strerror(open_errno)));
  }

  const int64_t started_unix_ms = NowUnixMs();
  const pid_t pid = fork();
  if (pid < 0) {
    const int fork_errno = errno;
    close_all();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  if (pid == 0) {
    RunChild(report_pipe[1], lifeline_[0], stdin_fd, stdout_fd, stderr_fd, cwd.c_str(), argv.data(),
             envp.data());
  }
  // Also from the parent, so the group exists before anyone signals it.
  setpgid(pid, pid);
  close(report_pipe[1]);
  report_pipe[1] = -1;
  // EOF means exec succeeded (the pipe closed on exec); data means it failed.
  ChildFailure failure{};
  ssize_t n;
  do {
    n = read(report_pipe[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close_all();
  if (n > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::InternalError(
        absl::StrCat("starting worker ", launch.worker_id, ": ", StageName(failure.stage),
                     failure.stage == ChildFailure::kExec    ? absl::StrCat(" ", launch.argv[0])
                     : failure.stage == ChildFailure::kChdir ? absl::StrCat(" ", cwd)
                                                             : "",
                     ": ", std::strerror(failure.error)));
  }

  Worker worker;
  worker.record = {launch.worker_id,
                   launch.job_id,
                   launch.placement_group_id,
                   launch.bundle_index,
                   pid,
                   WorkerState::kRunning,
                   0,
                   0,
                   started_unix_ms,
                   0,
                   launch.rank};
  worker.record.cwd = cwd;
  worker.error_file = std::move(error_file);
  absl::MutexLock lock(&mu_);
  workers_.emplace(launch.worker_id, std::move(worker));
  wake_reaper_.Signal();
  return StartedWorker{pid, false};
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
  killpg(worker.record.pid, grace <= absl::ZeroDuration() ? SIGKILL : SIGTERM);
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

size_t WorkerProcessManager::RunningCount() const {
  absl::MutexLock lock(&mu_);
  size_t running = 0;
  for (const auto& [id, worker] : workers_) running += worker.record.state == WorkerState::kRunning;
  return running;
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
      killpg(record.pid, SIGKILL);
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
      }
      ended.push_back(record);
    } else if (worker.kill_at <= now) {
      killpg(record.pid, SIGKILL);
      worker.kill_at = absl::InfiniteFuture();  // sent
    }
  }
  return ended;
}

}  // namespace berth
