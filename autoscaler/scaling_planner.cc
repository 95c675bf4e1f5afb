#include "autoscaler/scaling_planner.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/bundle_placer.h"
#include "placement/node_resource_table.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// "{GPU: 1} * 8 (STRICT_PACK)": runs of identical bundles counted.
std::string DemandText(const v1::PendingDemand& d) {
  std::vector<std::pair<std::string, int>> runs;
  for (const v1::Bundle& b : d.shape()) {
    std::vector<std::string> amounts;
    for (const auto& [name, amount] : b.resources().amounts()) {
      amounts.push_back(
          absl::StartsWith(name, kAcceleratorResourcePrefix)
              ? absl::StrCat("accelerator ", name.substr(kAcceleratorResourcePrefix.size()))
              : absl::StrCat(name, ": ", amount));
    }
    std::sort(amounts.begin(), amounts.end());
    std::string text = absl::StrCat("{", absl::StrJoin(amounts, ", "), "}");
    if (!runs.empty() && runs.back().first == text) {
      ++runs.back().second;
    } else {
      runs.push_back({std::move(text), 1});
    }
  }
  std::string strategy = v1::PlacementStrategy_Name(d.strategy());
  strategy = strategy.substr(std::string("PLACEMENT_STRATEGY_").size());
  return absl::StrCat(absl::StrJoin(runs, " + ",
                                    [](std::string* out, const std::pair<std::string, int>& run) {
                                      absl::StrAppend(
                                          out, run.first,
                                          run.second > 1 ? absl::StrCat(" * ", run.second) : "");
                                    }),
                      " (", strategy, ")");
}

// The node's free resources as a reservation of (total - available) on a
// fresh node: the whole GPUs and the fraction are taken separately, as a
// bundle could not ask for 2.5 GPUs.
void ReserveUsed(NodeResourceTable* table, NodeIndex index, const ResourceSet& total,
                 const ResourceSet& available) {
  ResourceSet used;
  for (const auto& [name, amount] : total.entries()) {
    const Quantity left = available.Get(name);
    if (amount > left) used.Set(name, Quantity::FromUnits(amount.units() - left.units()));
  }
  const Quantity gpus = used.Get(kGpu);
  const Quantity fraction = Quantity::FromUnits(gpus.units() % Quantity::kUnitsPerWhole);
  used.Set(kGpu, Quantity::FromUnits(gpus.units() - fraction.units()));
  if (!used.entries().empty()) table->Allocate(index, used).IgnoreError();
  if (!fraction.IsZero()) {
    ResourceSet part;
    part.Set(kGpu, fraction);
    table->Allocate(index, part).IgnoreError();
  }
}

