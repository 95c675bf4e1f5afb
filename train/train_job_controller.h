// TrainJobController: runs train jobs inside the head. A job's ScalingConfig
// becomes one placement group (bundle 0 = trainer + rank 0); its life
// (placement, the trainer, store host and ranks started through the
// raylets, watching them, restarts from the latest checkpoint up to
// max_failures, stop) is a JobReconciler (job_reconciler.h), a pure state
// machine this controller drives.
//
// Driven by events, on a fixed pool: a job is stepped when something
// happened to it (submitted, a process exited, progress, a stop, its group
// changed, a node died) or when a wait it asked for is over, by one of
// `worker_threads` threads; the raylet and head calls its steps ask for run
// on those threads, never under the controller's lock. So the threads do not
// grow with the jobs: 10,000 pending jobs are 10,000 entries in a map.
// Every job's state is behind one mutex and visible through Get/List at any
// time.
//
// States: PENDING (waiting for placement; the message says why) -> STARTING
// -> RUNNING -> SUCCEEDED | FAILED | STOPPED, with RESTARTING between
// attempts.
#ifndef BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_
#define BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/state.pb.h"
#include "placement/placement_group_spec.h"
#include "train/job_reconciler.h"
#include "wire/raylet_clients.h"

namespace berth {

// What the head says of a group at one moment: its info, or NOT_FOUND once
// it is gone. `version` orders the snapshots the head takes (of any
// group): a larger one was taken later.
struct GroupSnapshot {
  std::string id;
  absl::StatusOr<v1::PlacementGroupInfo> info = absl::NotFoundError("no placement group");
  uint64_t version = 0;
};

// The placement-group side of the head, as the controller needs it.
class PlacementGroupHost {
 public:
  virtual ~PlacementGroupHost() = default;
  // Whether a job of `spec` could have its group queued (its queue,
  // priority class and topology keys known, its time limit within the
  // queue's maximum), errors naming spec's fields: a job is refused at
  // submission, not when it makes its group. A job that sets no time limit
  // gets its queue's default.
  virtual absl::Status CheckJobGroup(v1::TrainJobSpec* spec) = 0;
  virtual absl::StatusOr<std::string> CreateGroup(PlacementGroupSpec spec,
                                                  const v1::CreatePlacementGroupRequest& meta) = 0;
  // Read when the job was woken by anything but a change of this group.
  virtual GroupSnapshot GetGroup(const std::string& id) = 0;
  virtual void RemoveGroup(const std::string& id) = 0;
  // A preempted or moving group's job stopped its processes: the group lets
  // go of its bundles (a moving one, of those on draining nodes) and waits
  // again (PlacementGroupManager::LetGo).
  virtual absl::Status LetGo(const std::string& id) = 0;
  // The group's job saved a checkpoint (a rank reported one): preempting it
  // now loses less.
  virtual void GroupCheckpointed(const std::string& id) = 0;
  // The raylet address of an ALIVE or DRAINING node, or "".
  virtual std::string RayletAddress(const std::string& node_id) = 0;
  // The node's raylet does not hold this bundle of the group (StartWorker
  // said NOT_FOUND): the group places it again.
  virtual void BundleNotOnNode(const std::string& node_id, const std::string& group_id,
                               uint32_t bundle_index) = 0;
};

struct TrainControllerConfig {
  // What every job is given: the head's address for the trainer, the worker
  // binary, the checkpoint root, the stop grace, the node liveness timeout
  // (the head's heartbeat period x misses), the cluster token.
  JobOptions job;
  // The pool that steps the jobs and makes their calls.
  int worker_threads = 8;
  size_t max_active_jobs = 1000;  // not yet finished (berth-head --max-active-jobs)
  size_t max_name_length = 128;   // --max-name-length
  // The longest stop_grace_period_s a job may ask for (--max-stop-grace-period-s).
  absl::Duration max_stop_grace = absl::Minutes(10);
  std::string cluster_token;  // given to the trainer (BERTH_CLUSTER_TOKEN)
  // Called (from a pool thread, with the controller's lock held: it must be
  // quick) each time a job restarts after a failure; for the head's
  // metrics. May be empty.
  std::function<void()> on_restart;
  // Stages a job's record for the head's state store and returns its
  // sequence (quick, no I/O: called with the controller's lock held);
  // `durable` waits until what was staged up to a sequence is written.
  // Either may be empty (nothing is kept).
  std::function<uint64_t(const v1::TrainJobRecord&)> stage;
  std::function<void(uint64_t)> durable;
  // Runs work that calls raylets on the head's one executor for them (the
  // threads that also send its reservation calls), so that one pool bounds
  // the calls in flight however many jobs start at once. Empty: the work
  // runs on the caller's thread.
  std::function<void(std::function<void()>)> raylet_calls;
};

class TrainJobController {
 public:
  TrainJobController(PlacementGroupHost* groups, RayletClients* raylets,
                     TrainControllerConfig config);
  ~TrainJobController();  // Shutdown()
  // Stops every job that has not finished (as StopTrainJob would), waits
  // for them to end, and joins the pool. The event methods stay safe to
  // call (they change nothing any more) until the controller is destroyed.
  void Shutdown();
  // Stops the pool without stopping the jobs (a head that exits, for a
  // restarted head or a standby to watch them again from the store): steps
  // under way finish, nothing more is done, later events change nothing.
  void Leave();

