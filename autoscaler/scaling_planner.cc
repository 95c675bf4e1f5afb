#include "autoscaler/scaling_planner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "autoscaler/simulated_cluster.h"
#include "wire/drain_reasons.h"

namespace berth {
namespace {

bool Registered(const v1::NodeInfo& node) {
  return node.state() == v1::NODE_STATE_ALIVE || node.state() == v1::NODE_STATE_DRAINING;
}

// Nothing is reserved on the node: all of its total is available.
bool HoldsNoBundle(const v1::NodeInfo& node) {
  return std::all_of(node.total().amounts().begin(), node.total().amounts().end(),
                     [&](const auto& e) {
                       if (PinnedAcceleratorType(e.first)) return true;
                       auto a = node.available().amounts().find(e.first);
                       return a != node.available().amounts().end() && a->second >= e.second - 1e-9;
                     });
}

v1::AutoscalerAction& AddAction(v1::AutoscalerActionKind kind, const NodePool& pool,
                                uint32_t target_nodes, int64_t now_ms,
                                std::vector<v1::AutoscalerAction>* actions) {
  v1::AutoscalerAction& a = actions->emplace_back();
  a.set_kind(kind);
  a.set_pool(pool.name);
  a.set_target_nodes(target_nodes);
  a.set_decided_unix_ms(now_ms);
  return a;
}

}  // namespace

ScalingPlanner::ScalingPlanner(std::vector<NodePool> pools) : pools_(std::move(pools)) {}

const NodePool* ScalingPlanner::PoolOf(const v1::NodeInfo& node) const {
  auto label = node.labels().find(std::string(kNodePoolLabel));
  if (label == node.labels().end()) return nullptr;
  for (const NodePool& pool : pools_) {
    if (pool.name == label->second) return &pool;
  }
  return nullptr;
}

std::map<std::string, uint32_t> ScalingPlanner::Targets() const {
  std::map<std::string, uint32_t> targets;
  for (const auto& [name, s] : state_) targets[name] = s.target;
  return targets;
}

ScalingPlan ScalingPlanner::Plan(const ScalingInput& input) {
  ScalingPlan plan;
  const std::map<std::string, uint32_t> registered = CountRegistered(input.nodes);
  const std::map<std::string, uint32_t> launching = UpdateTargets(registered, input.now_ms);

  SimulatedCluster cluster;
  for (const v1::NodeInfo& node : input.nodes) {
    if (node.state() == v1::NODE_STATE_ALIVE && !removing_.count(node.node_id())) {
      cluster.AddRegisteredNode(node);
    }
  }
  for (const NodePool& pool : pools_) {
    for (uint32_t i = 0; i < launching.at(pool.name); ++i) cluster.AddPoolNode(pool);
  }
  PendingDemandFit fit = FitPendingDemand(pools_, Targets(), input.pending, &cluster);

  AddScaleUps(fit, input.now_ms, &plan.actions);
  const ScaleDownChoice scale_down = ChooseScaleDown(input, fit, cluster.receives_demand());
  AddDrains(scale_down, input.now_ms, &plan.actions);
  AddRemovals(scale_down, input.now_ms, &plan.actions);
  plan.unsatisfiable = std::move(fit.unsatisfiable);
  plan.pools = PoolStatuses(registered);
  return plan;
}

// Registered nodes per pool (ALIVE or DRAINING, not being removed); a node
// being removed is forgotten once it is gone.
std::map<std::string, uint32_t> ScalingPlanner::CountRegistered(
    const std::vector<v1::NodeInfo>& nodes) {
  std::map<std::string, uint32_t> registered;
  for (const NodePool& pool : pools_) registered[pool.name] = 0;
  std::set<std::string> present;
  for (const v1::NodeInfo& node : nodes) {
    if (!Registered(node)) continue;
    present.insert(node.node_id());
    const NodePool* pool = PoolOf(node);
    if (pool && !removing_.count(node.node_id())) ++registered[pool->name];
  }
  for (auto it = removing_.begin(); it != removing_.end();) {
    it = present.count(*it) ? std::next(it) : removing_.erase(it);
  }
  return registered;
}

// Targets: at least what is registered; a scale-up that never arrived is
// given up after launch_timeout and asked again. Returns the nodes each
// pool was asked for and has not yet registered.
std::map<std::string, uint32_t> ScalingPlanner::UpdateTargets(
    const std::map<std::string, uint32_t>& registered, int64_t now_ms) {
  std::map<std::string, uint32_t> launching;
  for (const NodePool& pool : pools_) {
    PoolState& s = state_[pool.name];
    const uint32_t have = registered.at(pool.name);
    if (!s.target_known || s.target < have) {
      s.target = have;
      s.target_known = true;
      s.target_since_ms = now_ms;
    }
    if (s.target > have && now_ms - s.target_since_ms >= pool.launch_timeout_ms) {
      s.target = have;
      s.target_since_ms = now_ms;
    }
    launching[pool.name] = s.target - have;
  }
  return launching;
}

// Scale up: every pool that gained nodes, and pools below min_nodes.
void ScalingPlanner::AddScaleUps(const PendingDemandFit& fit, int64_t now_ms,
                                 std::vector<v1::AutoscalerAction>* actions) {
  for (const NodePool& pool : pools_) {
    PoolState& s = state_[pool.name];
    const uint32_t added = fit.added.at(pool.name);
    const uint32_t want = std::max(s.target + added, pool.min_nodes);
    if (want <= s.target) continue;
    AddAction(v1::AUTOSCALER_ACTION_KIND_SCALE_UP, pool, want, now_ms, actions)
        .set_reason(added == 0
                        ? absl::StrCat("min_nodes is ", pool.min_nodes)
                        : absl::StrCat(added, " new node(s) for ",
                                       fit.added_for.at(pool.name).size(), " pending gang(s): ",
                                       absl::StrJoin(fit.added_for.at(pool.name), "; ")));
    s.target = want;
    s.target_since_ms = now_ms;
  }
}

// A pool node that holds no bundle is idle unless pending demand will use
// it or its pool is growing; one idle for idle_timeout is drained while its
// pool keeps more than min_nodes. A node the autoscaler drained, or the
// head as unhealthy, is removed once it is empty (pending demand or
// min_nodes then bring a replacement).
ScalingPlanner::ScaleDownChoice ScalingPlanner::ChooseScaleDown(
    const ScalingInput& input, const PendingDemandFit& fit,
    const std::set<std::string>& receives_demand) {
  ScaleDownChoice choice;
  for (const NodePool& pool : pools_) choice.keep[pool.name] = state_[pool.name].target;
  std::set<std::string> idle_now;
  for (const v1::NodeInfo& node : input.nodes) {
    const NodePool* pool = PoolOf(node);
    if (pool == nullptr || removing_.count(node.node_id())) continue;
    const bool empty = HoldsNoBundle(node);
    if (node.state() == v1::NODE_STATE_DRAINING) {
      if (empty && (absl::StartsWith(node.drain_reason(), kAutoscalerDrainPrefix) ||
                    absl::StartsWith(node.drain_reason(), kHealthDrainPrefix))) {
        choice.remove[pool->name].push_back(node.node_id());
      }
      continue;
    }
    if (node.state() != v1::NODE_STATE_ALIVE || !empty || receives_demand.count(node.node_id()) ||
        fit.added.at(pool->name) > 0) {
      continue;
    }
    idle_now.insert(node.node_id());
    const int64_t since = idle_since_ms_.try_emplace(node.node_id(), input.now_ms).first->second;
    if (input.now_ms - since >= pool->idle_timeout_ms &&
        choice.keep[pool->name] > pool->min_nodes) {
      --choice.keep[pool->name];
      choice.drain[pool->name].push_back(node.node_id());
    }
  }
  for (auto it = idle_since_ms_.begin(); it != idle_since_ms_.end();) {
    it = idle_now.count(it->first) ? std::next(it) : idle_since_ms_.erase(it);
  }
  return choice;
}

void ScalingPlanner::AddDrains(const ScaleDownChoice& choice, int64_t now_ms,
                               std::vector<v1::AutoscalerAction>* actions) {
  for (const NodePool& pool : pools_) {
    auto drain = choice.drain.find(pool.name);
    if (drain == choice.drain.end()) continue;
    v1::AutoscalerAction& a = AddAction(v1::AUTOSCALER_ACTION_KIND_DRAIN, pool,
                                        choice.keep.at(pool.name), now_ms, actions);
    for (const std::string& id : drain->second) a.add_node_ids(id);
    a.set_reason(
        absl::StrCat(kAutoscalerDrainPrefix, " idle for ", pool.idle_timeout_ms / 1000, " s"));
    for (const std::string& id : drain->second) idle_since_ms_.erase(id);
  }
}

void ScalingPlanner::AddRemovals(const ScaleDownChoice& choice, int64_t now_ms,
                                 std::vector<v1::AutoscalerAction>* actions) {
  for (const NodePool& pool : pools_) {
    auto remove = choice.remove.find(pool.name);
    if (remove == choice.remove.end()) continue;
    PoolState& s = state_[pool.name];
    const uint32_t gone = static_cast<uint32_t>(remove->second.size());
    s.target = s.target > gone ? s.target - gone : 0;
    s.target_since_ms = now_ms;
    v1::AutoscalerAction& a =
        AddAction(v1::AUTOSCALER_ACTION_KIND_REMOVE, pool, s.target, now_ms, actions);
    for (const std::string& id : remove->second) {
      a.add_node_ids(id);
      removing_.insert(id);
    }
    a.set_reason("drained and empty");
  }
}

std::vector<v1::NodePoolStatus> ScalingPlanner::PoolStatuses(
    const std::map<std::string, uint32_t>& registered) const {
  std::vector<v1::NodePoolStatus> statuses;
  for (const NodePool& pool : pools_) {
    v1::NodePoolStatus& p = statuses.emplace_back();
    p.set_name(pool.name);
    p.set_accelerator_type(pool.accelerator_type);
    p.set_nodes(registered.at(pool.name));
    p.set_target_nodes(state_.at(pool.name).target);
    p.set_min_nodes(pool.min_nodes);
    p.set_max_nodes(pool.max_nodes);
  }
  return statuses;
}

void ScalingPlanner::OnActionFailed(const v1::AutoscalerAction& action) {
  if (action.kind() == v1::AUTOSCALER_ACTION_KIND_SCALE_UP)
    state_[action.pool()].target_known = false;
  if (action.kind() == v1::AUTOSCALER_ACTION_KIND_REMOVE) {
    for (const std::string& id : action.node_ids()) removing_.erase(id);
    state_[action.pool()].target_known = false;
  }
}

}  // namespace berth
