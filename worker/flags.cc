#include "worker/flags.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::Status ValidateTrainFlags(const TrainFlags& flags) {
  if (flags.steps == 0) return absl::InvalidArgumentError("--steps: must be at least 1");
  if (!std::isfinite(flags.lr) || flags.lr <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr: ", flags.lr, " is not a finite number > 0"));
  }
  if (flags.batch_size == 0) {
    return absl::InvalidArgumentError("--batch-size: must be at least 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateTrainerFlags(const TrainerFlags& flags) {
  if (!flags.report_file.empty()) {
    if (flags.port != 0) {
      return absl::InvalidArgumentError("--port: a trainer with --report-file hosts no store");
    }
  } else if (flags.port == 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port: ", flags.port, " is not in [1, 65535] (or give --report-file)"));
  }
  if (flags.world_size == 0) {
    return absl::InvalidArgumentError("--world-size: must be at least 1");
  }
  if (flags.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--checkpoint-dir: must not be empty");
  }
  if (flags.head.empty() != flags.job_id.empty()) {
    return absl::InvalidArgumentError(
        flags.head.empty() ? "--job-id: needs --head (where to report the job's progress)"
                           : "--head: needs --job-id (which job to report progress for)");
  }
  if (!flags.head.empty()) {
    const size_t colon = flags.head.rfind(':');
    uint32_t port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(flags.head.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--head: \"", flags.head, "\" is not HOST:PORT"));
    }
  }
  if (!std::isfinite(flags.timeout_s) || flags.timeout_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout-s: ", flags.timeout_s, " is not a finite number > 0"));
  }
  return absl::OkStatus();
}

}  // namespace berth
