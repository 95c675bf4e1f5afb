// Checkpoint files of a train job: the trainer writes each checkpoint the
// ranks hand it to `<dir>/step-<n>.pt` atomically (temporary file, then
// rename), so a reader or a restarted job never sees a partial one. Pure
// file I/O; the bytes are opaque here (see train.h for their content).
#ifndef BERTH_WORKER_CHECKPOINT_FILES_H_
#define BERTH_WORKER_CHECKPOINT_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace berth {

// "<dir>/step-<step>.pt".
std::string CheckpointPath(const std::string& dir, uint64_t step);

// Creates `dir` and its parents if missing.
absl::Status MakeDirectories(const std::string& dir);

// The whole file; NOT_FOUND or UNAVAILABLE naming the path.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace berth

#endif  // BERTH_WORKER_CHECKPOINT_FILES_H_
