// JobReconciler: one train job's life as a pure state machine. It is given
// the time, the events (a process exited, progress was reported, a stop was
// asked) and what the head says now (the job's group, which of the nodes it
// watches are alive), and answers with the next thing to do: create the
// group, reserve the rendezvous port, start the attempt's processes, ask
// raylets which of them still run, stop them, remove the group; or when to
// look again. The caller (TrainJobController) carries the action out and
// hands back its result. No threads, clocks or RPCs here, so every path is
// unit-tested by feeding it events.
//
// The life (as Ray Train's and torchrun's): the group is created; once it is
// CREATED the attempt's trainer, store host and ranks start (attempt_plan.h)
// and the job is RUNNING until every rank exited 0 (SUCCEEDED), it was
// stopped (STOPPED), or the attempt failed: a process failed (the cause is
// the first observed failure by the time of its error, among the exits the
// raylets know when they are asked, and the peers are then stopped at once;
// with a node not answering, its peers get kFailureSettle to report first;
// a node that stopped answering is waited for up to node_dead_after, and if
// it is declared DEAD its death is the cause), or the group lost bundles or
// was placed again. A failed attempt's processes are stopped (and waited
// for, so the next attempt does not share GPUs with them) and the job
// restarts from its latest checkpoint, up to max_failures (FAILED after),
// after a backoff when its own processes failed. The job's clocks
// (job_timers.h) end it too: its time limit (stopped, TIMED_OUT, not
// retried) and its progress timeout (a hung attempt is a failure). Every
// end removes the group.
//
// Elastic jobs (scaling_config.min_workers, Ray Train V2's num_workers=
// (min, max)): the job's group holds the first min_workers bundles, and each
// further worker has a one-bundle group of its own, made once the job's group
// is placed (and removed while it waits again, so they hold nothing for an
// attempt that cannot run), placed whenever it fits (the others wait as
// pending demand). An attempt starts once the job's group is CREATED, with
// every elastic group placed by then; a running job grows (restarts from
// its checkpoint with the larger world) at the first checkpoint reported
// after more workers were placed, and shrinks instead of counting a failure
// when a node it runs on is lost: the next attempt runs on what is left,
// the bundles of the job's group it kept (rank 0's among them) plus the
// placed elastic groups, while they make min_workers; the lost bundles wait
// as pending demand, and it grows again once they are placed. Each resize
// is recorded (TrainJobInfo.resizes).
//
// Preemption (the head's queues chose the group as a victim; it says
// `preempting`): the processes are stopped with the grace period (SIGTERM
// first, so the script can checkpoint), the job goes PENDING with the
// reason, the group lets go of its bundles (ReleaseGroup), and when it is
// placed again the next attempt resumes from the latest checkpoint. A
// preemption is not a failure: max_failures does not count it.
//
// Drains (a group of the job says `moving`: some of its bundles are on a
// DRAINING node): a running attempt is stopped at the job's next
// checkpoint, or at the drain's deadline, with the grace period; the
// moving groups let go of what is on draining nodes (ReleaseGroup), and
// the next attempt starts once they are placed elsewhere, from the latest
// checkpoint, without a backoff. Not a failure either (TrainJobInfo.moves).
// A group moving off an unhealthy GPU ends the attempt at once, as failed
// by the GPU (its cause in failure_causes, not charged, no backoff), also
// when a rank's exit came first (a GPU job's failure waits kGpuFaultSettle
// for its node's report); the next attempt waits for the group to be
// placed on healthy GPUs.
//
// The reconciler is the state machine; its decisions are units of their
// own: failure_triage.h (a failed attempt's cause, and whether the job
// restarts, shrinks or fails, charged or not), elastic_membership.h (the
// workers of the next attempt, and when a running one grows or shrinks)
// and attempt_exits.h (what the processes' exits and the raylets' listings
// say). The actions and their results are in job_world.h.
#ifndef BERTH_TRAIN_JOB_RECONCILER_H_
#define BERTH_TRAIN_JOB_RECONCILER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/raylet.pb.h"
#include "berth/v1/state.pb.h"
#include "common/backoff.h"
#include "placement/placement_group_spec.h"
#include "train/attempt_exits.h"
#include "train/attempt_plan.h"
#include "train/elastic_membership.h"
#include "train/failure_triage.h"
#include "train/job_timers.h"
#include "train/job_world.h"
#include "train/rank_assignment.h"

