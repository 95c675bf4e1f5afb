// NodeResourceTable: every node's total and free resources, GPU instances,
// labels and state, indexed so that the placement core finds a fitting node
// without scanning the cluster.
//
// Nodes live in pools, one per accelerator type, plus one for GPU nodes of no
// stated type and one for nodes without GPUs.
// Each pool keeps its ALIVE nodes in ordered sets keyed by free and by total
// CPU, GPU and memory, so "the tightest node with at least 2 free GPUs" is a
// lower_bound and "the node with the most free GPUs" is the set's end. Only
// ALIVE nodes receive new bundles; DRAINING and DEAD nodes keep their
// allocations until released. Allocate() and Release() are exact inverses
// and either apply fully or return an error and change nothing.
#ifndef BERTH_PLACEMENT_NODE_RESOURCE_TABLE_H_
#define BERTH_PLACEMENT_NODE_RESOURCE_TABLE_H_

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/gpu_instances.h"
#include "placement/label_selector.h"
#include "placement/resource_set.h"

namespace berth {

enum class NodeState { kAlive, kDraining, kDead };
absl::string_view NodeStateName(NodeState state);

using NodeIndex = uint32_t;

// What a node offers, as it registers.
struct NodeSpec {
  std::string node_id;
  // Totals. GPU, if present, must be whole: the node's GPU instance count.
  // `accelerator_type:<T>` must not be set here; it follows accelerator_type.
  ResourceSet resources;
  Labels labels;
  // GPU model, e.g. "A10G"; adds resource `accelerator_type:<T>: 1` and label
  // `berth.io/accelerator-type=<T>`. Requires GPUs.
  std::string accelerator_type;
};

// Resources taken on one node by one bundle.
struct Allocation {
  NodeIndex node = 0;
  ResourceSet resources;       // includes the GPU total of `gpus`
  std::vector<GpuShare> gpus;  // which instances, how much of each
};

// The resources the table keeps ordered indices over.
enum class IndexedResource : int { kCpu = 0, kGpu = 1, kMemory = 2 };
inline constexpr int kNumIndexedResources = 3;
absl::string_view IndexedResourceName(IndexedResource r);

// How errors name a NodeSpec's fields: `node.resources` and so on, or as
// the caller's request names them (Under("n1"): `n1.resources`; a
// registration's totals are `total.amounts`).
struct NodeSpecFields {
  std::string node_id = "node.node_id";
  std::string resources = "node.resources";
  std::string labels = "node.labels";
  std::string accelerator_type = "node.accelerator_type";
  static NodeSpecFields Under(absl::string_view prefix);
};

class NodeResourceTable {
 public:
  using OrderedNodes = absl::btree_set<std::pair<int64_t, NodeIndex>>;

  struct Node {
    std::string id;
    NodeState state = NodeState::kAlive;
    bool removed = false;
    ResourceSet total;
    ResourceSet available;
    Labels labels;
    std::string accelerator_type;
    GpuInstances gpus;
    uint32_t pool = 0;
  };

  // The ALIVE nodes that share one value of a label key (a rack, an NVLink
  // domain), with their summed free and total indexed resources, kept up
  // to date like the pools' indices.
  struct Domain {
    std::string value;
    absl::btree_set<NodeIndex> nodes;  // ALIVE members
    std::array<int64_t, kNumIndexedResources> free{};
    std::array<int64_t, kNumIndexedResources> total{};
  };
  struct DomainIndex {
    std::vector<Domain> domains;  // in the order values were first seen
    absl::flat_hash_map<std::string, uint32_t> by_value;
  };

  struct Pool {
    std::string accelerator_type;  // "" for nodes without an accelerator type
    bool has_gpus = false;         // some node of the pool has GPU instances
    std::array<OrderedNodes, kNumIndexedResources> by_free;   // ALIVE nodes
    std::array<OrderedNodes, kNumIndexedResources> by_total;  // ALIVE nodes
  };

  // Validates and adds an ALIVE node; errors name `fields`.
  absl::StatusOr<NodeIndex> AddNode(NodeSpec spec, const NodeSpecFields& fields = {});
  absl::Status SetNodeState(absl::string_view node_id, NodeState state);
  // Forgets a node; releasing its allocations afterwards is NOT_FOUND.
  absl::Status RemoveNode(absl::string_view node_id);

  std::optional<NodeIndex> FindNode(absl::string_view node_id) const;
  const Node& node(NodeIndex index) const { return nodes_[index]; }
  size_t slot_count() const { return nodes_.size(); }
  size_t alive_count() const { return alive_count_; }
  // Advances whenever a node joins or leaves the ALIVE nodes, so a cache of
  // something derived from their capacity can tell it is stale even when a
  // node died and another joined (the count alone would not change).
  uint64_t alive_version() const { return alive_version_; }
  const std::vector<Pool>& pools() const { return pools_; }
  // The pool of GPU nodes of `accelerator_type` ("": GPU nodes of no stated
  // type), or with has_gpus false, of the nodes without GPUs.
  const Pool* FindPool(absl::string_view accelerator_type, bool has_gpus = true) const;
  // The domains of label key `key`. The first call for a key builds its
  // index (O(nodes)); afterwards it is kept up to date at O(1) per change.
  const DomainIndex& Domains(const std::string& key);
  // Whether some registered node (in any state) carries label `key`.
  bool HasLabelKey(const std::string& key) const { return label_keys_.contains(key); }
  // Whether the summed totals of ALIVE nodes cover `demand`, resource by
  // resource (a necessary condition for any placement of it).
  bool AliveTotalCovers(const ResourceSet& demand) const;
  // The summed total of one resource over ALIVE nodes (saturating).
  Quantity AliveTotal(absl::string_view name) const;

