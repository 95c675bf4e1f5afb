// JobTimers: the clocks a train job runs against, as on a production
// scheduler. Its time limit (spec.time_limit_s, Slurm's --time): counted
// from its placement through restarts after failures, started again after
// a preemption; at the limit the job is stopped and ends TIMED_OUT. Its
// progress watch (failure_config.progress_timeout_s): an attempt that
// reported progress and then nothing for that long is hung, a failure.
// The backoff between restarts after failures of its own processes
// (Kubernetes' CrashLoopBackOff): 1 s, 2 s, 4 s, ... up to 5 minutes,
// begun again after an attempt that ran 10 minutes. And the grace period
// its processes get between SIGTERM and SIGKILL. Pure: the reconciler
// (job_reconciler.h) gives the time and carries the answers out.
#ifndef BERTH_TRAIN_JOB_TIMERS_H_
#define BERTH_TRAIN_JOB_TIMERS_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "berth/v1/train.pb.h"
#include "common/backoff.h"

namespace berth {

// The grace period of the job's processes: its own, else `head_default`.
absl::Duration StopGrace(const v1::TrainJobSpec& spec, absl::Duration head_default);

class JobTimers {
 public:
  explicit JobTimers(const v1::TrainJobSpec& spec);

  // The job was placed for an attempt: its time limit runs from now unless
  // it already runs (a restart after a failure), written in `info`.
  void Placed(absl::Time now, v1::TrainJobInfo* info) const;
  // Preempted: the limit starts again at the next placement.
  static void Preempted(v1::TrainJobInfo* info) { info->set_time_limit_ends_unix_ms(0); }
  // The cause the job ends with, once its time limit is reached.
  std::optional<std::string> TimedOut(absl::Time now, const v1::TrainJobInfo& info) const;

  // An attempt's processes started: its watch waits for a first report.
  void AttemptStarted(absl::Time now);
  void Progressed(absl::Time now);
  // The failure's cause, once the running attempt went without progress
  // for the progress timeout.
  std::optional<std::string> Hung(absl::Time now) const;

  // When the time limit is reached (InfiniteFuture: never), and when the
  // running attempt would be hung without a report meanwhile.
  static absl::Time LimitEnds(const v1::TrainJobInfo& info);
  absl::Time ProgressDue() const { return last_progress_ + progress_timeout_; }

  // How long the next attempt waits after the current one failed of its
  // own processes (a failure of berth's, a preemption or a drain does not
  // wait).
  absl::Duration RestartDelay(absl::Time now);

 private:
  absl::Duration time_limit_;                            // zero: none
  absl::Duration progress_timeout_;                      // infinite: off
  absl::Time attempt_started_ = absl::InfiniteFuture();  // future: none ran since the last delay
  absl::Time last_progress_ = absl::InfiniteFuture();    // future: no report yet
  Backoff restart_backoff_;
};

}  // namespace berth

#endif  // BERTH_TRAIN_JOB_TIMERS_H_
