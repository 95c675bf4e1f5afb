// ScalingPlanner: decides how berth-autoscaler resizes its node pools. Pure:
// the caller passes the head's view (nodes, pending demand) and the time in,
// and carries out the returned actions; no gRPC, threads or clocks.
//
// Scale up: the pending gangs are placed, in the head's order, by the real
// placement core (BundlePlacer, so strategies, selectors and accelerator
// types count exactly as on the head) on a simulated cluster: the ALIVE
// nodes with their free resources, the nodes already asked for and not yet
// registered, and as few new nodes as each gang needs from the first pool
// that can hold it within its max_nodes. A gang no pool could ever hold is
// reported as unsatisfiable and adds nothing.
//
// Scale down: a pool node that holds no bundle and would receive none of the
// pending demand for idle_timeout is drained (above min_nodes); a node the
// autoscaler drained, or the head drained as unhealthy, is removed once it
// is empty (wire/drain_reasons.h).
#ifndef BERTH_AUTOSCALER_SCALING_PLANNER_H_
#define BERTH_AUTOSCALER_SCALING_PLANNER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autoscaler/node_pool_config.h"
#include "autoscaler/pending_demand_fit.h"
#include "berth/v1/head.pb.h"

namespace berth {

struct ScalingInput {
  std::vector<v1::NodeInfo> nodes;         // ListNodes
  std::vector<v1::PendingDemand> pending;  // GetClusterStatus().pending_demand
  int64_t now_ms = 0;
};

struct ScalingPlan {
  // To carry out in order: SCALE_UP (provider), DRAIN (head), REMOVE (provider).
  std::vector<v1::AutoscalerAction> actions;
  std::vector<v1::NodePoolStatus> pools;
  std::vector<v1::UnsatisfiableDemand> unsatisfiable;
};

class ScalingPlanner {
 public:
  explicit ScalingPlanner(std::vector<NodePool> pools);

  ScalingPlan Plan(const ScalingInput& input);

  // The provider failed to carry out `action`: forget the target it set, so
  // the next pass asks again.
  void OnActionFailed(const v1::AutoscalerAction& action);

 private:
  struct PoolState {
    uint32_t target = 0;
    bool target_known = false;
    int64_t target_since_ms = 0;
  };
  // Per pool: the nodes to drain, the drained ones to remove, and how many
  // stay once the drains are done.
  struct ScaleDownChoice {
    std::map<std::string, uint32_t> keep;
    std::map<std::string, std::vector<std::string>> drain;
    std::map<std::string, std::vector<std::string>> remove;
  };

  const NodePool* PoolOf(const v1::NodeInfo& node) const;
  std::map<std::string, uint32_t> Targets() const;

  // The phases of a Plan, in order.
  std::map<std::string, uint32_t> CountRegistered(const std::vector<v1::NodeInfo>& nodes);
  std::map<std::string, uint32_t> UpdateTargets(const std::map<std::string, uint32_t>& registered,
                                                int64_t now_ms);
  void AddScaleUps(const PendingDemandFit& fit, int64_t now_ms,
                   std::vector<v1::AutoscalerAction>* actions);
  ScaleDownChoice ChooseScaleDown(const ScalingInput& input, const PendingDemandFit& fit,
                                  const std::set<std::string>& receives_demand);
  void AddDrains(const ScaleDownChoice& choice, int64_t now_ms,
                 std::vector<v1::AutoscalerAction>* actions);
  void AddRemovals(const ScaleDownChoice& choice, int64_t now_ms,
                   std::vector<v1::AutoscalerAction>* actions);
  std::vector<v1::NodePoolStatus> PoolStatuses(
      const std::map<std::string, uint32_t>& registered) const;

  std::vector<NodePool> pools_;
  std::map<std::string, PoolState> state_;        // by pool name
  std::map<std::string, int64_t> idle_since_ms_;  // by node id
  std::set<std::string> removing_;                // removed, not yet gone
};

}  // namespace berth

#endif  // BERTH_AUTOSCALER_SCALING_PLANNER_H_
