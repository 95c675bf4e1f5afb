// What /proc says of a process (the head under benchmark): a number field
// of /proc/<pid>/status, its CPU time, its resident memory.
#ifndef BERTH_BENCH_LOADGEN_PROC_STATS_H_
#define BERTH_BENCH_LOADGEN_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/strings/string_view.h"

namespace berth {

// A number field of /proc/<pid>/status ("Threads:", "VmRSS:"); 0 if absent.
int64_t ProcStatus(pid_t pid, absl::string_view field);
// CPU seconds `pid` has used (utime + stime of /proc/<pid>/stat).
double CpuSeconds(pid_t pid);
// Resident memory, bytes (VmRSS).
inline int64_t ResidentBytes(pid_t pid) { return ProcStatus(pid, "VmRSS:") * 1024; }

}  // namespace berth

#endif  // BERTH_BENCH_LOADGEN_PROC_STATS_H_
