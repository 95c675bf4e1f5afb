// HeadConnection: the raylet's side of the head's NodeService
// (proto/berth/v1/head.proto).
//
// One background thread registers the node, retrying with exponential
// backoff (100 ms doubling to 2 s) until the head accepts, then heartbeats
// every heartbeat_interval_ms the head asked for, and registers again
// whenever the head answers reregister_required. Another thread reports
// worker exits, in order, each until the head takes it (a head that is away
// gets them when it answers again; none is dropped but those it refuses as
// invalid, and those still queued when a shutdown's flush time ends).
// Every call carries a deadline (2 s), so shutdown never waits on a silent
// head for longer than one call past its flush time.
#ifndef BERTH_RAYLET_HEAD_CONNECTION_H_
#define BERTH_RAYLET_HEAD_CONNECTION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "auth/head_epoch.h"
#include "berth/v1/head.grpc.pb.h"
#include "grpcpp/channel.h"
#include "placement/resource_set.h"

namespace berth {

class HeadConnection {
 public:
  struct Options {
    std::string node_id;
    absl::Duration rpc_timeout = absl::Seconds(2);
    absl::Duration initial_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(2);
    std::string cluster_token;  // attached to every call; empty = none
    // Told the epoch of each head that answers (not owned; null: none).
    HeadEpochFence* fence = nullptr;
  };
  // What the connection reports, supplied by the raylet. Called on the
  // connection's thread.
  struct Callbacks {
    // The registration to send (request_id is filled in here).
    std::function<v1::RegisterNodeRequest()> registration;
    // Resources no bundle holds, for heartbeats.
    std::function<ResourceSet()> available;
    std::function<uint32_t()> running_workers;
    // After each accepted registration (held_bundles to restore).
    std::function<void(const v1::RegisterNodeResponse&)> on_registered;
    // Held bundles the raylet could not restore, sent with heartbeats;
    // `unrestored_acknowledged` gets those of a heartbeat the head took.
    // Either may be empty.
    std::function<std::vector<v1::BundleKey>()> unrestored;
    std::function<void(const std::vector<v1::BundleKey>&)> unrestored_acknowledged;
    // Fills in the node's health (unhealthy GPUs, a failed health check)
    // for a heartbeat; may be empty.
    std::function<void(v1::HeartbeatRequest*)> health;
  };

  HeadConnection(std::shared_ptr<grpc::Channel> channel, Options options);
  // Shutdown(0) if still running.
  ~HeadConnection();
  HeadConnection(const HeadConnection&) = delete;
  HeadConnection& operator=(const HeadConnection&) = delete;

  // Starts registering and heartbeating in the background. Call once.
  void Start(Callbacks callbacks);
  // Sends the next heartbeat now rather than at its time (what it reports
  // changed: the node's health); never blocks.
  void HeartbeatNow();
  // Queues a worker's final status for ReportWorkerExit; never blocks.
  void ReportWorkerExit(const v1::WorkerStatus& status);
  // Stops registering and heartbeating at once, then keeps sending queued
  // exit reports for at most `flush_timeout`, then stops. Idempotent.
  void Shutdown(absl::Duration flush_timeout);

  bool registered() const;

 private:
  void SessionLoop();
  void ReportLoop();
  // True once the head accepted; sets the heartbeat interval it asked for.
  bool Register(absl::Duration* heartbeat_interval);
  // Returns false if the head wants the node to register again.
  bool Heartbeat();
  // Waits up to `d` or until stopping; false when stopping.
  bool SleepUnlessStopping(absl::Duration d);
  // As SleepUnlessStopping, and ends early at HeartbeatNow.
  bool SleepUntilHeartbeat(absl::Duration d);
  // Waits up to `d`, or until a shutdown's flush time is over; false then.
  bool SleepWhileFlushing(absl::Duration d);

  const Options options_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
  Callbacks callbacks_;
  const std::string process_token_;  // makes request ids unique across raylet restarts
  // Session thread only.
  uint64_t registration_attempt_ = 0;
  uint64_t heartbeat_sequence_;
  std::string last_failure_;  // logged once, not on every retry

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_now_ ABSL_GUARDED_BY(mu_) = false;  // HeartbeatNow's
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::WorkerStatus> exits_ ABSL_GUARDED_BY(mu_);
  absl::Time flush_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread session_;
  std::thread reporter_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_HEAD_CONNECTION_H_
