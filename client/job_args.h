// Parsing of the `berth job` command-line arguments into wire types.
//
// Pure functions, no I/O. `berth job submit` runs either the built-in
// trainer (no command; --steps, --lr, --batch-size, --checkpoint-every) or,
// after `--`, a command on every rank (with --env K=V); flags of the other
// kind are errors rather than silently ignored. Resource flags take
// `NAME=QUANTITY,...` as --bundle does ("GPU=1,CPU=2", "memory=200Gi").
// Only what the CLI alone knows is checked here; the head validates the
// spec itself. Every error is INVALID_ARGUMENT naming the flag, and for
// repeated flags the index: `--env[1]: ...`.
#ifndef BERTH_CLIENT_JOB_ARGS_H_
#define BERTH_CLIENT_JOB_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/v1/train.pb.h"

namespace berth {

// The built-in trainer's step count when --steps is not given (the proto
// wants one > 0; this is berth-worker's own default).
inline constexpr uint32_t kDefaultTrainSteps = 200;

// `berth job submit` as typed; unset optionals were not given.
struct JobSubmitArgs {
  std::string name;
  std::string queue;  // empty: the default queue
  int32_t priority = 0;
  std::string priority_class;     // empty: `priority` as given
  std::string time_limit;         // empty: none
  std::string stop_grace_period;  // empty: the head's default
  std::string progress_timeout;   // empty: off
  int64_t num_workers = 1;
  int64_t min_workers = 0;  // elastic: at least this many, at most num_workers; 0 = not
  bool use_gpu = false;
  // Once: every worker's; once per worker: rank i's is the i-th.
  std::vector<std::string> resources_per_worker;
  std::optional<std::string> trainer_resources;
  // `RANK:NAME=QUANTITY,...`, merged into that rank's bundle.
  std::vector<std::string> rank_resources;
  // Selectors in LabelSelector::Parse's syntax; once or once per worker.
  std::vector<std::string> label_selector;
  std::string accelerator_type;
  std::string strategy = "PACK";
  // A label key all ranks share a value of, or keys to prefer (innermost first).
  std::string topology_required;
  std::vector<std::string> topology_preferred;
  int64_t max_failures = 0;
  std::string storage_path;
  // Built-in trainer only.
  std::optional<uint32_t> steps;
  std::optional<double> lr;
  std::optional<uint32_t> batch_size;
  std::optional<uint32_t> checkpoint_every;
  // Command only: argv (after `--`), `--env K=V` values, and the folder
  // every rank runs in (the same path on every node: a shared filesystem).
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string working_dir;
};

absl::StatusOr<v1::TrainJobSpec> BuildTrainJobSpec(const JobSubmitArgs& args);

// A duration as people write one ("15s", "90m", "1h30m"): whole seconds,
// at least `min_seconds` (a time limit: 1; a grace period: 0). Errors name
// `field`.
absl::StatusOr<int64_t> ParseDurationSeconds(absl::string_view text, absl::string_view field,
                                             int64_t min_seconds);

// `--state`: PENDING, STARTING, RUNNING, RESTARTING, SUCCEEDED, FAILED,
// STOPPED, TIMED_OUT, any case.
absl::StatusOr<v1::TrainJobState> ParseTrainJobStateArg(absl::string_view text);

}  // namespace berth

#endif  // BERTH_CLIENT_JOB_ARGS_H_
