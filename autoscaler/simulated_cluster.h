// SimulatedCluster: the cluster on which ScalingPlanner tries the pending
// gangs, with the head's own placement core (BundlePlacer), so strategies,
// selectors and accelerator types count exactly as they will on the head.
//
// It holds the registered ALIVE nodes with what is free on them, and nodes
// of a pool that are not registered yet (asked for, or being considered).
// A gang placed on it keeps its reservation, so the next gang sees the
// cluster as it will be. Pure: no I/O, threads or clocks.
#ifndef BERTH_AUTOSCALER_SIMULATED_CLUSTER_H_
#define BERTH_AUTOSCALER_SIMULATED_CLUSTER_H_

#include <cstdint>
#include <set>
#include <string>

#include "autoscaler/node_pool_config.h"
#include "berth/v1/head.pb.h"
#include "placement/node_resource_table.h"
#include "placement/placement_group_spec.h"

namespace berth {

class SimulatedCluster {
 public:
  // A registered node, with its free resources as they are now; a node
  // whose resources do not parse is left out.
  void AddRegisteredNode(const v1::NodeInfo& node);

  // A fresh node of `pool`, not registered yet. False if the table refused
  // it.
  bool AddPoolNode(const NodePool& pool);

  // Places `spec` on the nodes there are; true (and the reservation kept)
  // if it fits.
  bool Place(const PlacementGroupSpec& spec);

  // Adds fresh nodes of `pool`, up to `room`, until `spec` fits: returns how
  // many it took, keeping them and the placement; 0 (none kept) if `room`
  // nodes were not enough.
  uint32_t GrowUntilPlaced(const NodePool& pool, const PlacementGroupSpec& spec, uint32_t room);

  // The nodes that a placed gang uses.
  const std::set<std::string>& receives_demand() const { return receives_demand_; }

 private:
  std::string NextPoolNodeId(const NodePool& pool) const;

  NodeResourceTable table_;
  int next_id_ = 0;  // numbers the fresh nodes
  std::set<std::string> receives_demand_;
};

// Whether fresh nodes of `pool`, one per bundle, could hold `spec`: the
// pool's node shape fits the gang, whatever its max_nodes.
bool PoolNodesCouldHold(const NodePool& pool, const PlacementGroupSpec& spec);

}  // namespace berth

#endif  // BERTH_AUTOSCALER_SIMULATED_CLUSTER_H_
