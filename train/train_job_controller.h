// TrainJobController: runs train jobs inside the head. A job's ScalingConfig
// becomes one placement group (bundle 0 = trainer + rank 0); once it is
// CREATED the controller starts the trainer (the job's driver on rank 0's
// node: the built-in ranks' store, or the relay of a user script's
// reports), a user Python command's store host (train/worker_env.h), and
// the N ranked workers (or one launcher per node) through the raylets,
// watches them, and on a worker failure or a lost node stops the group and
// starts it again from the latest checkpoint, up to max_failures. The cause
// of a failure is the first observed one: the process that failed first,
// with what it said. One thread per job drives these steps; every job's state is
// behind one mutex and visible through Get/List at any time.
//
// States: PENDING (waiting for placement; the message says why) -> STARTING
// -> RUNNING -> SUCCEEDED | FAILED | STOPPED, with RESTARTING between
// attempts.
#ifndef BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_
#define BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_

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
#include "wire/raylet_clients.h"

namespace berth {

// The placement-group side of the head, as the controller needs it.
class PlacementGroupHost {
 public:
  virtual ~PlacementGroupHost() = default;
  virtual absl::StatusOr<std::string> CreateGroup(PlacementGroupSpec spec,
                                                  const v1::CreatePlacementGroupRequest& meta) = 0;
  virtual absl::StatusOr<v1::PlacementGroupInfo> GetGroup(const std::string& id) = 0;
  virtual void RemoveGroup(const std::string& id) = 0;
  // The raylet address of an ALIVE or DRAINING node, or "".
  virtual std::string RayletAddress(const std::string& node_id) = 0;
};

struct TrainControllerConfig {
  std::string head_address;                  // BERTH_HEAD_ADDRESS; the trainer reports here
  std::string worker_binary = "berth-worker";  // run by the raylets (PATH lookup)
  std::string checkpoint_root = "/tmp/berth/jobs";
  absl::Duration stop_grace = absl::Seconds(2);
  absl::Duration poll = absl::Milliseconds(50);
  // How long a node that stopped heartbeating takes to be declared DEAD
  // (the head's heartbeat period x misses).
  absl::Duration node_dead_after = absl::Seconds(5);
  size_t max_active_jobs = 1000;  // not yet finished (berth-head --max-active-jobs)
  size_t max_name_length = 128;   // --max-name-length
  std::string cluster_token;      // given to the trainer (BERTH_CLUSTER_TOKEN)
  // Called (from a job's thread) each time a job restarts its workers after
  // a failure; for the head's metrics. May be empty.
  std::function<void()> on_restart;
  // Writes a job's record to the head's state store before the change is
  // visible; called with the controller's lock held. May be empty.
  std::function<void(const v1::TrainJobRecord&)> persist;
};

// Where a rank's output is, for log streaming.
struct RankLog {
  uint32_t rank = 0;
  std::string node_id;
  std::string worker_id;
};

class TrainJobController {
 public:
  TrainJobController(PlacementGroupHost* groups, RayletClients* raylets,
                     TrainControllerConfig config);
  // Stops every running job (as StopTrainJob would) and joins the threads.
  ~TrainJobController();

  // Validates (errors name the field under `spec.`), then starts the job.
  // Idempotent by request_id.
  absl::StatusOr<std::string> Submit(const v1::SubmitTrainJobRequest& request);
  absl::Status Get(const std::string& job_id, v1::TrainJobInfo* info) const;
  void List(const v1::ListTrainJobsRequest& request, v1::ListTrainJobsResponse* response) const;
  absl::Status Stop(const std::string& job_id);
  absl::Status ReportProgress(const v1::ReportTrainProgressRequest& request);
  void OnWorkerExit(const std::string& node_id, const v1::WorkerStatus& status);
  // The current attempt's workers (all ranks, or one).
  absl::StatusOr<std::vector<RankLog>> Logs(const std::string& job_id,
                                            std::optional<uint32_t> rank) const;
  // Takes back the jobs a previous head wrote (after its placement groups
  // were restored). A RUNNING job is watched again with the processes it
  // has (the raylets say which ended meanwhile); a job caught starting its
  // processes starts them again; finished jobs are only listed.
  void Restore(const std::vector<v1::TrainJobRecord>& records);

