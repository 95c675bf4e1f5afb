#include "queueing/placer_capacity.h"

#include <utility>

#include "queueing/queue_config.h"

namespace berth {

void PlacerCapacity::Add(const std::string& gang_id, PlacementGroupSpec spec) {
  Remove(gang_id);
  gangs_.emplace(gang_id, Gang{std::move(spec), {}});
}

void PlacerCapacity::Remove(const std::string& gang_id) {
  Release(gang_id);
  unfit_.clear();  // it may key a spec of this gang
  gangs_.erase(gang_id);
}

const std::vector<BundlePlacement>& PlacerCapacity::Held(const std::string& gang_id) const {
  static const std::vector<BundlePlacement>* none = new std::vector<BundlePlacement>();
  auto it = gangs_.find(gang_id);
  return it == gangs_.end() ? *none : it->second.held;
}

ResourceSet PlacerCapacity::ChargeOf(const std::vector<BundlePlacement>& placements) const {
  ResourceSet charge;
  for (const BundlePlacement& p : placements) {
    charge.Add(p.allocation.resources).IgnoreError();
    const std::string& type = table_->node(p.allocation.node).accelerator_type;
    const Quantity gpus = p.allocation.resources.Get(kGpu);
    if (!type.empty() && !gpus.IsZero()) {
      ResourceSet typed;
      typed.Set(GpuOfTypeResource(type), gpus);
      charge.Add(typed).IgnoreError();
    }
  }
  return charge;
}

std::optional<ResourceSet> PlacerCapacity::Place(const std::string& gang_id, std::string* reason) {
  auto it = gangs_.find(gang_id);
  if (it == gangs_.end()) {
    *reason = "unknown gang";
    return std::nullopt;
  }
  Gang& g = it->second;
  if (!g.held.empty()) return ChargeOf(g.held);
  if (auto known = unfit_.find(&g.spec); known != unfit_.end()) {
    *reason = known->second;
    return std::nullopt;
  }
  ++decisions_;
  absl::StatusOr<PlacementDecision> d = BundlePlacer(table_, scorer_).Place(g.spec);
  if (!d.ok() || d->outcome != PlacementOutcome::kPlaced) {
    *reason = d.ok() ? d->reason : std::string(d.status().message());
    unfit_.emplace(&g.spec, *reason);
    return std::nullopt;
  }
  g.held = std::move(d->placements);
  return ChargeOf(g.held);
}

void PlacerCapacity::Release(const std::string& gang_id) {
  auto it = gangs_.find(gang_id);
  if (it == gangs_.end() || it->second.held.empty()) return;
  for (const BundlePlacement& p : it->second.held) table_->Release(p.allocation).IgnoreError();
  it->second.held.clear();
  unfit_.clear();
}

bool PlacerCapacity::FitsWithout(const std::string& gang_id,
                                 const std::vector<std::string>& freed) {
  auto it = gangs_.find(gang_id);
  if (it == gangs_.end()) return false;
  std::vector<const Allocation*> given_back;
  for (const std::string& id : freed) {
    auto f = gangs_.find(id);
    if (f == gangs_.end() || id == gang_id) continue;
    for (const BundlePlacement& p : f->second.held) {
      if (table_->Release(p.allocation).ok()) given_back.push_back(&p.allocation);
    }
  }
  ++decisions_;
  absl::StatusOr<PlacementDecision> d = BundlePlacer(table_, scorer_).Place(it->second.spec);
  const bool fits = d.ok() && d->outcome == PlacementOutcome::kPlaced;
  if (fits) {
    for (const BundlePlacement& p : d->placements) table_->Release(p.allocation).IgnoreError();
  }
  // Exactly what was there before: the same GPU instances included.
  for (const Allocation* a : given_back) table_->Reserve(*a).IgnoreError();
  return fits;
}

ResourceSet PlacerCapacity::Capacity() const {
  ResourceSet totals;
  for (NodeIndex i = 0; i < table_->slot_count(); ++i) {
    const NodeResourceTable::Node& n = table_->node(i);
    if (n.removed || n.state != NodeState::kAlive) continue;
    ResourceSet node;
    for (absl::string_view r : {kCpu, kGpu, kMemory}) node.Set(r, n.total.Get(r));
    if (!n.accelerator_type.empty() && !n.total.Get(kGpu).IsZero())
      node.Set(GpuOfTypeResource(n.accelerator_type), n.total.Get(kGpu));
    totals.Add(node).IgnoreError();
  }
  return totals;
}

}  // namespace berth
