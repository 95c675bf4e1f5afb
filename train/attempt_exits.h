// What an attempt's processes' exits say: those reported (the raylets'
// exit reports) and those the raylets' listings add (a report lost with a
// head restart, a worker a restarted raylet no longer has), and what they
// say together: every rank done, one failed, which nodes still owe exits.
// The reconciler (job_reconciler.h) asks; failure_triage.h names the cause.
// Pure: no clocks but the time it is given.
#ifndef BERTH_TRAIN_ATTEMPT_EXITS_H_
#define BERTH_TRAIN_ATTEMPT_EXITS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "berth/v1/raylet.pb.h"
#include "train/job_world.h"

namespace berth {

// Final statuses of processes, by worker id.
using ProcessExits = std::map<std::string, v1::WorkerStatus>;

// Ended by a signal or with a non-zero code.
bool ExitedWithFailure(const v1::WorkerStatus& status);
// Not ended yet (starting or running).
bool StillRuns(const v1::WorkerStatus& status);

// An attempt's ranks (not its trainer or store host) and their exits so far.
struct ExitTally {
  size_t ranks = 0;
  size_t ranks_done = 0;    // exited 0
  bool any_failed = false;  // any process, helpers included
};
ExitTally TallyExits(const JobProcesses& processes, const ProcessExits& exits);

// Whether every rank on the nodes not in `unreachable` has exited.
bool ReachableRanksExited(const JobProcesses& processes, const std::set<std::string>& unreachable,
                          const ProcessExits& exits);
// Whether each of `workers` has exited.
bool AllExited(const std::vector<std::string>& workers, const ProcessExits& exits);
// The nodes of the processes whose exits have not come.
std::set<std::string> NodesOwingExits(const JobProcesses& processes, const ProcessExits& exits);

// A running attempt's listing: records the exits of `processes` the raylets
// that answered know, and as failed (SIGKILL, at `now`) those a raylet no
// longer knows, whose exits can never be reported. Nodes that did not
// answer are left to their heartbeats.
void RecordListedExits(absl::Time now, const JobProcesses& processes, const WorkersListed& listed,
                       ProcessExits* exits);
// A failed attempt's probe: adds the exits the raylets know of `processes`
// (a report that came first is kept) and returns the nodes that did not
// answer.
std::set<std::string> TakeListedExits(const JobProcesses& processes, const WorkersListed& listed,
                                      ProcessExits* exits);
// A restored, half-started attempt's scan: adds to `running` what still
// runs on the listed nodes, and returns the attempt number no raylet has
// seen (at least `attempt`).
uint32_t ScanForResume(const std::string& job_id, uint32_t attempt, const WorkersListed& listed,
                       JobProcesses* running);

}  // namespace berth

#endif  // BERTH_TRAIN_ATTEMPT_EXITS_H_