 private:
  struct Job {
    v1::TrainJobInfo info;
    PlacementGroupSpec spec;
    std::string request_id;
    std::string fingerprint;
    bool stop_requested = false;
    // The current attempt's trainer has reported (a user command's relay
    // says so when it starts).
    bool trainer_reported = false;
    // Final statuses of the current attempt's processes, by worker id.
    std::map<std::string, v1::WorkerStatus> exits;
    std::vector<RankLog> logs;
    std::thread thread;
    explicit Job(PlacementGroupSpec s) : spec(std::move(s)) {}
  };
  // How an attempt ended.
  struct Outcome {
    bool succeeded = false;
    bool stopped = false;
    std::string cause;
    bool node_failure = false;  // a node of the attempt died or its bundles moved
  };

  void RunJob(const std::string& job_id);
  void ResumeJob(const std::string& job_id);
  // The attempts from `first_attempt`; `running` = that attempt's processes
  // when they already run (a resumed job).
  void RunAttempts(const std::string& job_id, const std::string& pg_id, uint32_t first_attempt,
                   std::optional<std::map<std::string, std::string>> running);
  void PersistLocked(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the group to be CREATED; false if the job was stopped.
  bool WaitPlaced(const std::string& job_id, const std::string& pg_id);
  // Starts each node's processes in the order given, the nodes in
  // parallel. On a failure, stops those started and returns the first
  // error; else the processes (worker id -> node id).
  absl::StatusOr<std::map<std::string, std::string>> StartProcesses(
      const std::string& job_id,
      std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> by_node);
  // Starts the trainer and workers of attempt `attempt`; returns the
  // processes started (worker id -> node), or the cause of failure.
  absl::StatusOr<std::map<std::string, std::string>> Launch(const std::string& job_id,
                                                            const v1::PlacementGroupInfo& pg,
                                                            uint32_t attempt);
  // Until the attempt ends: a process failed, all ranks finished, the job
  // was stopped, or its placement changed. `placed_unix_ms` is the
  // placement the processes started on (0: the one Watch first sees).
  Outcome Watch(const std::string& job_id, const std::string& pg_id,
                const std::map<std::string, std::string>& processes, int64_t placed_unix_ms);
  // Why the attempt can no longer run where it started: a node of it is not
  // ALIVE, or the group is not CREATED, was placed again or moved off one
  // of its nodes; "" while it can. Call without mu_.
  std::string PlacementChange(const std::map<std::string, std::string>& processes,
                              const absl::StatusOr<v1::PlacementGroupInfo>& pg, int64_t placed_unix_ms);
  // The job's workers as `node`'s raylet lists them; UNAVAILABLE for a node
  // that is not ALIVE. Call without mu_.
  absl::StatusOr<v1::ListWorkersResponse> WorkersOn(const std::string& job_id, const std::string& node);
  // After a failure: those of `nodes` (with processes that reported
  // nothing) that are not ALIVE or whose raylet does not answer.
  std::set<std::string> UnreachableNodes(const std::string& job_id, const std::set<std::string>& nodes);
  // The attempt's first observed failure, once its peers (but those on
  // `unreachable` nodes) had kFailureSettle to report.
  Outcome FirstFailure(const std::string& job_id, const std::map<std::string, std::string>& processes,
                       const std::set<std::string>& unreachable);
  // "node X died (missed heartbeats)" once one of `nodes` is declared DEAD,
  // waiting up to the head's liveness timeout; "" if none is. Call without mu_.
  std::string AwaitNodeDeath(const std::string& job_id, const std::set<std::string>& nodes);
  // Asks the processes' raylets for exits not reported to the head; a
  // process its raylet does not know any more has failed. Call without mu_.
  void RecordUnreportedExits(const std::string& job_id,
                             const std::map<std::string, std::string>& processes);
  void StopProcesses(const std::string& job_id, const std::map<std::string, std::string>& processes);
  void SetState(const std::string& job_id, v1::TrainJobState state, const std::string& message);

  PlacementGroupHost* groups_;
  RayletClients* raylets_;
  const TrainControllerConfig config_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> by_request_id_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_job_ ABSL_GUARDED_BY(mu_) = 0;
};

// Converts the wire ScalingConfig into the train layer's, then into the
// job's placement group. Errors name the field under `spec.scaling_config`.
absl::StatusOr<PlacementGroupSpec> PlacementGroupForJob(const v1::TrainJobSpec& spec);

}  // namespace berth

#endif  // BERTH_TRAIN_TRAIN_JOB_CONTROLLER_H_
