// Scheduler: the head's loops around its state (head_state.h). The
// scheduling loop places due groups and starts their two-phase commits
// (two_phase_commit.h), whose raylet calls go through a per-node batcher
// (bundle_op_batcher.h) run by a pool of committer threads, so many groups
// are in flight at once; train jobs start their processes on the same pool. The liveness loop, a
// thread of its own, declares nodes DEAD when their heartbeats stop (heartbeat_book.h), so that a
// long pass delays no judgement. It tells the train job controller when a group's commit ended and
// when a node died, and is the controller's PlacementGroupHost.
#ifndef BERTH_SCHEDULER_SCHEDULER_H_
#define BERTH_SCHEDULER_SCHEDULER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/bundle_op_batcher.h"
#include "scheduler/head_state.h"
#include "scheduler/two_phase_commit.h"
#include "train/train_job_controller.h"
#include "wire/raylet_clients.h"

namespace berth {

class Scheduler final : public PlacementGroupHost {
 public:
  // Neither is owned; both outlive the scheduler.
  Scheduler(HeadState* state, RayletClients* raylets);
  ~Scheduler() override;  // Stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the scheduling and liveness loops and the committer threads of the head of
  // `head_epoch`, which qualifies every reservation call's request id.
  void Start(uint64_t head_epoch);
  // Stops the loop; in-flight commits and queued raylet work finish first.
  void Stop();

  // Queues work that calls raylets for the committer threads, the head's
  // one executor for such calls (the batcher's, train jobs' process starts).
  void Submit(std::function<void()> work);
  // Releases through the batcher (one call per node for many groups), sent
  // once `durable_first` (a state sequence; 0: none) is durable. Called
  // under the head's mutex in the hold that gave the bundles' room back, so
  // that no prepare of a group placed in that room reaches the node before
  // them; a head restarted before the change is kept finds the bundles held.
  void SubmitCancels(std::vector<CancelTask> cancels, uint64_t durable_first = 0);

  // PlacementGroupHost, for the train job controller.
  absl::Status CheckJobGroup(v1::TrainJobSpec* spec) override;
  absl::StatusOr<std::string> CreateGroup(PlacementGroupSpec spec,
                                          const v1::CreatePlacementGroupRequest& meta) override;
  GroupSnapshot GetGroup(const std::string& id) override;
  void RemoveGroup(const std::string& id) override;
  absl::Status LetGo(const std::string& id) override;
  void GroupCheckpointed(const std::string& id) override;
  std::string RayletAddress(const std::string& node_id) override;
  void BundleNotOnNode(const std::string& node_id, const std::string& group_id,
                       uint32_t bundle_index) override;

 private:
  void SchedulingLoop();
  void LivenessLoop();
  // Marks the nodes DEAD and places their groups again; tells their jobs.
  void DeclareDead(const std::vector<std::string>& dead) ABSL_LOCKS_EXCLUDED(state_->mu);
  // Logs and counts what a liveness check saw beyond deaths.
  void ReportLiveness(const LivenessVerdict& verdict);
  void CommitterLoop();
  // `op` with its request id made this head's (Start's epoch first): a
  // raylet remembers the answers to ids it has seen, and a head restored
  // from the store numbers its groups' commit attempts from where the
  // records were, so an id of its own could be one an earlier head used,
  // and be answered with that head's result, doing nothing.
  v1::BundleOp OfThisHead(v1::BundleOp op) const;
  // Sends a group's two-phase commit through the batcher; the answers
  // advance it (AfterPrepares, then FinishCommit or FailCommit). Each
  // returns the state sequence the batcher makes durable for its call.
  void StartCommit(CommitTask task);
  uint64_t AfterPrepares(const std::shared_ptr<TwoPhaseCommit>& commit)
      ABSL_LOCKS_EXCLUDED(state_->mu);
  // Cancels every node of a failed commit, then finishes it.
  uint64_t FailCommit(const TwoPhaseCommit& commit, bool prepared) ABSL_LOCKS_EXCLUDED(state_->mu);
  // The end of a commit in the group's books; releases what a group removed
  // meanwhile held.
  uint64_t FinishCommit(const CommitTask& task, const absl::Status& result, bool prepared)
      ABSL_LOCKS_EXCLUDED(state_->mu);

  HeadState* const state_;
  RayletClients* const raylets_;
  uint64_t head_epoch_ = 0;  // set by Start, before any thread reads it
  BundleOpBatcher batcher_;

  absl::Mutex work_mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(work_mu_);
  bool work_stopping_ ABSL_GUARDED_BY(work_mu_) = false;

  absl::Mutex liveness_mu_;
  bool liveness_stopping_ ABSL_GUARDED_BY(liveness_mu_) = false;

  std::thread scheduling_thread_;
  std::thread liveness_thread_;
  std::vector<std::thread> committer_threads_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_SCHEDULER_H_
