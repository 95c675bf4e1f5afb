#include "common/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace berth {

std::string CommandOutcome::Ending(absl::Duration timeout) const {
  if (timed_out) return absl::StrCat("no answer within ", absl::FormatDuration(timeout));
  return exited ? absl::StrCat("exit ", exit_code) : absl::StrCat("signal ", signal);
}

std::string TextTail(absl::string_view text, size_t n) {
  return std::string(
      absl::StripAsciiWhitespace(text.size() <= n ? text : text.substr(text.size() - n)));
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

absl::StatusOr<CommandOutcome> RunCommand(std::vector<std::string> argv,
                                          std::vector<std::string> env, absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("command: empty");
  // Everything the child needs is made before the fork: in a process with
  // threads, the child may only make async-signal-safe calls (no malloc).
  std::vector<char*> cargv, cenv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const std::string cannot_run = absl::StrCat("cannot run ", argv[0], "\n");
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a timeout kills what it started too
    // A daemon blocks the stop signals in its threads (to sigwait them);
    // the program gets the default mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    execvpe(cargv[0], cargv.data(), cenv.data());
    const ssize_t ignored = write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
    (void)ignored;
    _exit(127);
  }
  close(out[1]);
  CommandOutcome outcome;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      outcome.timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: every writer closed its end
    outcome.output.append(buffer, n);
  }
  close(out[0]);
  if (outcome.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : 0;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return outcome;
}

}  // namespace berth
