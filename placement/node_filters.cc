#include "placement/node_filters.h"

#include "placement/gpu_instances.h"

namespace berth {

bool LabelSelectorFilter::Passes(const FilterInput& in, NodeIndex node) const {
  const NodeResourceTable::Node& n = in.table.node(node);
  for (uint32_t b : in.bundles) {
    if (!in.spec.bundles()[b].selector.Matches(n.labels)) return false;
  }
  return true;
}

bool ResourcesFilter::Passes(const FilterInput& in, NodeIndex node) const {
  if (in.bundles.size() == 1) {
    return in.against_total ? in.table.FitsTotal(node, in.sum) : in.table.CanAllocate(node, in.sum);
  }
  const NodeResourceTable::Node& n = in.table.node(node);
  return (in.against_total ? n.total : n.available).Contains(in.sum);
}

bool GpuInstancesFilter::Passes(const FilterInput& in, NodeIndex node) const {
  if (in.bundles.size() == 1 || in.sum.Get(kGpu).IsZero()) return true;
  const NodeResourceTable::Node& n = in.table.node(node);
  GpuInstances gpus = in.against_total ? GpuInstances(n.gpus.count()) : n.gpus;
  for (uint32_t b : in.bundles) {
    if (!gpus.Allocate(in.spec.bundles()[b].resources.Get(kGpu)).ok()) return false;
  }
  return true;
}

const std::vector<const NodeFilter*>& NodeFilters() {
  static const LabelSelectorFilter kLabelSelector;
  static const ResourcesFilter kResources;
  static const GpuInstancesFilter kGpuInstances;
  static const std::vector<const NodeFilter*> kFilters = {&kLabelSelector, &kResources,
                                                          &kGpuInstances};
  return kFilters;
}

}  // namespace berth
