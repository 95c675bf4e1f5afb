// TwoPhaseCommit: one placement group's two-phase commit with its raylets,
// advanced by the answers to its calls (the head sends them through
// BundleOpBatcher, with other groups' calls to the same nodes).
//
// Phase 1 prepares every node's bundles (each node all or nothing). A group
// on one node has one participant, so its prepare commits too: one call, no
// phase 2. If any node refuses, fails or times out, every node is told to
// cancel (a node may have prepared just before its call failed; cancelling
// is idempotent); else phase 2 commits every node. Request ids derive from
// (group, attempt, node, phase), so a retried call is applied once.
//
// Thread-safe: answers may come from several threads at once; exactly one
// answer of each phase is told it was the last.
#ifndef BERTH_SCHEDULER_TWO_PHASE_COMMIT_H_
#define BERTH_SCHEDULER_TWO_PHASE_COMMIT_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "berth/v1/raylet.pb.h"
#include "scheduler/placement_group_manager.h"

namespace berth {

class TwoPhaseCommit {
 public:
  explicit TwoPhaseCommit(CommitTask task) : task_(std::move(task)) {}

  const CommitTask& task() const { return task_; }
  bool single_node() const { return task_.nodes.size() == 1; }

  // Phase 1: node i's prepare (committing at once when single_node()).
  v1::BundleOp Prepare(size_t i) const;
  // Phase 2: node i's commit.
  v1::BundleOp Commit(size_t i) const;
  // After a failure: the release of every node's bundles.
  std::vector<CancelTask> CancelAll() const;

  // Node i's answer to its prepare (`call`: the call's status; `response`:
  // its answer when OK). True for the last answer of the phase; status()
  // then says how the phase went.
  bool OnPrepareAnswer(size_t i, const absl::Status& call,
                       const v1::PrepareBundleResourcesResponse& response);
  // Node i's answer to its commit; true for the last one.
  bool OnCommitAnswer(size_t i, const absl::Status& call);
  // OK, or the first failure (naming the node) of the phases so far.
  absl::Status status() const;

 private:
  bool Answer(absl::Status outcome, size_t* answers);

  const CommitTask task_;
  mutable absl::Mutex mu_;
  size_t prepare_answers_ ABSL_GUARDED_BY(mu_) = 0;
  size_t commit_answers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_TWO_PHASE_COMMIT_H_
