// A GPU node pool for the autoscaler's tests: `gpus` GPUs of `type` and 32
// CPUs a node, at most `max_nodes` nodes.
#ifndef BERTH_TESTS_UNIT_AUTOSCALER_NODE_POOL_TEST_UTIL_H_
#define BERTH_TESTS_UNIT_AUTOSCALER_NODE_POOL_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>

#include "autoscaler/node_pool_config.h"

namespace berth::testing {

inline NodePool GpuPool(std::string name, std::string type, uint32_t gpus, uint32_t max_nodes = 8) {
  NodePool p;
  p.name = std::move(name);
  p.accelerator_type = std::move(type);
  p.gpus = gpus;
  p.resources.Set(kGpu, Quantity::Whole(gpus));
  p.resources.Set(kCpu, Quantity::Whole(32));
  p.max_nodes = max_nodes;
  return p;
}

}  // namespace berth::testing

#endif  // BERTH_TESTS_UNIT_AUTOSCALER_NODE_POOL_TEST_UTIL_H_
