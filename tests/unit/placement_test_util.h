// Helpers shared by the placement tests: compact cluster and group builders.
#ifndef BERTH_PLACEMENT_PLACEMENT_TEST_UTIL_H_
#define BERTH_PLACEMENT_PLACEMENT_TEST_UTIL_H_

#include <string>
#include <vector>

#include "placement/bundle_placer.h"

namespace berth::testing {

inline NodeSpec MakeNode(const std::string& id, double cpus, double gpus,
                         const std::string& accelerator = "", Labels labels = {},
                         double memory = 64e9) {
  NodeSpec s;
  s.node_id = id;
  s.resources = ResourceSet::Of({{kCpu, cpus}, {kGpu, gpus}, {kMemory, memory}});
  s.accelerator_type = accelerator;
  s.labels = std::move(labels);
  return s;
}

inline Bundle MakeBundle(ResourceSet resources, const std::string& selector = "") {
  return {std::move(resources), LabelSelector::Parse(selector, "selector").value()};
}

inline PlacementGroupSpec MakeGroup(std::vector<Bundle> bundles, PlacementStrategy strategy) {
  return PlacementGroupSpec::Create(std::move(bundles), strategy).value();
}

inline std::vector<Bundle> Repeat(const Bundle& b, int n) { return std::vector<Bundle>(n, b); }

}  // namespace berth::testing

#endif  // BERTH_PLACEMENT_PLACEMENT_TEST_UTIL_H_
