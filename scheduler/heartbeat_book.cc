#include "scheduler/heartbeat_book.h"

#include <utility>

namespace berth {

void HeartbeatBook::Registered(const std::string& node_id, std::string address, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  nodes_[node_id] = Beats{std::move(address), now_ms, 0, Standing::kAlive, ""};
  liveness_.Heard(node_id);
}

void HeartbeatBook::SetDraining(const std::string& node_id, bool draining) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.standing == Standing::kUnknown) return;
  it->second.standing = draining ? Standing::kDraining : Standing::kAlive;
}

HeartbeatBook::Standing HeartbeatBook::Heartbeat(const std::string& node_id, uint64_t sequence,
                                                 int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.standing == Standing::kUnknown) return Standing::kUnknown;
  Beats& beats = it->second;
  if (sequence > beats.sequence || sequence == 0) {
    beats.sequence = sequence;
    beats.last_ms = now_ms;
    liveness_.Heard(node_id);
  }
  return beats.standing;
}

bool HeartbeatBook::NoteHealth(const std::string& node_id, std::string health) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.health == health) return false;
  it->second.health = std::move(health);
  return true;
}

void HeartbeatBook::GraceAll(int64_t grace_ms) {
  absl::MutexLock lock(&mu_);
  liveness_.GraceAll(grace_ms);
}

LivenessVerdict HeartbeatBook::Check(int64_t monotonic_ms) {
  absl::MutexLock lock(&mu_);
  LivenessVerdict verdict = liveness_.Check(monotonic_ms);
  for (const std::string& id : verdict.dead) nodes_[id].standing = Standing::kUnknown;
  return verdict;
}

std::string HeartbeatBook::Address(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.standing == Standing::kUnknown) return "";
  return it->second.address;
}

std::optional<HeartbeatBook::Entry> HeartbeatBook::Find(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  return Entry{it->second.address, it->second.last_ms, it->second.standing};
}

}  // namespace berth
