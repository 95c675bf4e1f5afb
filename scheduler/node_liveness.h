// NodeLiveness: which nodes' heartbeats stopped, counting only the time in
// which the head could have seen them. Pure: the head's liveness loop
// checks it (through HeartbeatBook) with a monotonic clock; no threads or
// clocks here.
//
// The head blames no node for its own absence. A check that comes later
// than expected (the head was paused, swapped out, starved of CPU, or its
// loop held up) counts only the expected interval plus a tolerance; the
// rest is the head's stall, returned and not counted against any node.
// When most nodes are overdue at once, the head or its network is
// suspected first: no node is declared for one more liveness timeout (the
// grace), after which those still silent are. A node that really died
// during or right after a stall is therefore found within the heartbeat
// timeout plus the grace of the time the head runs again.
#ifndef BERTH_SCHEDULER_NODE_LIVENESS_H_
#define BERTH_SCHEDULER_NODE_LIVENESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace berth {

struct LivenessConfig {
  int64_t heartbeat_period_ms = 1000;
  int misses = 5;  // periods without a heartbeat before a node is DEAD

  // The liveness timeout: a node silent this long (observed) is overdue.
  int64_t timeout_ms() const { return heartbeat_period_ms * misses; }
  // How often the head checks.
  int64_t check_every_ms() const {
    return heartbeat_period_ms / 4 > 10 ? heartbeat_period_ms / 4 : 10;
  }
};

// What one check found.
struct LivenessVerdict {
  std::vector<std::string> dead;  // to declare DEAD now, sorted
  // Overdue together with most of the cluster: not declared until the
  // grace ends, sorted.
  std::vector<std::string> suspected;
  bool suspicion_began = false;  // this check began the grace
  int64_t head_stall_ms = 0;     // lateness of this check, not counted
};

class NodeLiveness {
 public:
  explicit NodeLiveness(LivenessConfig config) : config_(config) {}

  // The node was heard from (registered or heartbeat): it is overdue after
  // the timeout plus `grace_ms` of observed time.
  void Heard(const std::string& node_id, int64_t grace_ms = 0);
  // Every judged node gets `grace_ms` more, counted from now (a restarted
  // head, whose nodes must first find it again).
  void GraceAll(int64_t grace_ms);
  // Advances the observed time to `monotonic_ms` and judges every node;
  // forgets those it returns as dead.
  LivenessVerdict Check(int64_t monotonic_ms);

  const LivenessConfig& config() const { return config_; }
  int64_t observed_ms() const { return observed_ms_; }

 private:
  // The most of one check's interval that counts: beyond it, the head
  // itself was not running.
  int64_t MostCounted() const;

  const LivenessConfig config_;
  int64_t observed_ms_ = 0;
  std::optional<int64_t> last_check_monotonic_ms_;
  // Observed ms after which each judged node is overdue.
  absl::flat_hash_map<std::string, int64_t> deadline_;
  // When most nodes became overdue at once (observed ms).
  std::optional<int64_t> suspected_since_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_NODE_LIVENESS_H_
