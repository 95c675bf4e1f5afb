// `berth-worker train`: one rank of a data-parallel job. Rendezvous through
// the job's c10d::TCPStore (hosted by the trainer with
// TORCHELASTIC_USE_AGENT_STORE=True, else by rank 0, like torchrun), forms
// the collective group (NCCL when every rank can, else Gloo), trains a small
// MLP on a synthetic regression task with gradients averaged over the group,
// and reports progress, checkpoints and its final parameter hash through the
// store (keys in store_protocol.h).
//
// Promises: every rank starts from the same parameters and applies the same
// averaged gradient, so all ranks end with byte-identical parameters; a run
// resumed from a checkpoint of step s continues at s+1 and ends where the
// uninterrupted run would have (batches depend only on rank and step).
//
// The header is torch-free; train.cc is one of the two translation units
// that include torch.
#ifndef BERTH_WORKER_TRAIN_H_
#define BERTH_WORKER_TRAIN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/flags.h"
#include "worker/torchrun_env.h"

namespace berth {

// Process exit codes of `berth-worker train` besides 0 (success) and
// kUsageExitCode.
inline constexpr int kTrainFailed = 1;
inline constexpr int kTestCrashExitCode = 3;

// Runs the rank to completion; returns the process exit code. Never throws.
// `main_start` is when the process's main() began; the rank publishes it,
// with the time it joined the group, under StartupKey (store_protocol.h).
int RunTrain(const TrainFlags& flags, const TorchrunEnv& env, absl::Time main_start);

// The step a checkpoint (torch::save of {step, model parameters}, as the
// ranks write it) was taken after; INVALID_ARGUMENT if `bytes` is not one.
absl::StatusOr<uint64_t> CheckpointStep(const std::string& bytes);

struct CheckpointFile {
  std::string bytes;
  uint64_t step = 0;
};
// Reads a checkpoint file and checks that it is one; errors name the path.
absl::StatusOr<CheckpointFile> ReadCheckpointFile(const std::string& path);

}  // namespace berth

#endif  // BERTH_WORKER_TRAIN_H_
