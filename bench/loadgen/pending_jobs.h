// berth-loadgen --pending-jobs: J train jobs that cannot be placed yet
// (each asks for an accelerator type no node has) wait in a live head at
// once, on simulated nodes; prints the head's threads (its train controller
// is a fixed pool, not a thread per job), memory and CPU while they wait,
// and how long stopping them all takes.
#ifndef BERTH_BENCH_LOADGEN_PENDING_JOBS_H_
#define BERTH_BENCH_LOADGEN_PENDING_JOBS_H_

#include <string>
#include <vector>

namespace berth {

struct PendingJobsRun {
  std::vector<std::string> head_flags;  // e.g. the state store's
  std::string state;                    // for the report
  int nodes = 100;
  int gpus_per_node = 8;
  int jobs = 10000;
  std::string json;  // also write the figures here, if set
};

// 0 when every job waited and was stopped.
int PendingJobs(const PendingJobsRun& run);

}  // namespace berth

#endif  // BERTH_BENCH_LOADGEN_PENDING_JOBS_H_
