// Node filters: the feasibility stage of the placement pipeline (as
// Nomad's feasibility checkers and kube-scheduler's Filter plugins). Each
// says whether one node can take a demand (the bundles that would go there
// together); the placer runs them in order, stops at the first that says
// no, and counts the rejection under that filter's name
// (PlacementDecision::rejected_by, the head's per-filter counters).
//
// Promises: pure and cheap (they run for every node a decision looks at);
// a node that passes every filter can take the demand, in free capacity or
// (`against_total`) in the node's totals. Adding a filter is adding its
// class and one line in NodeFilters().
#ifndef BERTH_PLACEMENT_NODE_FILTERS_H_
#define BERTH_PLACEMENT_NODE_FILTERS_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "placement/node_resource_table.h"
#include "placement/placement_group_spec.h"

namespace berth {

// What a filter looks at.
struct FilterInput {
  const NodeResourceTable& table;
  const PlacementGroupSpec& spec;
  const std::vector<uint32_t>& bundles;  // of spec, to go on one node together
  const ResourceSet& sum;                // their resources, summed
  bool against_total = false;            // could it ever (totals), not now (free)
};

class NodeFilter {
 public:
  virtual ~NodeFilter() = default;
  // Names the filter in rejection counts and metrics ("label_selector", ...).
  virtual absl::string_view name() const = 0;
  virtual bool Passes(const FilterInput& in, NodeIndex node) const = 0;
};

// Every bundle's label selector matches the node's labels.
class LabelSelectorFilter : public NodeFilter {
 public:
  absl::string_view name() const override { return "label_selector"; }
  bool Passes(const FilterInput& in, NodeIndex node) const override;
};

// The node has the summed resources (one bundle: with its GPU share on one
// instance).
class ResourcesFilter : public NodeFilter {
 public:
  absl::string_view name() const override { return "resources"; }
  bool Passes(const FilterInput& in, NodeIndex node) const override;
};

// Several bundles with GPUs: each one's share fits the node's GPU
// instances, one bundle after the other.
class GpuInstancesFilter : public NodeFilter {
 public:
  absl::string_view name() const override { return "gpu_instances"; }
  bool Passes(const FilterInput& in, NodeIndex node) const override;
};

// The filters, in the order the placer runs them.
const std::vector<const NodeFilter*>& NodeFilters();

}  // namespace berth

#endif  // BERTH_PLACEMENT_NODE_FILTERS_H_
