// FitPendingDemand: which new nodes the pending gangs need. Each gang (each
// copy of a PendingDemand, in the head's order) is placed on the simulated
// cluster as it is; one that does not fit gets as few fresh nodes as it
// needs from the first pool that can hold it within its max_nodes. A gang
// no pool can take is reported once per shape and strategy, saying whether
// a pool's max_nodes or no pool's node shape is why. Pure.
#ifndef BERTH_AUTOSCALER_PENDING_DEMAND_FIT_H_
#define BERTH_AUTOSCALER_PENDING_DEMAND_FIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoscaler/node_pool_config.h"
#include "autoscaler/simulated_cluster.h"
#include "berth/v1/head.pb.h"

namespace berth {

struct PendingDemandFit {
  std::map<std::string, uint32_t> added;  // pool -> new nodes; every pool has an entry
  // pool -> the gangs its new nodes are for, as "{GPU: 1} * 8 (STRICT_PACK)"
  std::map<std::string, std::vector<std::string>> added_for;
  std::vector<v1::UnsatisfiableDemand> unsatisfiable;
};

// `targets`: the nodes each pool has or was asked for (every pool has an
// entry); the new nodes come on top, up to the pool's max_nodes. The gangs
// placed stay placed on `cluster`, with the new nodes.
PendingDemandFit FitPendingDemand(const std::vector<NodePool>& pools,
                                  const std::map<std::string, uint32_t>& targets,
                                  const std::vector<v1::PendingDemand>& pending,
                                  SimulatedCluster* cluster);

}  // namespace berth

#endif  // BERTH_AUTOSCALER_PENDING_DEMAND_FIT_H_
