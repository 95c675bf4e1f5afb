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

 private:
  RayletClients* raylets_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_BUNDLE_COMMITTER_H_