namespace berth {

// Where a rank's output is, for log streaming.
struct RankLog {
  uint32_t rank = 0;
  std::string node_id;
  std::string worker_id;
  uint32_t attempt = 0;
  // A launcher per node's (torchrun, accelerate launch): its output is
  // the node's ranks', and this is its NODE_RANK.
  std::optional<uint32_t> node_rank;
};

// One Step's answer.
struct JobStep {
  std::optional<JobAction> action;              // carry out, then OnResult, then Step again
  absl::Time wake_at = absl::InfiniteFuture();  // without an action: Step again by then
  bool persist = false;                         // the job's record changed: write it
  bool restarted = false;  // an attempt failed and the job restarts (for metrics)
};

struct JobOptions {
  std::string head_address;                    // the trainer reports here
  std::string worker_binary = "berth-worker";  // run by the raylets (PATH lookup)
  std::string relay_binary = "berth-relay";    // a command job's driver, likewise
  std::string checkpoint_root = "/tmp/berth/jobs";
  std::string cluster_token;  // the trainer's (BERTH_CLUSTER_TOKEN)
  // SIGTERM to SIGKILL for a job that sets no stop_grace_period_s.
  absl::Duration default_stop_grace = absl::Seconds(30);
  // How long a node that stopped heartbeating takes to be declared DEAD.
  absl::Duration node_dead_after = absl::Seconds(5);
};

class JobReconciler {
 public:
  // A job just submitted (`info` PENDING, its spec set): it creates its group.
  JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options);
  // A job a previous head wrote (Record). A RUNNING one is watched again
  // with the processes it has (its raylets say which ended meanwhile); one
  // caught starting its processes stops what runs and starts the next
  // attempt; one whose end was decided removes what is left of its groups
  // and ends as decided (the group it finds gone is no failure); a
  // finished one is only listed.
  static JobReconciler Restored(const v1::TrainJobRecord& record, PlacementGroupSpec spec,
                                JobOptions options);
  // What a head writes of the job for Restored: all but the request id,
  // which is the caller's.
  v1::TrainJobRecord Record() const;

  const v1::TrainJobInfo& info() const { return info_; }
  // The ranks of the latest attempts (kAttemptsWithLogs), oldest first:
  // every attempt's output stays readable (the failure that restarted the
  // job), and is kept across a head restart (Record).
  const std::vector<RankLog>& logs() const { return logs_; }
  static constexpr uint32_t kAttemptsWithLogs = 20;
  bool stop_requested() const { return stop_requested_; }
  // Terminal, and nothing is left to do.
  bool done() const { return phase_ == Phase::kDone; }

  // Events. Each may make the job due: Step it soon.
  // Returns false if the job had already finished or was being stopped.
  bool RequestStop();
  void OnWorkerExit(const v1::WorkerStatus& status);
  // Returns whether it is due (a finished attempt waits for its trainer's
  // report; a moving one, for its next checkpoint); progress alone changes
  // only the info.
  bool OnProgress(absl::Time now, const v1::ReportTrainProgressRequest& request);

  // What to read into the JobWorld of the next Step.
  const std::string& placement_group_id() const { return info_.placement_group_id(); }
  const google::protobuf::RepeatedPtrField<std::string>& elastic_group_ids() const {
    return info_.elastic_group_ids();
  }
  std::set<std::string> WatchedNodes() const;

