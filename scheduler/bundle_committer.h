// BundleCommitter: runs one two-phase commit with the raylets.
//
// Phase 1 prepares every node's bundles in parallel (each node all or
// nothing); if any node refuses, fails or times out, every node that did
// prepare is told to cancel and the commit fails. Phase 2 commits every
// node. A group on a single node has one participant, so its prepare
// commits too (one call instead of two). Request ids derive from (group,
// attempt, node, phase), so a retried RPC is idempotent on the raylet.
#ifndef BERTH_SCHEDULER_BUNDLE_COMMITTER_H_
#define BERTH_SCHEDULER_BUNDLE_COMMITTER_H_

#include <functional>

#include "absl/status/status.h"
#include "scheduler/placement_group_manager.h"
#include "scheduler/raylet_clients.h"

namespace berth {

class BundleCommitter {
 public:
  explicit BundleCommitter(RayletClients* raylets) : raylets_(raylets) {}

  // Runs `task`; calls `on_prepared` once every node has prepared.
  absl::Status Run(const CommitTask& task, const std::function<void()>& on_prepared);
  // Best-effort release of bundles on one raylet (one retry).
  void Cancel(const CancelTask& task);

  // The pieces of Run, for the head's batched path (bundle_op_batcher.h),
  // which sends a single-node group's prepare-and-commit with other groups'.
  // The prepare of `node`'s bundles (committing too if the group has no
  // other node).
  static v1::PrepareBundleResourcesRequest PrepareRequest(const CommitTask& task, const NodeBundles& node);
  // OK if the node prepared; else why not, naming the node.
  static absl::Status PrepareOutcome(const NodeBundles& node,
                                     const absl::StatusOr<v1::PrepareBundleResourcesResponse>& response);
  // The release of `node`'s bundles after a failed commit.
  static CancelTask CancelAfterFailure(const CommitTask& task, const NodeBundles& node);

 private:
  RayletClients* raylets_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_BUNDLE_COMMITTER_H_
