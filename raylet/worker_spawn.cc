#include "raylet/worker_spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// What a child reports through its CLOEXEC pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { kProcessGroup, kCgroup, kRedirect, kChdir, kFork, kExec } stage;
  int error;
};

const char* StageName(int stage) {
  switch (stage) {
    case ChildFailure::kProcessGroup:
      return "setpgid";
    case ChildFailure::kCgroup:
      return "joining its cgroups";
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
                           int stderr_fd, const std::vector<int>& cgroup_procs_fds, const char* cwd,
                           char* const argv[], char* const envp[]) {
  auto fail = [&report_fd](ChildFailure::Stage stage) {
    const ChildFailure failure{stage, errno};
    ssize_t ignored = write(report_fd, &failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(ChildFailure::kProcessGroup);
  // "0" moves the writer: the keeper, and so everything it forks, is in
  // the worker's cgroups before the program runs.
  for (int fd : cgroup_procs_fds) {
    if (write(fd, "0", 1) != 1) fail(ChildFailure::kCgroup);
  }
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
  // while the keeper had not yet run on, and the keeper would die of the
  // SIGTERM meant for the program.
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

// The descriptors the child takes over: stdin (/dev/null), stdout, stderr
// and the pipe it reports a failed exec through. The caller's copies close
// with this object.
class ChildDescriptors {
 public:
  ChildDescriptors() = default;
  ChildDescriptors(const ChildDescriptors&) = delete;
  ChildDescriptors& operator=(const ChildDescriptors&) = delete;
  ~ChildDescriptors() {
    for (int fd : {stdin_fd, stdout_fd, stderr_fd, report_pipe[0], report_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  absl::Status Open(const std::string& log_prefix) {
    stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    stdout_fd = OpenForAppend(log_prefix + ".out");
    stderr_fd = OpenForAppend(log_prefix + ".err");
    if (stdin_fd >= 0 && stdout_fd >= 0 && stderr_fd >= 0 && pipe2(report_pipe, O_CLOEXEC) == 0) {
      return absl::OkStatus();
    }
    return absl::InternalError(
        absl::StrCat("opening ", log_prefix, ".{out,err}: ", std::strerror(errno)));
  }

  // Once the child has it: only the child may hold the write end, so that
  // the raylet reads EOF when the program has exec'd.
  void CloseReportWriteEnd() {
    close(report_pipe[1]);
    report_pipe[1] = -1;
  }

  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int report_pipe[2] = {-1, -1};
};

// argv / envp for exec: pointers into `strings`, then a null.
std::vector<char*> NullTerminated(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// EOF means exec succeeded (the pipe closed on exec); data means it failed.
bool ReadChildFailure(int report_fd, ChildFailure* failure) {
  ssize_t n;
  do {
    n = read(report_fd, failure, sizeof(*failure));
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

absl::Status StartError(const WorkerSpawn& spawn, const ChildFailure& failure) {
  return absl::InternalError(
      absl::StrCat("starting worker ", spawn.worker_id, ": ", StageName(failure.stage),
                   failure.stage == ChildFailure::kExec    ? absl::StrCat(" ", spawn.argv[0])
                   : failure.stage == ChildFailure::kChdir ? absl::StrCat(" ", spawn.cwd)
                                                           : "",
                   ": ", std::strerror(failure.error)));
}

}  // namespace

absl::StatusOr<SpawnedWorker> SpawnWorkerProcess(const WorkerSpawn& spawn) {
  // Everything the child needs is built before fork.
  const std::vector<char*> argv = NullTerminated(spawn.argv);
  const std::vector<char*> envp = NullTerminated(spawn.env);
  ChildDescriptors fds;
  if (absl::Status s = fds.Open(spawn.log_prefix); !s.ok()) return s;

  const absl::Time started = absl::Now();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    RunChild(fds.report_pipe[1], spawn.lifeline_fd, fds.stdin_fd, fds.stdout_fd, fds.stderr_fd,
             spawn.cgroup_procs_fds, spawn.cwd.c_str(), argv.data(), envp.data());
  }
  // Also from the parent, so the group exists before anyone signals it.
  setpgid(pid, pid);
  fds.CloseReportWriteEnd();
  ChildFailure failure{};
  if (ReadChildFailure(fds.report_pipe[0], &failure)) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return StartError(spawn, failure);
  }
  return SpawnedWorker{pid, started};
}

}  // namespace berth