  JobStep Step(absl::Time now, const JobWorld& world);
  // The result of the action the last Step returned.
  void OnResult(absl::Time now, JobActionResult result);
  // Whether the record changed since the last Step or TakePersist (a
  // result can make the job RUNNING): write it before anyone sees it.
  bool TakePersist() { return std::exchange(persist_, false); }

 private:
  enum class Phase {
    kCreateGroup,
    kCreateElastic,   // an elastic job's one-bundle groups, one per Step
    kResumeScan,      // a restored, half-started attempt: list what runs
    kAwaitPlacement,  // until the group is CREATED
    kAllocatePort,
    kStartProcesses,
    kWatch,           // RUNNING
    kFinishing,       // every rank exited 0; the trainer gets a moment
    kProbe,           // a failure: which nodes still answer
    kSettle,          // the cause is chosen (peers get a moment if a node is silent)
    kAwaitNodeDeath,  // a node that does not answer may be declared DEAD
    kStopping,
    kAwaitStopped,
    kReleaseGroup,  // preempted, its processes stopped
    kRemoveGroup,
    kDone,
  };
  // What follows once the processes being stopped are gone.
  enum class AfterStop {
    kEndStopped,
    kEndSucceeded,
    kEndTimedOut,
    kCountFailure,
    kLaunchFailed,
    kAwaitPlacement,
    kPreempted,
    kMoved,
    kResize,
  };
  // Why raylets are asked for the job's workers.
  enum class Listing { kRecordExits, kUnreachable, kLaunchFailed, kResumeScan };

  JobReconciler(v1::TrainJobInfo info, PlacementGroupSpec spec, JobOptions options, Phase phase);

  static JobStep Act(JobAction action);
  static JobStep WaitUntil(absl::Time wake_at);
  // A phase's decision: an action or a wait, or nullopt once it moved to
  // another phase.
  std::optional<JobStep> StepPhase(absl::Time now, const JobWorld& world);
  // The request for a group of the job.
  CreateGroup GroupRequest(PlacementGroupSpec spec, std::string name, std::string request_id) const;
  JobStep CreateJobGroup() const;
  JobStep CreateElasticGroup() const;
  JobStep ResumeScan(const JobWorld& world);
  std::optional<JobStep> AwaitPlacement(absl::Time now, const JobWorld& world);
  // The job waits for its group (its elastic groups go meanwhile).
  JobStep WaitForPlacement(absl::Time now, const JobWorld& world);
  // A new attempt on bundles `core` of the job's group and the elastic
  // groups placed: its ranks, then its port.
  std::optional<JobStep> StartAttempt(absl::Time now, const JobWorld& world,
                                      const std::vector<uint32_t>& core);
  std::optional<JobStep> Watch(absl::Time now, const JobWorld& world);
  // The running attempt reached the time limit or hung: it is stopped.
  bool OnTimers(absl::Time now);
  // The running attempt's exits: done, failed, or grown.
  std::optional<JobStep> WatchExits(absl::Time now, const JobWorld& world);
  std::optional<JobStep> Finishing(absl::Time now);
  std::optional<JobStep> Probe(absl::Time now, const JobWorld& world);
  std::optional<JobStep> Settle(absl::Time now, const JobWorld& world);
  std::optional<JobStep> AwaitingNodeDeath(absl::Time now, const JobWorld& world);
  std::optional<JobStep> AwaitStopped(absl::Time now);
  std::optional<JobStep> ReleasingGroup(absl::Time now);

