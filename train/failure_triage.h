// Failure triage: what an attempt that failed means for its train job (as
// Ray Train V2's FailurePolicy). It names the cause a person can act on
// (the first observed failure among the processes' exits, a node lost, a
// placement that changed, a launch that failed) and, given the job's
// failure_config and its failures so far, decides: restart (after a
// backoff when the job's own processes failed or its launch did, so a crash
// loop or a launch that cannot work is not retried in a tight loop; at
// once after a failure of berth's), shrink (an elastic job that lost a node of
// the attempt runs on without it), or fail (more than max_failures). It
// says whether the failure is charged to the job: a process's failure
// always is; a failure of berth's (a node died or stopped answering, the
// group lost bundles or was placed again, a raylet lost a bundle) is unless
// count_node_failures is false; a shrink never is, nor is a GPU found
// unhealthy (the hardware's fault, which the head routes around). A preemption or a
// resize is not a failure and never comes here. Pure: the reconciler
// (job_reconciler.h) carries the verdict out.
#ifndef BERTH_TRAIN_FAILURE_TRIAGE_H_
#define BERTH_TRAIN_FAILURE_TRIAGE_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "berth/v1/train.pb.h"
#include "train/attempt_exits.h"
#include "train/job_world.h"

namespace berth {

// What ended an attempt that did not succeed.
struct AttemptFailure {
  std::string cause;
  // Berth's fault, not the job's processes': a node or the placement.
  bool node_failure = false;
  // A node the attempt ran on was declared DEAD.
  std::string dead_node;
  // The attempt failed before its processes ran.
  bool launch_failed = false;
  // A GPU of the attempt was found unhealthy (with node_failure): never
  // charged, whatever count_node_failures says, as a drain is not.
  bool gpu_fault = false;
};

// The first observed failure among the exits of `processes` (as torchrun's:
// by the time of its error, not the order of the reports, since peers die
// of the broken connections after the root cause).
std::string FirstObservedFailure(const JobProcesses& processes, const ProcessExits& exits);

// Why an attempt on `nodes`, placed at `placed_unix_ms` (0: as found), can
// no longer run where it started; "" while it can. An elastic job's lost
// bundles are not a failure (elastic_membership.h).
std::string PlacementChange(const JobWorld& world, const std::set<std::string>& nodes,
                            int64_t placed_unix_ms, bool elastic);

// An attempt whose group holds a GPU found unhealthy (`moving`, with
// move_cause MOVE_CAUSE_UNHEALTHY_GPU): the cause names the node, the GPU
// and its fault, e.g. "GPU 2 of node-1: XID 79 (GPU has fallen off the bus)".
AttemptFailure GpuFailure(const v1::PlacementGroupInfo& moving);

// A launch whose StartWorker failed with `status`: NOT_FOUND is a node that
// lost a bundle the head's books put there (the head places it again), not
// the job's fault.
AttemptFailure StartFailure(const absl::Status& status);

enum class FailureAction { kRestart, kShrink, kFail };

struct FailureVerdict {
  FailureAction action = FailureAction::kRestart;
  bool charged = false;   // counts against max_failures
  bool back_off = false;  // a restart waits for the job's restart backoff (job_timers.h)
};

// `failures`: the job's charged failures so far.
FailureVerdict TriageFailure(const AttemptFailure& failure, const v1::FailureConfig& config,
                             uint32_t failures, bool elastic);

}  // namespace berth

#endif  // BERTH_TRAIN_FAILURE_TRIAGE_H_
