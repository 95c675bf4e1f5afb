// NodeManager: the head's registry of nodes (raylets): registration,
// draining, death. Pure: the caller passes the time in and serializes
// access; no gRPC, threads or clocks.
//
// Resources live in the shared NodeResourceTable (what placement reads);
// NodeManager keeps what placement does not need: addresses, GPU instance
// details. Heartbeats and whether they stopped are the HeartbeatBook's,
// which has a lock of its own: NodeManager tells it of registrations and
// drains, and MarkDead marks a node it judged DEAD in the table.
#ifndef BERTH_SCHEDULER_NODE_MANAGER_H_
#define BERTH_SCHEDULER_NODE_MANAGER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "berth/v1/head.pb.h"
#include "placement/node_resource_table.h"
#include "scheduler/heartbeat_book.h"

namespace berth {

class NodeManager {
 public:
  static constexpr size_t kMaxLabels = 64;

  // `heartbeats` must outlive it.
  NodeManager(NodeResourceTable* table, HeartbeatBook* heartbeats)
      : table_(table), heartbeats_(heartbeats) {}

  struct Registration {
    NodeIndex index = 0;
    bool replaced_dead = false;  // a DEAD node of the same id was replaced
  };
  // Validates and registers. A retry with the same request_id is accepted
  // again; a second registration of an ALIVE or DRAINING node id is
  // ALREADY_EXISTS; a DEAD node's id registers afresh.
  absl::StatusOr<Registration> Register(const v1::RegisterNodeRequest& request, int64_t now_ms);
  // Marks DEAD a node the HeartbeatBook judged so; false if it is unknown
  // or already DEAD (nothing to do).
  bool MarkDead(const std::string& node_id);
  // Stops new bundles going to the node; its bundles stay until they move
  // (PlacementGroupManager: a job's group at its checkpoint or the
  // deadline, other groups at the deadline). Draining a DRAINING node
  // replaces its reason and deadline.
  absl::Status Drain(const v1::DrainNodeRequest& request);
  // Ends a DRAINING node's drain: ALIVE again. FAILED_PRECONDITION if it
  // does not drain, NOT_FOUND if unknown.
  absl::Status Undrain(const std::string& node_id);

  // The node's unhealthy GPUs, every one, as its raylet reports them: those
  // listed are withheld from new bundles, those no longer listed offered
  // again. Returns whether anything changed (then the caller persists the
  // node). INVALID_ARGUMENT naming the field (a GPU the node lacks, a GPU
  // twice), NOT_FOUND for an unknown node.
  absl::StatusOr<bool> SetUnhealthyGpus(
      const std::string& node_id,
      const google::protobuf::RepeatedPtrField<v1::UnhealthyGpu>& unhealthy);
  // By GPU index, the node's unhealthy GPUs; empty for a healthy or unknown node.
  const std::map<uint32_t, v1::UnhealthyGpu>& UnhealthyGpus(const std::string& node_id) const;
  // Advances whenever a node's unhealthy GPUs change.
  uint64_t gpu_health_version() const { return gpu_health_version_; }

  // The raylet address of an ALIVE or DRAINING node, or "".
  std::string Address(NodeIndex index) const;
  // The registration the node was accepted with; nullopt if unknown.
  std::optional<v1::RegisterNodeRequest> RegistrationOf(const std::string& node_id) const;
  // Why the node drains; "" if it does not or is unknown.
  std::string DrainReason(const std::string& node_id) const;
  // A drain's terms (DrainNodeRequest).
  struct DrainTerms {
    std::string reason;
    int64_t deadline_ms = 0;  // unix; 0 = none
  };
  // By node id, those of the nodes an operator drained (few): DRAINING ones,
  // and DEAD ones that drained when they died (until their id registers
  // again).
  const absl::flat_hash_map<std::string, DrainTerms>& drains() const { return drains_; }
  absl::Status ListNodes(const v1::ListNodesRequest& request,
                         v1::ListNodesResponse* response) const;

 private:
  struct NodeRecord {
    NodeIndex index = 0;
    // The RegisterNodeRequest as accepted, serialized (a tenth of the
    // parsed message's memory, read only by ListNodes and restarts),
    // without the totals and labels the table keeps and the address the
    // heartbeat book keeps.
    std::string registration;
  };

  // Withholds exactly the GPUs of `unhealthy` (checked) in the table.
  void Withhold(const std::string& node_id, NodeIndex index,
                std::map<uint32_t, v1::UnhealthyGpu> unhealthy);

  NodeResourceTable* table_;
  HeartbeatBook* heartbeats_;
  // By node id. Node-based: a record is large, and a flat table's empty
  // slots would cost as much as a third of the records.
  absl::node_hash_map<std::string, NodeRecord> nodes_;
  absl::flat_hash_map<std::string, DrainTerms> drains_;
  // By node id, the nodes with unhealthy GPUs (few; also in their
  // registrations, which are what a restarted head reads).
  absl::flat_hash_map<std::string, std::map<uint32_t, v1::UnhealthyGpu>> unhealthy_;
  uint64_t gpu_health_version_ = 0;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_NODE_MANAGER_H_
