// The flags of berth-worker's two modes, `train` (one rank) and `trainer`
// (the built-in job's driver), and of berth-relay (a command job's), with
// defaults and validation. Pure (no torch, no CLI11): the CLI parses into
// these structs, then Validate* says what is wrong, naming the flag; the
// caller exits 2 on an error.
#ifndef BERTH_WORKER_FLAGS_H_
#define BERTH_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace berth {

// Exit code of both modes for bad flags or environment.
inline constexpr int kUsageExitCode = 2;

struct TrainFlags {
  uint32_t steps = 200;
  double lr = 0.05;
  uint32_t batch_size = 64;
  // Checkpoint every this many steps, and always after the last; 0 = only
  // after the last.
  uint32_t checkpoint_every = 50;
  // Checkpoint file to start from, when run by hand (no agent store); read by
  // rank 0, which hands it to the others through the store.
  std::string resume_from;
};

struct TrainerFlags {
  // The built-in ranks' store's port.
  uint32_t port = 0;
  uint32_t world_size = 0;
  std::string checkpoint_dir;
  std::string resume_from;
  // Both or neither: where to report progress (HOST:PORT) and as which job.
  std::string head;
  std::string job_id;
  double timeout_s = 3600;
};

// berth-relay: a user command's driver hosts no store; it relays the
// reports that rank 0 appends to report_file (report_relay.h).
struct RelayFlags {
  std::string report_file;
  uint32_t world_size = 0;
  // Both or neither: where to report progress (HOST:PORT) and as which job.
  std::string head;
  std::string job_id;
};

absl::Status ValidateTrainFlags(const TrainFlags& flags);
absl::Status ValidateTrainerFlags(const TrainerFlags& flags);
absl::Status ValidateRelayFlags(const RelayFlags& flags);

}  // namespace berth

#endif  // BERTH_WORKER_FLAGS_H_
