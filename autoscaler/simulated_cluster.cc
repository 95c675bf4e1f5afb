#include "autoscaler/simulated_cluster.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "placement/bundle_placer.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

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

// A registered node as the placement core sees it: its resources less the
// accelerator_type: entries, its labels, and the accelerator type its label
// names.
NodeSpec RegisteredNodeSpec(const v1::NodeInfo& node, const ResourceSet& total) {
  NodeSpec spec;
  spec.node_id = node.node_id();
  spec.resources = WithoutAcceleratorTypes(total);
  spec.labels = Labels(node.labels().begin(), node.labels().end());
  if (auto type = spec.labels.find(std::string(kAcceleratorTypeLabel)); type != spec.labels.end()) {
    spec.accelerator_type = type->second;
  }
  return spec;
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

bool Placed(const absl::StatusOr<PlacementDecision>& decision) {
  return decision.ok() && decision->outcome == PlacementOutcome::kPlaced;
}

}  // namespace

void SimulatedCluster::AddRegisteredNode(const v1::NodeInfo& node) {
  absl::StatusOr<ResourceSet> total = ResourceSetFromProto(node.total(), "total");
  absl::StatusOr<ResourceSet> available = ResourceSetFromProto(node.available(), "available");
  if (!total.ok() || !available.ok()) return;
  absl::StatusOr<NodeIndex> index = table_.AddNode(RegisteredNodeSpec(node, *total));
  if (index.ok()) ReserveUsed(&table_, *index, *total, *available);
}

std::string SimulatedCluster::NextPoolNodeId(const NodePool& pool) const {
  return absl::StrCat("new:", pool.name, ":", next_id_);
}

bool SimulatedCluster::AddPoolNode(const NodePool& pool) {
  const std::string id = NextPoolNodeId(pool);
  ++next_id_;
  return table_.AddNode(PoolNodeSpec(pool, id)).ok();
}

bool SimulatedCluster::Place(const PlacementGroupSpec& spec) {
  absl::StatusOr<PlacementDecision> decision = BundlePlacer(&table_).Place(spec);
  if (!Placed(decision)) return false;
  for (const BundlePlacement& p : decision->placements) {
    receives_demand_.insert(table_.node(p.allocation.node).id);
  }
  return true;
}

uint32_t SimulatedCluster::GrowUntilPlaced(const NodePool& pool, const PlacementGroupSpec& spec,
                                           uint32_t room) {
  std::vector<std::string> ids;
  for (uint32_t k = 1; k <= room; ++k) {
    ids.push_back(NextPoolNodeId(pool));
    if (!AddPoolNode(pool)) break;
    if (Place(spec)) return k;
  }
  for (const std::string& id : ids) table_.RemoveNode(id).IgnoreError();
  return 0;
}

bool PoolNodesCouldHold(const NodePool& pool, const PlacementGroupSpec& spec) {
  NodeResourceTable table;
  for (size_t k = 0; k < spec.bundles().size(); ++k) {
    table.AddNode(PoolNodeSpec(pool, absl::StrCat("probe:", k))).IgnoreError();
  }
  return Placed(BundlePlacer(&table).Place(spec));
}

}  // namespace berth
