// HeartbeatBook: the head's record of each node's raylet address and
// heartbeats, and its judgement of their liveness (NodeLiveness), under a
// lock of its own. A heartbeat is answered and counted, liveness judged,
// and a raylet's address found for a call to it, without the head's mutex,
// so none waits behind a queue pass, a restore or a durable write: a long
// pass would otherwise hold every raylet's heartbeat, and the server's
// threads with them.
//
// Promises: thread-safe, and takes no other lock (the head calls it holding
// its own mutex). A node judged DEAD stays listed with its last heartbeat
// and is told to register again (Standing::kUnknown) until a new
// registration of its id.
#ifndef BERTH_SCHEDULER_HEARTBEAT_BOOK_H_
#define BERTH_SCHEDULER_HEARTBEAT_BOOK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/node_liveness.h"

namespace berth {

class HeartbeatBook {
 public:
  explicit HeartbeatBook(LivenessConfig config) : liveness_(config) {}

  // What a heartbeat is answered: the node must register (again), or is
  // live, and whether an operator drains it.
  enum class Standing { kUnknown, kAlive, kDraining };

  // The node registered (or was restored) at `now_ms` (unix), its raylet
  // at `address`: it is judged from now, as alive and not draining.
  void Registered(const std::string& node_id, std::string address, int64_t now_ms);
  // An operator drains the node (true) or ends its drain (false).
  void SetDraining(const std::string& node_id, bool draining);
  // Counts a heartbeat at `now_ms` (unix) unless its `sequence` is older
  // than the last counted (0: not numbered, always counted).
  Standing Heartbeat(const std::string& node_id, uint64_t sequence, int64_t now_ms);
  // Keeps `health` (what the node's heartbeats say of its health, as bytes)
  // and returns whether it differs from what its heartbeats said before
  // since it registered: only a change needs the head's mutex.
  bool NoteHealth(const std::string& node_id, std::string health);
  // Every judged node gets `grace_ms` more (a restarted head's nodes must
  // first find it again).
  void GraceAll(int64_t grace_ms);
  // Judges every node at `monotonic_ms`; those it returns as dead are told
  // to register again from now on.
  LivenessVerdict Check(int64_t monotonic_ms);
  // The raylet address of a node alive or draining, or "".
  std::string Address(const std::string& node_id) const;
  // What is known of a node, judged DEAD or not.
  struct Entry {
    std::string address;
    int64_t last_heard_ms = 0;  // its last counted heartbeat or registration, unix ms
    Standing standing = Standing::kUnknown;
  };
  std::optional<Entry> Find(const std::string& node_id) const;

  const LivenessConfig& config() const { return liveness_.config(); }

 private:
  struct Beats {
    std::string address;
    int64_t last_ms = 0;
    uint64_t sequence = 0;
    Standing standing = Standing::kAlive;
    std::string health;  // NoteHealth's
  };

  mutable absl::Mutex mu_;
  NodeLiveness liveness_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Beats> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEARTBEAT_BOOK_H_
