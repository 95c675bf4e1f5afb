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

}  // namespace berth

#endif  // BERTH_COMMON_PROCESSES_H_
