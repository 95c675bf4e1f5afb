// RunCommand: runs a program to its end and collects what it wrote, for
// the daemons' helper programs (an autoscaler's node provider command, a
// raylet's node health check). The program runs in a process group of its
// own, with no signal blocked, and stdout and stderr together in one pipe;
// when the timeout comes the whole group is killed, so nothing it started
// outlives it. Safe to call from a process with threads.
#ifndef BERTH_COMMON_COMMAND_H_
#define BERTH_COMMON_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth {

struct CommandOutcome {
  bool timed_out = false;
  bool exited = false;  // with exit_code; otherwise ended by `signal`
  int exit_code = 0;
  int signal = 0;
  std::string output;  // stdout and stderr, as written

  bool ok() const { return !timed_out && exited && exit_code == 0; }
  // "exit 3", "signal 9", or "no answer within 30s" (given the timeout).
  std::string Ending(absl::Duration timeout) const;
};

// The last `n` bytes of `text` without surrounding white space: a program's
// or a server's answer, as an error message quotes it.
std::string TextTail(absl::string_view text, size_t n = 600);

// Runs `argv` (searched in PATH) with environment `env` ("KEY=value"), at
// most `timeout`. INTERNAL if it cannot be started at all (a program that
// is not found ends with exit code 127 and says so in its output).
absl::StatusOr<CommandOutcome> RunCommand(std::vector<std::string> argv,
                                          std::vector<std::string> env, absl::Duration timeout);

// This process's environment, as RunCommand takes it.
std::vector<std::string> CurrentEnvironment();

}  // namespace berth

#endif  // BERTH_COMMON_COMMAND_H_
