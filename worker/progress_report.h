// The reports of a user script, as berth.train.report() writes them: one
// JSON object a line, appended to BERTH_REPORT_FILE on rank 0's node (the
// trainer's node), which the trainer relays to the head.
//
//   {"step": 120, "metrics": {"loss": 0.31, "epoch": 2}, "checkpoint": "/ckpt/step-120"}
//
// "step" is optional (the count of reports so far stands in); the numeric
// metrics are kept, others are dropped; "loss" among them is the job's
// loss. "checkpoint" is a path on shared storage or null. A file, not a
// socket, so that the report path does not depend on the user's torch,
// grpcio or Python. Pure except ReportFileReader, which reads the file.
#ifndef BERTH_WORKER_PROGRESS_REPORT_H_
#define BERTH_WORKER_PROGRESS_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

struct ScriptReport {
  std::optional<uint64_t> step;
  std::map<std::string, double> metrics;  // numeric, finite
  std::string checkpoint;                 // "" = none
};

// One line; INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<ScriptReport> ParseScriptReport(absl::string_view line);

// Returns the complete lines appended to a file since the last call (a
// partial last line waits for its end). A missing file has no lines yet.
class ReportFileReader {
 public:
  explicit ReportFileReader(std::string path) : path_(std::move(path)) {}
  std::vector<std::string> ReadNewLines();

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace berth

#endif  // BERTH_WORKER_PROGRESS_REPORT_H_