  // Validates (errors name the field under `spec.`), then starts the job.
  // Idempotent by request_id.
  absl::StatusOr<std::string> Submit(v1::SubmitTrainJobRequest request);
  absl::Status Get(const std::string& job_id, v1::TrainJobInfo* info) const;
  void List(const v1::ListTrainJobsRequest& request, v1::ListTrainJobsResponse* response) const;
  // The job's state when asked (a terminal one: nothing to stop).
  absl::StatusOr<v1::TrainJobState> Stop(const std::string& job_id);
  absl::Status ReportProgress(const v1::ReportTrainProgressRequest& request);
  // Events from the head (call without the head's lock).
  void OnWorkerExit(const std::string& node_id, const v1::WorkerStatus& status);
  // A job's group changed: the snapshot, taken when it changed, is what
  // the job's next step sees of it (without asking the head again); one
  // older than what the job saw already is dropped.
  void OnGroupChanged(GroupSnapshot group);
  void OnNodeDead(const std::string& node_id);
  // Where the output of the job's latest attempts is, oldest first: every
  // rank's (a launcher per node's once, for its node's ranks) or one
  // rank's, of every attempt kept or one.
  absl::StatusOr<std::vector<RankLog>> Logs(const std::string& job_id, std::optional<uint32_t> rank,
                                            std::optional<uint32_t> attempt) const;
  // Takes back the jobs a previous head wrote (after its placement groups
  // were restored): see JobReconciler::Restored.
  void Restore(const std::vector<v1::TrainJobRecord>& records);
  // The pool's size (for the benchmark's thread count).
  size_t pool_size() const { return pool_.size(); }

 private:
  struct Job {
    explicit Job(JobReconciler r) : reconciler(std::move(r)) {}
    JobReconciler reconciler;
    std::string request_id;
    uint64_t fingerprint = 0;  // MessageFingerprint of its submit request
    bool queued = false;       // in ready_
    bool running = false;      // a pool thread is stepping it
    bool again = false;        // an event came while it was being stepped
    bool finished = false;     // done, and counted out of active_
    absl::Time wake_at = absl::InfiniteFuture();
    // Its groups' changes the head told since its last step, and the
    // version of each group it last saw (told or read).
    std::map<std::string, GroupSnapshot> told;
    std::map<std::string, uint64_t> seen;
  };

  void PoolLoop();
  // Steps the job until it waits, carrying out its actions.
  void Drive(const std::string& job_id);
  // The world a step sees: the groups' snapshots in `told` (taken out), the
  // others read from the head; `seen` gets the version of each.
  JobWorld ReadWorld(const std::string& placement_group_id,
                     const std::vector<std::string>& elastic_ids,
                     const std::set<std::string>& nodes, std::map<std::string, GroupSnapshot> told,
                     std::map<std::string, uint64_t>* seen);
  // What a step saw of the job's groups: a change told meanwhile that is
  // not newer is dropped.
  static void SeenLocked(Job& job, const std::map<std::string, uint64_t>& seen);
  JobActionResult Execute(const std::string& job_id, JobAction action);
  ProcessesStarted Start(StartProcesses action);
  WorkersListed ListOn(const std::string& job_id, const std::set<std::string>& nodes);
  StopsSent StopAll(const StopProcesses& stop);
  void WakeLocked(const std::string& job_id, Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a new or restored job; one not done is due at once.
  void AddLocked(const std::string& id, std::unique_ptr<Job> job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stages the job's record; the sequence to pass to Durable.
  uint64_t StageLocked(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Durable(uint64_t seq) const;
  // Both, under the lock: the change is durable before anyone sees it.
  void PersistLocked(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Durable(StageLocked(job));
  }
  bool DueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PlacementGroupHost* groups_;
  RayletClients* raylets_;
  const TrainControllerConfig config_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> by_request_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> by_group_ ABSL_GUARDED_BY(mu_);  // group id -> job id
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, std::string>> timers_ ABSL_GUARDED_BY(mu_);
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;  // jobs not done
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool pool_stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // Leave(): the jobs go on without us
  std::vector<std::thread> pool_;
};

}  // namespace berth

#endif  // BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_
