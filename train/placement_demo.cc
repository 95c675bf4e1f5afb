// The main job, for now: builds a simulated heterogeneous GPU cluster, turns
// the seed examples (and a few more groups) into placement groups through the
// train layer, places them with the placement core and prints where every
// bundle went. Later issues replace it with a real local cluster.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "placement/bundle_placer.h"
#include "train/scaling_config.h"

namespace berth {
namespace {

constexpr double kGi = 1024.0 * 1024 * 1024;

void AddNodes(NodeResourceTable& table, const std::string& prefix, int count, double cpus,
              double memory_gi, double gpus, const std::string& accelerator) {
  for (int i = 0; i < count; ++i) {
    NodeSpec spec;
    spec.node_id = count == 1 ? prefix : absl::StrFormat("%s-%02d", prefix, i);
    spec.resources = ResourceSet::Of({{kCpu, cpus}, {kMemory, memory_gi * kGi}, {kGpu, gpus}});
    spec.accelerator_type = accelerator;
    spec.labels["zone"] = i % 2 == 0 ? "us-east-1a" : "us-east-1b";
    table.AddNode(spec).value();
  }
}

std::string ShownResources(const ResourceSet& set) {
  return WithoutAcceleratorTypes(set).ToString();
}

// Places one group and prints the outcome; returns its placements.
std::vector<BundlePlacement> Run(NodeResourceTable& table, const std::string& title,
                                 const absl::StatusOr<PlacementGroupSpec>& spec) {
  std::printf("\n== %s\n", title.c_str());
  if (!spec.ok()) {
    std::printf("   rejected: %s\n", std::string(spec.status().message()).c_str());
    return {};
  }
  BundlePlacer placer(&table);
  absl::StatusOr<PlacementDecision> d = placer.Place(*spec);
  if (!d.ok()) {
    std::printf("   error: %s\n", std::string(d.status().message()).c_str());
    return {};
  }
  std::printf("   %s, %zu bundles: %s\n",
              std::string(PlacementStrategyName(spec->strategy())).c_str(), spec->bundles().size(),
              std::string(PlacementOutcomeName(d->outcome)).c_str());
  if (d->outcome != PlacementOutcome::kPlaced) {
    std::printf("   reason: %s\n", PlacementReasonText(d->reason).c_str());
    return {};
  }
  std::printf("   %-6s %-14s %-6s %-12s %s\n", "bundle", "node", "accel", "GPU ids", "resources");
  for (const BundlePlacement& p : d->placements) {
    const NodeResourceTable::Node& node = table.node(p.allocation.node);
    std::printf("   %-6u %-14s %-6s %-12s %s\n", p.bundle_index, node.id.c_str(),
                node.accelerator_type.empty() ? "-" : node.accelerator_type.c_str(),
                p.allocation.gpus.empty() ? "-" : GpuIdsToString(p.allocation.gpus).c_str(),
                ShownResources(p.allocation.resources).c_str());
  }
  return d->placements;
}

void Release(NodeResourceTable& table, const std::vector<BundlePlacement>& placements) {
  for (const BundlePlacement& p : placements) table.Release(p.allocation).IgnoreError();
}

int Main() {
  NodeResourceTable table;
  AddNodes(table, "cpu", 2, 16, 64, 0, "");
  AddNodes(table, "t4", 16, 4, 16, 1, "T4");
  AddNodes(table, "a10g", 15, 8, 32, 1, "A10G");
  AddNodes(table, "a10g-bigmem", 1, 64, 256, 1, "A10G");
  AddNodes(table, "a100", 2, 96, 1024, 8, "A100");
  std::printf(
      "cluster: %zu nodes: 2 x CPU-only, 16 x T4, 16 x A10G (one with 256Gi), "
      "2 x 8-GPU A100\n",
      table.alive_count());

  ScalingConfig seed1;
  seed1.num_workers = 16;
  seed1.use_gpu = true;
  seed1.accelerator_type = "A10G";
  Release(table,
          Run(table, "seed 1: ScalingConfig(num_workers=16, use_gpu=True, accelerator_type=A10G)",
              BuildTrainPlacementGroup(seed1)));

  ScalingConfig seed2 = seed1;
  seed2.trainer_resources = {{{std::string(kMemory), 200 * kGi}}};
  Run(table,
      "seed 2: ... trainer_resources={memory: 200Gi}: rank 0 + trainer on the big-memory A10G",
      BuildTrainPlacementGroup(seed2));

  ScalingConfig pack;
  pack.num_workers = 8;
  pack.use_gpu = true;
  pack.resources_per_worker = {{{"CPU", 8}, {"GPU", 1}}};
  pack.accelerator_type = "A100";
  pack.placement_strategy = "STRICT_PACK";
  Run(table, "8 workers x {CPU: 8, GPU: 1} on A100, STRICT_PACK", BuildTrainPlacementGroup(pack));

  ScalingConfig spread;
  spread.num_workers = 4;
  spread.use_gpu = true;
  spread.accelerator_type = "T4";
  spread.placement_strategy = "STRICT_SPREAD";
  Run(table, "4 workers on T4, STRICT_SPREAD", BuildTrainPlacementGroup(spread));

  ScalingConfig fractional = spread;
  fractional.resources_per_worker = {{{"GPU", 0.25}}};
  fractional.placement_strategy = "PACK";
  Run(table, "4 workers x {GPU: 0.25} on T4, PACK: share one GPU",
      BuildTrainPlacementGroup(fractional));

  ScalingConfig wait = pack;
  Run(table, "8 more A100 workers, STRICT_PACK: takes the second A100",
      BuildTrainPlacementGroup(wait));
  Run(table, "8 more A100 workers, STRICT_PACK: both A100 nodes are busy",
      BuildTrainPlacementGroup(wait));

  ScalingConfig too_big;
  too_big.use_gpu = true;
  too_big.resources_per_worker = {{{"GPU", 8}}};
  too_big.accelerator_type = "A10G";
  Run(table, "1 worker x {GPU: 8} on A10G", BuildTrainPlacementGroup(too_big));

  ScalingConfig bad = seed1;
  bad.resources_per_worker = {{{"GPU", 1}, {"accelerator_type:A10G", 0.001}}};
  Run(table, "a user writes the internal accelerator_type: resource",
      BuildTrainPlacementGroup(bad));
  return 0;
}

}  // namespace
}  // namespace berth

int main() { return berth::Main(); }
