// berth-relay, the driver of a user command job: relays the reports that rank 0's
// berth.train.report() appends to --report-file (progress_report.h) to the
// head, every 100 ms, newest step and metrics first, and the latest
// checkpoint. It hosts no store: the user's rank 0 does. Runs until
// `stop` is set (SIGTERM from the raylet once the ranks are done), relays
// what is left, and returns 0; returns 1 if the raylet that started it dies
// (nobody would stop it). Torch-free.
#ifndef BERTH_WORKER_REPORT_RELAY_H_
#define BERTH_WORKER_REPORT_RELAY_H_

#include <csignal>

#include "worker/flags.h"

namespace berth {

int RelayReports(const RelayFlags& flags, const volatile std::sig_atomic_t& stop);

}  // namespace berth

#endif  // BERTH_WORKER_REPORT_RELAY_H_
