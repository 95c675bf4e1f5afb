// Processes as /proc shows them (Linux): who a pid is now, and who listens
// on a TCP port. A pid is reused once its process is gone, so a pid saved
// earlier is signalled only when its start time still matches
// (SameProcess): berth never signals a process it did not start.
#ifndef BERTH_COMMON_PROCESSES_H_
#define BERTH_COMMON_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace berth {

// When `pid` started, in clock ticks since boot (/proc/PID/stat field 22);
// nullopt when there is no such process (or it is a zombie's leftovers
// that cannot be read).
std::optional<uint64_t> ProcessStartTicks(pid_t pid);

// True when `pid` is alive and still the process that started at
// `start_ticks` (from ProcessStartTicks when it was started).
bool SameProcess(pid_t pid, uint64_t start_ticks);

// The process listening on TCP `port` (any address, IPv4 or IPv6), as
// "pid 1234 (berth-head)", or "" when none is found (or /proc does not
// show it, e.g. another user's process).
std::string ListenerOfPort(int port);

// Replaces this process with a fresh run of its own executable
// (/proc/self/exe) and `command_line` (argv, argv[0] included): same pid,
// same start time, every file descriptor but 0-2 closed (a listening
// socket is free for the new run). Returns only if exec fails, then ends
// the process (exit code 1): it must not go on as it was.
[[noreturn]] void ExecAgain(const std::vector<std::string>& command_line);

}  // namespace berth

#endif  // BERTH_COMMON_PROCESSES_H_
