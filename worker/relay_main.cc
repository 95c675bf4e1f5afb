// berth-relay: the driver of a user command's train job. It relays the
// lines rank 0's berth.train.report() appends to --report-file to the head
// (worker/report_relay.h) until the raylet stops it. Torch-free: it starts
// in milliseconds beside the job's ranks, where berth-worker (libtorch)
// takes a CPU-second. Bad flags: an error naming the flag, and a non-zero
// exit.
#include <csignal>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "common/help_json.h"
#include "common/log.h"
#include "common/log_flag.h"
#include "common/version.h"
#include "worker/flags.h"
#include "worker/report_relay.h"

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int signal) { g_stop_signal = signal; }

}  // namespace

int main(int argc, char** argv) {
  // Whole lines even when stdout is a file or a pipe (the raylet's log).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  berth::RelayFlags flags;
  CLI::App app{"berth-relay: relays a command job's berth.train.report() lines to the head"};
  app.add_option("--report-file", flags.report_file,
                 "the file rank 0's berth.train.report() appends to")
      ->required();
  app.add_option("--world-size", flags.world_size, "number of ranks")->required();
  app.add_option("--head", flags.head, "head to report progress to, HOST:PORT");
  app.add_option("--job-id", flags.job_id, "job id to report progress as");
  const berth::LogFlag log_flag(app);
  berth::AddVersionFlag(app, "berth-relay");
  berth::AddHelpJsonFlag(app);
  CLI11_PARSE(app, argc, argv);
  log_flag.Init("berth-relay");
  if (absl::Status s = berth::ValidateRelayFlags(flags); !s.ok()) {
    berth::LogError(s.message());
    return berth::kUsageExitCode;
  }
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return berth::RelayReports(flags, g_stop_signal);
}
