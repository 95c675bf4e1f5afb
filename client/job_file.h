// Job files: a YAML TrainJobSpec, like accelerate's launch config, with the
// `scaling:` section spelled exactly as Ray Train's ScalingConfig:
//
//   name: seed-a10g
//   scaling:
//     num_workers: 16
//     use_gpu: true
//     accelerator_type: A10G
//     trainer_resources: {CPU: 1, memory: 200Gi}
//     resources_per_worker: {GPU: 1}   # or a list, one entry per rank
//     rank_resources: {0: {memory: 200Gi}}   # merged into single ranks
//     label_selector: "zone in (a,b)"  # or a list, one entry per rank
//     placement_strategy: PACK
//   entrypoint:                 # the built-in worker ...
//     builtin: {model: mlp, steps: 200, learning_rate: 0.05, batch_size: 64,
//               checkpoint_every: 50}
//   # ... or any torchrun-style command:
//   #   command: python3
//   #   args: [train.py, --epochs, "3"]
//   #   env: {NCCL_DEBUG: INFO}
//   #   working_dir: /srv/train
//   runtime_env:                # a command's folder, uploaded (as Ray's):
//     working_dir: .            #   each rank runs in its unpacked copy
//     excludes: ["*.ckpt", data]
//   failure: {max_failures: 2, progress_timeout: 30m}  # 30m without a report: hung
//   stop_grace_period: 60s      # SIGTERM to SIGKILL (default: the head's, 30s)
//   checkpoint_dir: /shared/checkpoints
//
// Types follow YAML: a quoted "4" is a string, not an integer; any scalar
// is a string (args, env values). Resource quantities are numbers or
// strings (0.5, "200Gi"). Without `entrypoint:` the job runs the built-in
// trainer with its defaults; `scaling.num_workers` is required.
//
// Unknown keys, wrong types, empty values and bad values are errors that
// name the file, the line and the key path (`job.yaml:7:
// scaling.num_workers: ...`; user-chosen keys in brackets:
// `scaling.trainer_resources["memory"]`). The reading itself is
// client/yaml_reader.h's; this unit is the job file's schema: its keys and
// how they fill a TrainJobSpec. Queue files are read the same way
// (client/queue_file.h, included here for the callers of LoadQueueFile).
#ifndef BERTH_CLIENT_JOB_FILE_H_
#define BERTH_CLIENT_JOB_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/v1/train.pb.h"
#include "client/queue_file.h"

namespace berth {

// The job file's `runtime_env:`, which the client carries out (it packs and
// uploads working_dir, then names the package in the spec).
struct JobRuntimeEnv {
  std::string working_dir;            // empty: none
  std::vector<std::string> excludes;  // globs (common/working_dir_package.h)
};

// Reads and validates a job file; `runtime_env` (optional) gets its
// runtime_env, working_dir made absolute from the file's folder.
// INVALID_ARGUMENT (or NOT_FOUND for a missing file) with
// "<path>:<line>: <key path>: <what is wrong>".
absl::StatusOr<v1::TrainJobSpec> LoadJobFile(const std::string& path,
                                             JobRuntimeEnv* runtime_env = nullptr);
// The same for YAML text already in memory; `name` stands for the path.
absl::StatusOr<v1::TrainJobSpec> ParseJobFile(const std::string& text, const std::string& name,
                                              JobRuntimeEnv* runtime_env = nullptr);

}  // namespace berth

#endif  // BERTH_CLIENT_JOB_FILE_H_
