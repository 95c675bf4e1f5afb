#include "placement/node_classes.h"

#include <algorithm>

namespace berth {

void NodeClasses::Sync(const NodeResourceTable& table) {
  // A count that went back means another table at the same address.
  if (&table != table_ || table.change_count() < synced_) {
    const uint64_t next_serial = next_serial_;
    *this = NodeClasses();
    next_serial_ = next_serial;
    table_ = &table;
  }
  by_serial_.resize(table.pools().size());
  class_of_.resize(table.slot_count(), kNone);
  table.VisitChangedSince(synced_, [&](NodeIndex node) { Update(table, node); });
  synced_ = table.change_count();
}

void NodeClasses::Update(const NodeResourceTable& table, NodeIndex node) {
  const NodeResourceTable::Node& n = table.node(node);
  const bool alive = n.state == NodeState::kAlive && !n.removed;
  if (!alive) {
    if (class_of_[node] != kNone) Leave(node);
    return;
  }
  Key key = KeyOf(n);
  if (class_of_[node] != kNone) {
    // Changed and changed back since the last Sync (a trial placement, say):
    // it stays in its class, which keeps its serial.
    if (classes_[class_of_[node]].key == key) return;
    Leave(node);
  }
  Join(table, node, std::move(key));
}

NodeClasses::Key NodeClasses::KeyOf(const NodeResourceTable::Node& n) {
  Key key{n.pool, n.available, {}};
  for (uint32_t i = 0; i < n.gpus.count(); ++i) key.gpu_free.push_back(n.gpus.free(i).units());
  std::sort(key.gpu_free.begin(), key.gpu_free.end());
  return key;
}

void NodeClasses::Leave(NodeIndex node) {
  const uint32_t id = class_of_[node];
  class_of_[node] = kNone;
  Class& c = classes_[id];
  c.members.erase(node);
  if (!c.members.empty()) return;
  by_serial_[c.key.pool].erase({c.serial, id});
  by_key_.erase(c.key);
  c = Class{};
  free_ids_.push_back(id);
}

void NodeClasses::Join(const NodeResourceTable& table, NodeIndex node, Key key) {
  const NodeResourceTable::Node& n = table.node(node);
  auto [it, inserted] = by_key_.try_emplace(key, 0);
  if (inserted) {
    if (free_ids_.empty()) {
      it->second = static_cast<uint32_t>(classes_.size());
      classes_.emplace_back();
    } else {
      it->second = free_ids_.back();
      free_ids_.pop_back();
    }
    Class& c = classes_[it->second];
    c.serial = next_serial_++;
    c.key = std::move(key);
    c.gpus = n.gpus;
    by_serial_[c.key.pool].insert({c.serial, it->second});
  }
  classes_[it->second].members.insert(node);
  class_of_[node] = it->second;
}

}  // namespace berth