  void SetState(absl::Time now, v1::TrainJobState state, const std::string& message);
  void Stop(JobProcesses processes, AfterStop after);
  void AfterStopped(absl::Time now);
  void LaunchFailed(const std::string& cause);
  void CountFailure(absl::Time now);
  // The group is being preempted: whether the job gave in (it stops what
  // runs, then lets go of the group).
  bool OnPreempting(absl::Time now, const JobWorld& world);
  // A group of the running attempt is moving off a draining node: whether
  // the attempt stops now (at a checkpoint since the drain was seen, or at
  // the drain's deadline; off an unhealthy GPU: at once, as failed).
  bool OnMoving(absl::Time now, const JobWorld& world);
  void End(v1::TrainJobState state, std::string message);
  // An elastic job restarts with the workers placed now (resize_reason_ says why).
  void Resize(absl::Time now);
  bool elastic() const { return membership_.elastic(); }
  void AwaitNodeDeath(absl::Time now);
  void OnGroupCreated(absl::Time now, const GroupCreated& created);
  void OnStarted(absl::Time now, ProcessesStarted started);
  void OnReleased(absl::Time now, const GroupReleased& released);
  void OnRemoved(absl::Time now);
  void OnListed(absl::Time now, const WorkersListed& listed);
  void OnPort(absl::Time now, const PortAllocated& port);
  // Where `worker`'s output is, in `attempt`.
  RankLog LogOf(const v1::WorkerRank& worker, uint32_t attempt) const;
  // What PlanAttempt needs of the job for the attempt about to start.
  AttemptInputs PlanInputs(const std::string& master_addr, uint16_t master_port) const;

  v1::TrainJobInfo info_;
  PlacementGroupSpec spec_;  // the job's own group (an elastic job's first min_workers)
  // Elastic: the bundle of every elastic group.
  std::optional<PlacementGroupSpec> elastic_spec_;
  ElasticMembership membership_;
  JobOptions options_;
  Phase phase_;
  bool stop_requested_ = false;
  // The current attempt's trainer has reported (a user command's relay says
  // so when it starts).
  bool trainer_reported_ = false;
  // Final statuses of the processes, by worker id (the current attempt's
  // and the stopped ones').
  ProcessExits exits_;
  std::vector<RankLog> logs_;
  bool persist_ = false;
  bool restarted_ = false;

  uint32_t attempt_ = 0;  // the one being started or run
  JobProcesses processes_;
  int64_t placed_unix_ms_ = 0;  // of the placement the attempt runs on; 0 = as found
  std::vector<RankedWorker> ranks_;
  std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> to_start_;
  absl::Time reconcile_at_ = absl::InfinitePast();
  Backoff placement_wait_;  // between looks at a group that waits for room
  JobTimers timers_;
  absl::Duration stop_grace_;     // the job's processes' SIGTERM to SIGKILL
  Backoff release_retry_;         // between asks to let go of a preempted group
  bool restart_pending_ = false;  // a restart was decided: yield until restart_at_
  absl::Time restart_at_ = absl::InfinitePast();
  Listing listing_ = Listing::kRecordExits;
  std::set<std::string> to_list_;
  std::set<std::string> unreachable_;
  AttemptFailure failure_;  // of the attempt that failed
  absl::Time deadline_ = absl::InfinitePast();
  absl::Time gpu_settle_until_ = absl::InfinitePast();  // a GPU job's failure waits for a GPU fault
  JobProcesses to_stop_;
  std::vector<std::string> awaited_;
  AfterStop after_stop_ = AfterStop::kEndStopped;
  bool stop_after_node_wait_ = true;  // the processes still run (not a failed launch)
  std::string resize_reason_;         // of the restart under way
  // While a group of the running attempt moves: the latest checkpoint when
  // that was first seen (the next one moves it), and the drain's deadline.
  std::optional<std::string> move_checkpoint_;
  absl::Time move_deadline_ = absl::InfiniteFuture();
  std::string releasing_;               // an elastic group being let go of
  bool dropping_elastic_ = false;       // the last elastic group is being removed
  std::vector<std::string> to_remove_;  // groups End() removes, the last first
  v1::TrainJobState final_state_ = v1::TRAIN_JOB_STATE_FAILED;
  std::string final_message_;
};

}  // namespace berth

#endif  // BERTH_TRAIN_JOB_RECONCILER_H_
