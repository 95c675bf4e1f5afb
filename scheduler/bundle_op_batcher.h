// BundleOpBatcher: sends the head's reservation calls (prepare, commit,
// cancel) to each raylet in batches. An op for a node with no call in
// flight goes at once; while a call is in flight, later ops for that node
// queue and go together in its next ApplyBundleOps call. An idle head adds
// no delay; a busy one makes one call per node per round trip instead of one
// per group (a loopback gRPC call costs ~190 us of CPU on each end).
//
// Promises: each node's ops reach its raylet in the order they were queued,
// and each op's `done` runs exactly once, on an executor thread, in that
// order; a call that fails (after one retry: every op is idempotent by its
// request_id) fails each of its ops with the call's status. `durable` waits
// until a state sequence of the head is durable: before a call that carries
// an op queued with `durable_first` (an op may be queued, in order with what
// the head decides after it, before the decision is kept), and after the
// dones of one call, with the largest ticket they returned, if any was
// non-zero (the head makes a batch's state changes durable with one wait).
#ifndef BERTH_SCHEDULER_BUNDLE_OP_BATCHER_H_
#define BERTH_SCHEDULER_BUNDLE_OP_BATCHER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "berth/v1/raylet.pb.h"
#include "wire/raylet_clients.h"

namespace berth {

class BundleOpBatcher {
 public:
  struct Result {
    absl::Status status;
    v1::PrepareBundleResourcesResponse prepare;  // for a prepare that succeeded
  };
  // Returns a ticket for after_batch (0 = none).
  using Done = std::function<uint64_t(const Result&)>;
  using Executor = std::function<void(std::function<void()>)>;

  BundleOpBatcher(RayletClients* raylets, Executor executor, std::function<void(uint64_t)> durable,
                  size_t max_ops_per_call = 1024);

  // `done` may be empty. `durable_first` (0: none): the op is sent once
  // this sequence is durable.
  void Enqueue(const std::string& address, v1::BundleOp op, Done done, uint64_t durable_first = 0);

 private:
  struct Pending {
    v1::BundleOp op;
    Done done;
    uint64_t durable_first = 0;
  };
  struct NodeQueue {
    std::vector<Pending> ops;
    bool in_flight = false;
  };
  // Sends `address`'s queue, call after call, until it is empty.
  void Drain(const std::string& address);

  RayletClients* const raylets_;
  const Executor executor_;
  const std::function<void(uint64_t)> durable_;
  const size_t max_ops_per_call_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, NodeQueue> queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_BUNDLE_OP_BATCHER_H_
