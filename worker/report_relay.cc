#include "worker/report_relay.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "worker/checkpoint_files.h"
#include "worker/head_reporter.h"
#include "worker/progress_report.h"

namespace berth {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// Within the stop grace the raylet gives the relay.
constexpr absl::Duration kLastReportPatience = absl::Seconds(5);
const volatile std::sig_atomic_t kNeverStop = 0;

// What the head has been told, so a batch of lines becomes one report.
struct RelayState {
  uint64_t reports = 0;
  uint64_t step = 0;
  double loss = 0;
  std::map<std::string, double> metrics;
  std::string checkpoint;
};

// Folds new lines in; returns whether any was a report.
bool Fold(const std::vector<std::string>& lines, RelayState& state) {
  bool any = false;
  for (const std::string& line : lines) {
    absl::StatusOr<ScriptReport> report = ParseScriptReport(line);
    if (!report.ok()) {
      LogWarning(report.status().message(), ": skipped");
      continue;
    }
    any = true;
    ++state.reports;
    state.step = report->step.value_or(state.reports);
    state.metrics = report->metrics;
    if (auto loss = report->metrics.find("loss"); loss != report->metrics.end())
      state.loss = loss->second;
    if (!report->checkpoint.empty()) {
      state.checkpoint = report->checkpoint;
      std::printf("checkpoint %llu %s\n", static_cast<unsigned long long>(state.step),
                  state.checkpoint.c_str());
    }
    std::printf("step %llu %s\n", static_cast<unsigned long long>(state.step),
                absl::StrJoin(report->metrics, " ", absl::PairFormatter(" ")).c_str());
  }
  std::fflush(stdout);
  return any;
}

}  // namespace

int RelayReports(const RelayFlags& flags, const volatile std::sig_atomic_t& stop) {
  const std::string dir = std::filesystem::path(flags.report_file).parent_path().string();
  if (absl::Status s = MakeDirectories(dir); !s.ok()) {
    LogError("--report-file: ", s.message());
    return kUsageExitCode;
  }
  std::optional<HeadReporter> head;
  if (!flags.head.empty()) {
    head.emplace(flags.head, flags.job_id);
    // Tells the head this relay is up (its stop signal now drains the
    // file): ranks that report and exit within a second must not have
    // their reports die with a relay that was still loading.
    head->Report(v1::ReportTrainProgressRequest());
  }
  std::printf("relaying the reports of %u ranks from %s\n", flags.world_size,
              flags.report_file.c_str());
  std::fflush(stdout);
  ReportFileReader reader(flags.report_file);
  RelayState state;
  while (true) {
    const bool last = stop != 0;  // read once more after the stop
    if (Fold(reader.ReadNewLines(), state) && head.has_value()) {
      v1::ReportTrainProgressRequest request;
      request.set_step(state.step);
      request.set_loss(state.loss);
      request.set_latest_checkpoint(state.checkpoint);
      request.mutable_metrics()->insert(state.metrics.begin(), state.metrics.end());
      head->Report(std::move(request));
    } else if (head.has_value()) {
      head->Retry();
    }
    if (last) {
      // Stopped: by a head, which is there to take what is left.
      if (head.has_value()) head->Flush(kLastReportPatience, kNeverStop);
      return 0;
    }
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace berth