NodeSpec PoolNodeSpec(const NodePool& pool, const std::string& id) {
  NodeSpec spec;
  spec.node_id = id;
  spec.resources = pool.resources;
  spec.labels = pool.labels;
  spec.labels[std::string(kNodePoolLabel)] = pool.name;
  spec.accelerator_type = pool.accelerator_type;
  return spec;
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

ScalingPlan ScalingPlanner::Plan(const ScalingInput& input) {
  ScalingPlan plan;
  const int64_t now = input.now_ms;

  // Registered nodes per pool (ALIVE or DRAINING, not being removed).
  std::map<std::string, uint32_t> registered;
  std::set<std::string> present;
  for (const v1::NodeInfo& node : input.nodes) {
    if (node.state() != v1::NODE_STATE_ALIVE && node.state() != v1::NODE_STATE_DRAINING) continue;
    present.insert(node.node_id());
    const NodePool* pool = PoolOf(node);
    if (pool && !removing_.count(node.node_id())) ++registered[pool->name];
  }
  for (auto it = removing_.begin(); it != removing_.end();) {
    it = present.count(*it) ? std::next(it) : removing_.erase(it);
  }

  // Targets: at least min_nodes and what is registered; a scale-up that
  // never arrived is given up after launch_timeout and asked again.
  std::map<std::string, uint32_t> launching;
  for (const NodePool& pool : pools_) {
    PoolState& s = state_[pool.name];
    const uint32_t have = registered[pool.name];
    if (!s.target_known || s.target < have) {
      s.target = have;
      s.target_known = true;
      s.target_since_ms = now;
    }
    if (s.target > have && now - s.target_since_ms >= pool.launch_timeout_ms) {
      s.target = have;
      s.target_since_ms = now;
    }
    launching[pool.name] = s.target - have;
  }

  // The simulated cluster: free resources of ALIVE nodes, plus the nodes
  // already asked for.
  NodeResourceTable table;
  for (const v1::NodeInfo& node : input.nodes) {
    if (node.state() != v1::NODE_STATE_ALIVE || removing_.count(node.node_id())) continue;
    absl::StatusOr<ResourceSet> total = ResourceSetFromProto(node.total(), "total");
    absl::StatusOr<ResourceSet> available = ResourceSetFromProto(node.available(), "available");
    if (!total.ok() || !available.ok()) continue;
    NodeSpec spec;
    spec.node_id = node.node_id();
    for (const auto& [name, amount] : total->entries()) {
      if (!absl::StartsWith(name, kAcceleratorResourcePrefix)) spec.resources.Set(name, amount);
    }
    spec.labels = Labels(node.labels().begin(), node.labels().end());
    if (auto type = spec.labels.find(std::string(kAcceleratorTypeLabel));
        type != spec.labels.end()) {
      spec.accelerator_type = type->second;
    }
    absl::StatusOr<NodeIndex> index = table.AddNode(std::move(spec));
    if (index.ok()) ReserveUsed(&table, *index, *total, *available);
  }
  int next_id = 0;
  auto add_pool_node = [&](const NodePool& pool) {
    return table.AddNode(PoolNodeSpec(pool, absl::StrCat("new:", pool.name, ":", next_id++))).ok();
  };
  for (const NodePool& pool : pools_) {
    for (uint32_t i = 0; i < launching[pool.name]; ++i) add_pool_node(pool);
  }

  // Place the pending gangs, adding nodes where they do not fit.
  BundlePlacer placer(&table);
  std::set<std::string> receives_demand;  // existing nodes a pending gang will use
  std::map<std::string, uint32_t> added;
  std::map<std::string, std::vector<std::string>> added_for;  // pool -> demand texts
  auto placed_on = [&](const PlacementDecision& d) {
    for (const BundlePlacement& p : d.placements)
      receives_demand.insert(table.node(p.allocation.node).id);
  };
  // Adds up to `room` nodes of `pool` until `spec` fits; keeps them if it does.
  auto grow_until_placed = [&](const NodePool& pool, const PlacementGroupSpec& spec,
                               uint32_t room) -> uint32_t {
    std::vector<std::string> ids;
    for (uint32_t k = 1; k <= room; ++k) {
      ids.push_back(absl::StrCat("new:", pool.name, ":", next_id));
      if (!add_pool_node(pool)) break;
      absl::StatusOr<PlacementDecision> d = placer.Place(spec);
      if (d.ok() && d->outcome == PlacementOutcome::kPlaced) {
        placed_on(*d);
        return k;
      }
    }
    for (const std::string& id : ids) table.RemoveNode(id).IgnoreError();
    return 0;
  };
  for (const v1::PendingDemand& demand : input.pending) {
    absl::StatusOr<PlacementGroupSpec> spec =
        PlacementGroupSpecFromProto(demand.shape(), demand.strategy(), /*allow_internal=*/true);
    if (!spec.ok()) continue;  // the head validated it; nothing to plan for
    for (uint32_t copy = 0; copy < std::max<uint32_t>(demand.count(), 1); ++copy) {
      absl::StatusOr<PlacementDecision> now_fits = placer.Place(*spec);
      if (now_fits.ok() && now_fits->outcome == PlacementOutcome::kPlaced) {
        placed_on(*now_fits);
        continue;
      }
      // Each new node must hold at least one bundle, so a gang never needs
      // more new nodes than it has bundles.
      const uint32_t bundles = static_cast<uint32_t>(spec->bundles().size());
      bool placed = false;
      for (const NodePool& pool : pools_) {
        const uint32_t have = state_[pool.name].target + added[pool.name];
        const uint32_t room = std::min(bundles, pool.max_nodes > have ? pool.max_nodes - have : 0u);
        if (const uint32_t k = grow_until_placed(pool, *spec, room); k > 0) {
          added[pool.name] += k;
          added_for[pool.name].push_back(DemandText(demand));
          placed = true;
          break;
        }
      }
      if (placed) continue;
      // Would a pool hold it without its max_nodes? Then it waits for room.
      std::string capped;
      for (const NodePool& pool : pools_) {
        NodeResourceTable probe_table;
        BundlePlacer probe(&probe_table);
        for (uint32_t k = 0; k < bundles; ++k) {
          probe_table.AddNode(PoolNodeSpec(pool, absl::StrCat("probe:", k))).IgnoreError();
        }
        absl::StatusOr<PlacementDecision> d = probe.Place(*spec);
        if (d.ok() && d->outcome == PlacementOutcome::kPlaced) {
          capped = pool.name;
          break;
        }
      }
      v1::UnsatisfiableDemand* u = nullptr;
      for (v1::UnsatisfiableDemand& seen : plan.unsatisfiable) {
        if (seen.strategy() == demand.strategy() && seen.shape_size() == demand.shape_size() &&
            std::equal(seen.shape().begin(), seen.shape().end(), demand.shape().begin(),
                       [](const v1::Bundle& a, const v1::Bundle& b) {
                         return a.SerializeAsString() == b.SerializeAsString();
                       })) {
          u = &seen;
        }
      }
      if (u != nullptr) continue;
      u = &plan.unsatisfiable.emplace_back();
      *u->mutable_shape() = demand.shape();
      u->set_strategy(demand.strategy());
      u->set_reason(
          capped.empty()
              ? "no node pool's node shape (resources, accelerator type, labels) can hold it"
              : absl::StrCat(
                    "pool ", capped, " could hold it but is at max_nodes (",
                    [&] {
                      for (const NodePool& p : pools_) {
                        if (p.name == capped) return p.max_nodes;
                      }
                      return 0u;
                    }(),
                    ")"));
    }
  }

  // Scale up: every pool that gained nodes, and pools below min_nodes.
  for (const NodePool& pool : pools_) {
    PoolState& s = state_[pool.name];
    const uint32_t want = std::max(s.target + added[pool.name], pool.min_nodes);
    if (want <= s.target) continue;
    v1::AutoscalerAction& a = plan.actions.emplace_back();
    a.set_kind(v1::AUTOSCALER_ACTION_KIND_SCALE_UP);
    a.set_pool(pool.name);
    a.set_target_nodes(want);
    a.set_decided_unix_ms(now);
    a.set_reason(
        added[pool.name] == 0
            ? absl::StrCat("min_nodes is ", pool.min_nodes)
            : absl::StrCat(added[pool.name], " new node(s) for ", added_for[pool.name].size(),
                           " pending gang(s): ", absl::StrJoin(added_for[pool.name], "; ")));
    s.target = want;
    s.target_since_ms = now;
  }

  // Scale down: drain nodes idle for idle_timeout, remove drained empty ones.
  std::map<std::string, uint32_t> keep;  // pool -> nodes that stay
  for (const NodePool& pool : pools_) keep[pool.name] = state_[pool.name].target;
  std::map<std::string, std::vector<std::string>> drain, remove;
  std::set<std::string> idle_now;
  for (const v1::NodeInfo& node : input.nodes) {
    const NodePool* pool = PoolOf(node);
    if (pool == nullptr || removing_.count(node.node_id())) continue;
    const bool empty = std::all_of(
        node.total().amounts().begin(), node.total().amounts().end(), [&](const auto& e) {
          if (absl::StartsWith(e.first, kAcceleratorResourcePrefix)) return true;
          auto a = node.available().amounts().find(e.first);
          return a != node.available().amounts().end() && a->second >= e.second - 1e-9;
        });
    if (node.state() == v1::NODE_STATE_DRAINING) {
      if (empty && absl::StartsWith(node.drain_reason(), kAutoscalerDrainPrefix)) {
        remove[pool->name].push_back(node.node_id());
      }
      continue;
    }
    if (node.state() != v1::NODE_STATE_ALIVE || !empty || receives_demand.count(node.node_id()) ||
        added[pool->name] > 0) {
      continue;
    }
    idle_now.insert(node.node_id());
    const int64_t since = idle_since_ms_.try_emplace(node.node_id(), now).first->second;
    if (now - since >= pool->idle_timeout_ms && keep[pool->name] > pool->min_nodes) {
      --keep[pool->name];
      drain[pool->name].push_back(node.node_id());
    }
  }
  for (auto it = idle_since_ms_.begin(); it != idle_since_ms_.end();) {
    it = idle_now.count(it->first) ? std::next(it) : idle_since_ms_.erase(it);
  }
  for (const NodePool& pool : pools_) {
    if (!drain[pool.name].empty()) {
      v1::AutoscalerAction& a = plan.actions.emplace_back();
      a.set_kind(v1::AUTOSCALER_ACTION_KIND_DRAIN);
      a.set_pool(pool.name);
      a.set_target_nodes(keep[pool.name]);
      a.set_decided_unix_ms(now);
      for (const std::string& id : drain[pool.name]) a.add_node_ids(id);
      a.set_reason(
          absl::StrCat(kAutoscalerDrainPrefix, " idle for ", pool.idle_timeout_ms / 1000, " s"));
      for (const std::string& id : drain[pool.name]) idle_since_ms_.erase(id);
    }
  }
  for (const NodePool& pool : pools_) {
    if (remove[pool.name].empty()) continue;
    PoolState& s = state_[pool.name];
    const uint32_t gone = static_cast<uint32_t>(remove[pool.name].size());
    s.target = s.target > gone ? s.target - gone : 0;
    s.target_since_ms = now;
    v1::AutoscalerAction& a = plan.actions.emplace_back();
    a.set_kind(v1::AUTOSCALER_ACTION_KIND_REMOVE);
    a.set_pool(pool.name);
    a.set_target_nodes(s.target);
    a.set_decided_unix_ms(now);
    for (const std::string& id : remove[pool.name]) {
      a.add_node_ids(id);
      removing_.insert(id);
    }
    a.set_reason("drained and empty");
  }

  for (const NodePool& pool : pools_) {
    v1::NodePoolStatus& p = plan.pools.emplace_back();
    p.set_name(pool.name);
    p.set_accelerator_type(pool.accelerator_type);
    p.set_nodes(registered[pool.name]);
    p.set_target_nodes(state_[pool.name].target);
    p.set_min_nodes(pool.min_nodes);
    p.set_max_nodes(pool.max_nodes);
  }
  return plan;
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
