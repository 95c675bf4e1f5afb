// Why a worker process failed, in its own words: what a person needs to act
// on a failed rank without opening its logs.
//
// torch's `@record` (torch.distributed.elastic.multiprocessing.errors)
// writes the exception to the file named by TORCHELASTIC_ERROR_FILE, which
// the raylet sets for every worker; a process that wrote none (no @record, a
// crash, a C++ program) is described by the last lines of its stderr. The
// time of failure orders a group's failures: the rank that failed first is
// the root cause, and its peers die after it of broken connections. Reads
// at most a few KiB; never fails (a missing or malformed file falls back).
#ifndef BERTH_RAYLET_WORKER_ERROR_H_
#define BERTH_RAYLET_WORKER_ERROR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace berth {

// When it failed: the error file's write, else the last write to stderr
// (a process prints its error, then may take seconds to exit), else the
// exit.
struct WorkerError {
  // The headline (the exception line) first, then the lines around it; at
  // most kMaxWorkerErrorBytes.
  std::string message;
  int64_t failed_unix_us = 0;
};

inline constexpr size_t kMaxWorkerErrorBytes = 2048;
// How many of the stderr's (or the traceback's) last lines are kept.
inline constexpr size_t kWorkerErrorTailLines = 12;

// The error of a worker that exited at `exited`: from `error_file` when it
// holds torch's JSON ({"message": {"message": "ValueError: ...",
// "extraInfo": {"py_callstack": ..., "timestamp": ...}}}) and was written
// since `started`, else from the tail of `stderr_path`.
WorkerError ReadWorkerError(const std::string& error_file, const std::string& stderr_path,
                            absl::Time started, absl::Time exited);

}  // namespace berth

#endif  // BERTH_RAYLET_WORKER_ERROR_H_
