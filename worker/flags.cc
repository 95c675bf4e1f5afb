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

namespace {

absl::Status ValidateReportTarget(const std::string& head, const std::string& job_id) {
  if (head.empty() != job_id.empty()) {
    return absl::InvalidArgumentError(
        head.empty() ? "--job-id: needs --head (where to report the job's progress)"
                     : "--head: needs --job-id (which job to report progress for)");
  }
  if (!head.empty()) {
    const size_t colon = head.rfind(':');
    uint32_t port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(head.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--head: \"", head, "\" is not HOST:PORT"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainerFlags(const TrainerFlags& flags) {
  if (flags.port == 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port: ", flags.port, " is not in [1, 65535]"));
  }
  if (flags.world_size == 0) {
    return absl::InvalidArgumentError("--world-size: must be at least 1");
  }
  if (flags.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--checkpoint-dir: must not be empty");
  }
  if (absl::Status s = ValidateReportTarget(flags.head, flags.job_id); !s.ok()) return s;
  if (!std::isfinite(flags.timeout_s) || flags.timeout_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout-s: ", flags.timeout_s, " is not a finite number > 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRelayFlags(const RelayFlags& flags) {
  if (flags.report_file.empty()) {
    return absl::InvalidArgumentError("--report-file: must not be empty");
  }
  if (flags.world_size == 0) {
    return absl::InvalidArgumentError("--world-size: must be at least 1");
  }
  return ValidateReportTarget(flags.head, flags.job_id);
}

}  // namespace berth