  // Whether `request` (validated: see ValidateGpuRequest) fits the node's free
  // resources now, GPU instances included.
  bool CanAllocate(NodeIndex index, const ResourceSet& request) const;
  // Whether it could fit the node's totals if the node were idle.
  bool FitsTotal(NodeIndex index, const ResourceSet& request) const;
  absl::StatusOr<Allocation> Allocate(NodeIndex index, const ResourceSet& request);
  absl::Status Release(const Allocation& allocation);
  // Withholds GPU instance `gpu` of the node from new bundles (it is
  // unhealthy), or offers it again: its free room leaves (or rejoins) the
  // node's available GPU, and while withheld what bundles release of it
  // stays out. NOT_FOUND for an unknown node or GPU.
  absl::Status SetGpuWithheld(NodeIndex index, uint32_t gpu, bool withheld);
  // Takes exactly `allocation` (its resources and GPU shares), as a head
  // restoring its state after a restart does; all or nothing.
  absl::Status Reserve(const Allocation& allocation);

  static int64_t IndexKey(const ResourceSet& set, IndexedResource r);

  // Every change to the ALIVE nodes (one joins or leaves them, or its free
  // capacity changes) advances change_count() and marks the node, so that a
  // consumer caching per-node results (a NodeScorer) catches up in
  // O(changes) rather than O(nodes).
  uint64_t change_count() const { return change_count_; }
  // Visits each node changed after `count` once, least recently changed first.
  template <typename Visit>
  void VisitChangedSince(uint64_t count, Visit&& visit) const {
    for (auto it = changes_.upper_bound({count, std::numeric_limits<NodeIndex>::max()});
         it != changes_.end(); ++it) {
      visit(it->second);
    }
  }

 private:
  void Index(NodeIndex index);
  void Unindex(NodeIndex index);
  using IndexKeys = std::array<int64_t, kNumIndexedResources>;
  static IndexKeys KeysOf(const ResourceSet& set);
  // Moves a node's free-index entries from the keys it had (`before`) to its
  // current availability's (the caller keeps the keys, not a copy of the set).
  void Reindex(NodeIndex index, const IndexKeys& before);
  // Records a change to the node (see change_count()).
  void Touch(NodeIndex index);
  // Counts an ALIVE node into (sign 1) or out of (-1) the domain indices:
  // membership, free and total (Reindex moves only the free share).
  void CountInDomains(NodeIndex index, int sign);
  void CountInDomain(const std::string& key, NodeIndex index, int sign, DomainIndex* domains);
  // The node's domain of `key` (made on first sight of its value), or
  // nullptr if the node does not carry the key.
  Domain* DomainOf(const std::string& key, NodeIndex index, DomainIndex* domains);

  std::vector<Node> nodes_;
  absl::flat_hash_map<std::string, NodeIndex> by_id_;
  std::vector<Pool> pools_;
  absl::flat_hash_map<std::pair<std::string, bool>, uint32_t> pool_by_key_;
  // Cluster-wide sums may exceed int64 (100k nodes x 1 TiB in 1/10000 bytes).
  absl::flat_hash_map<std::string, __int128> alive_total_;
  // Label keys of registered nodes, with how many carry each.
  absl::flat_hash_map<std::string, size_t> label_keys_;
  // By label key; node-based so a reference stays valid as keys are added.
  absl::node_hash_map<std::string, DomainIndex> domains_;
  size_t alive_count_ = 0;
  uint64_t alive_version_ = 0;
  // (change count at the node's last change, node): one entry per node.
  absl::btree_set<std::pair<uint64_t, NodeIndex>> changes_;
  std::vector<uint64_t> changed_at_;  // by node; 0: never changed
  uint64_t change_count_ = 0;
};

// Visits `nodes` in ascending key order starting at the first key >= `from`,
// until `visit` returns true. Returns the node it stopped at.
template <typename Visit>
std::optional<NodeIndex> VisitAscending(const NodeResourceTable::OrderedNodes& nodes, int64_t from,
                                        Visit&& visit) {
  for (auto it = nodes.lower_bound({from, 0}); it != nodes.end(); ++it) {
    if (visit(it->second)) return it->second;
  }
  return std::nullopt;
}

// Visits `nodes` from the largest key down, nodes with equal keys in
// ascending index order (so ties resolve the same way as VisitAscending),
// stopping at keys below `floor` or when `visit` returns true.
template <typename Visit>
std::optional<NodeIndex> VisitDescending(const NodeResourceTable::OrderedNodes& nodes,
                                         int64_t floor, Visit&& visit) {
  auto group_end = nodes.end();
  while (group_end != nodes.begin()) {
    const int64_t key = std::prev(group_end)->first;
    if (key < floor) break;
    auto group_begin = nodes.lower_bound({key, 0});
    for (auto it = group_begin; it != group_end; ++it) {
      if (visit(it->second)) return it->second;
    }
    group_end = group_begin;
  }
  return std::nullopt;
}

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_RESOURCE_TABLE_H_
