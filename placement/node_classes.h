// NodeClasses: the ALIVE nodes of a NodeResourceTable grouped into classes
// of identical pool and free state, kept in step with the table through its
// change log.
//
// Two nodes share a class when they are in the same pool and have the same
// free resources and the same free GPU shares up to the order of their
// instances. Anything that depends on a node's pool and free state alone
// (whether a demand fits the free capacity, what a NodeScorer makes of it,
// how GpuInstances would place shares there) is the same for every member,
// so it can be worked out once per class. Packing keeps most nodes either
// idle or full, so a cluster of thousands of nodes has tens of classes with
// room for a given demand (the Alibaba GPU trace: 30-70 among 50-1,000
// candidates per decision).
//
// Promises: after Sync(table), every ALIVE node of the table is in exactly
// one class, the one of its current state, and every class has at least one
// member. Sync costs O(nodes changed since the last Sync, times log); the
// first Sync, or one against another table, indexes every node. Class ids
// are reused once a class empties; a class's serial never is, so a cache
// keyed by id can tell a class from an earlier one with the same id. No
// I/O, threads or clocks.
#ifndef BERTH_PLACEMENT_NODE_CLASSES_H_
#define BERTH_PLACEMENT_NODE_CLASSES_H_

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "placement/gpu_instances.h"
#include "placement/node_resource_table.h"
#include "placement/resource_set.h"

namespace berth {

class NodeClasses {
 public:
  struct Key {
    uint32_t pool = 0;
    ResourceSet available;
    std::vector<int64_t> gpu_free;  // units per instance, ascending
    friend bool operator==(const Key& a, const Key& b) {
      return a.pool == b.pool && a.gpu_free == b.gpu_free && a.available == b.available;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.pool, k.gpu_free, k.available);
    }
  };

  struct Class {
    uint64_t serial = 0;  // 0: the id is free
    Key key;
    // The instances of the member that opened the class: the class's free
    // shares, in that node's order.
    GpuInstances gpus;
    absl::btree_set<NodeIndex> members;
  };

  // Brings the classes up to date with `table`, which must outlive the
  // next Sync (a Sync against another table starts over).
  void Sync(const NodeResourceTable& table);

  const Class& get(uint32_t id) const { return classes_[id]; }
  // Whether class `id` is still the one opened under `serial`.
  bool Holds(uint32_t id, uint64_t serial) const {
    return id < classes_.size() && classes_[id].serial == serial;
  }
  // One past the largest class id in use.
  size_t id_limit() const { return classes_.size(); }
  size_t size() const { return by_key_.size(); }

  // The serial of the newest class so far.
  uint64_t last_serial() const { return next_serial_ - 1; }
  // Visits the ids of the classes of `pool` with a serial above `serial`
  // (opened since), oldest first.
  template <typename Visit>
  void VisitOpenedSince(uint32_t pool, uint64_t serial, Visit&& visit) const {
    if (pool >= by_serial_.size()) return;
    const auto& classes = by_serial_[pool];
    for (auto it = classes.upper_bound({serial, kNone}); it != classes.end(); ++it) {
      visit(it->second);
    }
  }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  // Moves `node` to the class of its current state, or out of every class
  // once it is no longer ALIVE.
  void Update(const NodeResourceTable& table, NodeIndex node);
  void Leave(NodeIndex node);
  // `key` is KeyOf(the node), which Update has made already.
  void Join(const NodeResourceTable& table, NodeIndex node, Key key);
  static Key KeyOf(const NodeResourceTable::Node& n);

  const NodeResourceTable* table_ = nullptr;
  uint64_t synced_ = 0;  // the table's change count at the last Sync
  uint64_t next_serial_ = 1;
  std::vector<Class> classes_;  // by id
  std::vector<uint32_t> free_ids_;
  absl::flat_hash_map<Key, uint32_t> by_key_;
  std::vector<uint32_t> class_of_;  // by node; kNone outside every class
  std::vector<absl::btree_set<std::pair<uint64_t, uint32_t>>> by_serial_;  // by pool: (serial, id)
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_CLASSES_H_
