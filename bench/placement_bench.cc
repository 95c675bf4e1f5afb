// Placement core throughput: place-then-release of single-bundle and
// 8-bundle groups on heterogeneous clusters of 1k, 10k and 100k nodes.
//
//   build/bench/placement_bench --benchmark_counters_tabular=true
//
// items_per_second counts placement groups placed (and released) per second
// on one core. The cluster is half loaded, so free capacity varies by node.
#include <map>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "scheduler/bundle_placer.h"

namespace berth {
namespace {

struct NodeShape {
  const char* accelerator;
  double gpus;
  double cpus;
  double memory_gi;
};

// A mixed fleet: CPU-only nodes, T4 and A10G nodes of 1/4/8 GPUs, 8-GPU A100s.
constexpr NodeShape kShapes[] = {
    {"", 0, 32, 128},    {"", 0, 96, 384},     {"T4", 1, 8, 32},     {"T4", 4, 48, 192},
    {"A10G", 1, 8, 32},  {"A10G", 4, 48, 192}, {"A10G", 8, 192, 768}, {"A100", 8, 96, 1152},
};

std::unique_ptr<NodeResourceTable> BuildCluster(int nodes) {
  auto table = std::make_unique<NodeResourceTable>();
  std::mt19937 rng(7);
  for (int i = 0; i < nodes; ++i) {
    const NodeShape& s = kShapes[rng() % (sizeof(kShapes) / sizeof(kShapes[0]))];
    NodeSpec spec;
    spec.node_id = absl::StrCat("node-", i);
    spec.resources = ResourceSet::Of(
        {{kCpu, s.cpus}, {kGpu, s.gpus}, {kMemory, s.memory_gi * 1024 * 1024 * 1024}});
    spec.accelerator_type = s.accelerator;
    spec.labels["zone"] = absl::StrCat("zone-", i % 4);
    const NodeIndex n = table->AddNode(spec).value();
    // Background load on half the nodes.
    if (rng() % 2 == 0) {
      ResourceSet load = ResourceSet::Of({{kCpu, s.cpus / 2}});
      if (s.gpus >= 1) load.Set(kGpu, Quantity::Whole(static_cast<int64_t>(s.gpus / 2 + 0.5)));
      table->Allocate(n, load).value();
    }
  }
  return table;
}

NodeResourceTable& Cluster(int nodes) {
  static std::map<int, std::unique_ptr<NodeResourceTable>> clusters;
  auto& c = clusters[nodes];
  if (!c) c = BuildCluster(nodes);
  return *c;
}

PlacementGroupSpec Group(int bundles, ResourceSet bundle, PlacementStrategy strategy) {
  return PlacementGroupSpec::Create(std::vector<Bundle>(bundles, Bundle{std::move(bundle), {}}),
                                    strategy)
      .value();
}

void PlaceRelease(benchmark::State& state, const PlacementGroupSpec& spec) {
  NodeResourceTable& table = Cluster(static_cast<int>(state.range(0)));
  BundlePlacer placer(&table);
  for (auto _ : state) {
    absl::StatusOr<PlacementDecision> d = placer.Place(spec);
    if (!d.ok() || d->outcome != PlacementOutcome::kPlaced) {
      state.SkipWithError("placement failed");
      return;
    }
    for (const BundlePlacement& p : d->placements) {
      if (!table.Release(p.allocation).ok()) state.SkipWithError("release failed");
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bundles"] = static_cast<double>(spec.bundles().size());
}

void BM_Pack1Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}, {kCpu, 4}}), PlacementStrategy::kPack));
}
void BM_Pack1GpuA10G(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A10G", 0.001}}),
                            PlacementStrategy::kPack));
}
void BM_Pack1Cpu(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kCpu, 2}, {kMemory, 8e9}}), PlacementStrategy::kPack));
}
void BM_StrictSpread1Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}}), PlacementStrategy::kStrictSpread));
}
void BM_Pack8Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(8, ResourceSet::Of({{kGpu, 1}, {kCpu, 8}}), PlacementStrategy::kPack));
}
void BM_StrictSpread8Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(8, ResourceSet::Of({{kGpu, 1}, {kCpu, 8}}), PlacementStrategy::kStrictSpread));
}
void BM_StrictPack8GpuA100(benchmark::State& state) {
  PlaceRelease(state, Group(8, ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A100", 0.001}}),
                            PlacementStrategy::kStrictPack));
}

#define BERTH_SIZES Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_Pack1Gpu)->BERTH_SIZES;
BENCHMARK(BM_Pack1GpuA10G)->BERTH_SIZES;
BENCHMARK(BM_Pack1Cpu)->BERTH_SIZES;
BENCHMARK(BM_StrictSpread1Gpu)->BERTH_SIZES;
BENCHMARK(BM_Pack8Gpu)->BERTH_SIZES;
BENCHMARK(BM_StrictSpread8Gpu)->BERTH_SIZES;
BENCHMARK(BM_StrictPack8GpuA100)->BERTH_SIZES;

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
