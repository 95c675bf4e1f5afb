// Placement core throughput: place-then-release of single-bundle and
// 8-bundle groups on heterogeneous clusters of 1k, 10k and 100k nodes.
//
//   build/bench/placement_bench --benchmark_counters_tabular=true
//
// items_per_second counts placement groups placed (and released) per second
// on one core. The cluster is half loaded, so free capacity varies by node.
// The Fragmentation* cases rank with FragmentationScorer over a small fixed
// task distribution (kTaskShapes), searching classes of identical nodes (its
// own Best) or, in the *PerNode cases, node by node (NodeScorer's Best, what
// every scorer did before classes): place-then-release of one shape, and a
// churn of all shapes where each group placed releases the one placed
// kChurnWindow groups before, so node states keep changing.
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "placement/bundle_placer.h"
#include "placement/fragmentation_scorer.h"

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
    {"", 0, 32, 128},   {"", 0, 96, 384},     {"T4", 1, 8, 32},      {"T4", 4, 48, 192},
    {"A10G", 1, 8, 32}, {"A10G", 4, 48, 192}, {"A10G", 8, 192, 768}, {"A100", 8, 96, 1152},
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
    // Topology: racks of 8 consecutive nodes, blocks of 64 (8 racks).
    spec.labels["berth.io/topology-rack"] = absl::StrCat("rack-", i / 8);
    spec.labels["berth.io/topology-block"] = absl::StrCat("block-", i / 64);
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

PlacementGroupSpec Group(int bundles, ResourceSet bundle, PlacementStrategy strategy,
                         Topology topology = {}) {
  return PlacementGroupSpec::Create(std::vector<Bundle>(bundles, Bundle{std::move(bundle), {}}),
                                    strategy, std::move(topology))
      .value();
}

void PlaceRelease(benchmark::State& state, const PlacementGroupSpec& spec,
                  NodeScorer* scorer = nullptr) {
  NodeResourceTable& table = Cluster(static_cast<int>(state.range(0)));
  BundlePlacer placer(&table, scorer);
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

constexpr double kGi = 1024.0 * 1024 * 1024;

ResourceSet Resources(double cpus, double memory_gi, double gpus) {
  return ResourceSet::Of({{kCpu, cpus}, {kMemory, memory_gi * kGi}, {kGpu, gpus}});
}

// The distribution the fragmentation cases score against, and the groups
// they place: (CPU, memory GiB, GPU, accelerator types, weight).
struct BenchShape {
  double cpus;
  double memory_gi;
  double gpus;
  const char* accelerator;  // "" for any
  double weight;
};
constexpr BenchShape kTaskShapes[] = {
    {4, 16, 1, "", 4},     {2, 8, 0.5, "", 3},    {8, 64, 4, "", 1},
    {4, 16, 1, "A10G", 2}, {2, 8, 0.25, "T4", 2},
};

std::unique_ptr<FragmentationScorer> MakeFragmentationScorer() {
  std::vector<TaskShape> shapes;
  for (const BenchShape& s : kTaskShapes) {
    shapes.push_back(
        {Quantity::FromDouble(s.cpus, "cpus").value(),
         Quantity::FromDouble(s.memory_gi * kGi, "memory").value(),
         Quantity::FromDouble(s.gpus, "gpus").value(),
         *s.accelerator == 0 ? std::vector<std::string>{} : std::vector<std::string>{s.accelerator},
         s.weight});
  }
  return FragmentationScorer::Create(std::move(shapes), {/*scarcity_weight=*/1,
                                                         /*stranding_weight=*/1})
      .value();
}

PlacementGroupSpec ShapeGroup(const BenchShape& s) {
  const std::string selector =
      *s.accelerator == 0 ? "" : absl::StrCat(kAcceleratorTypeLabel, " in (", s.accelerator, ")");
  return PlacementGroupSpec::Create({Bundle{Resources(s.cpus, s.memory_gi, s.gpus),
                                            LabelSelector::Parse(selector, "selector").value()}},
                                    PlacementStrategy::kPack)
      .value();
}

// FragmentationScorer's scores, searched node by node (NodeScorer's Best).
class PerNodeSearch : public NodeScorer {
 public:
  explicit PerNodeSearch(std::unique_ptr<FragmentationScorer> scorer)
      : scorer_(std::move(scorer)) {}
  absl::string_view name() const override { return "per-node"; }
  double Score(const NodeResourceTable& table, NodeIndex node,
               const ScoredDemand& demand) override {
    return scorer_->Score(table, node, demand);
  }

 private:
  std::unique_ptr<FragmentationScorer> scorer_;
};

std::unique_ptr<NodeScorer> MakeSearch(bool per_node) {
  if (per_node) return std::make_unique<PerNodeSearch>(MakeFragmentationScorer());
  return MakeFragmentationScorer();
}

void FragmentationPlaceRelease(benchmark::State& state, bool per_node) {
  NodeResourceTable& table = Cluster(static_cast<int>(state.range(0)));
  std::unique_ptr<NodeScorer> scorer = MakeSearch(per_node);
  BundlePlacer placer(&table, scorer.get());
  const PlacementGroupSpec spec = ShapeGroup(kTaskShapes[0]);
  // The first search indexes the cluster; the loop measures decisions.
  const PlacementDecision first = placer.Place(spec).value();
  for (const BundlePlacement& p : first.placements) table.Release(p.allocation).IgnoreError();
  PlaceRelease(state, spec, scorer.get());
}

void FragmentationChurn(benchmark::State& state, bool per_node) {
  constexpr size_t kChurnWindow = 256;
  NodeResourceTable& table = Cluster(static_cast<int>(state.range(0)));
  std::unique_ptr<NodeScorer> scorer = MakeSearch(per_node);
  BundlePlacer placer(&table, scorer.get());
  std::vector<PlacementGroupSpec> groups;
  for (const BenchShape& s : kTaskShapes) groups.push_back(ShapeGroup(s));
  std::deque<std::vector<BundlePlacement>> window;
  auto release_oldest = [&] {
    for (const BundlePlacement& p : window.front()) table.Release(p.allocation).IgnoreError();
    window.pop_front();
  };
  size_t next = 0;
  auto place_next = [&]() -> bool {
    absl::StatusOr<PlacementDecision> d = placer.Place(groups[next++ % groups.size()]);
    if (!d.ok() || d->outcome != PlacementOutcome::kPlaced) return false;
    window.push_back(std::move(d->placements));
    if (window.size() > kChurnWindow) release_oldest();
    return true;
  };
  // Fill the window first: the loop measures decisions in steady state.
  for (size_t i = 0; i < kChurnWindow; ++i) place_next();
  for (auto _ : state) {
    if (!place_next()) {
      state.SkipWithError("placement failed");
      break;
    }
  }
  while (!window.empty()) release_oldest();
  state.SetItemsProcessed(state.iterations());
}

void BM_FragmentationPack1Gpu(benchmark::State& state) { FragmentationPlaceRelease(state, false); }
void BM_FragmentationPack1GpuPerNode(benchmark::State& state) {
  FragmentationPlaceRelease(state, true);
}
void BM_FragmentationChurn(benchmark::State& state) { FragmentationChurn(state, false); }
void BM_FragmentationChurnPerNode(benchmark::State& state) { FragmentationChurn(state, true); }

void BM_Pack1Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}, {kCpu, 4}}), PlacementStrategy::kPack));
}
void BM_Pack1GpuA10G(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A10G", 0.001}}),
                            PlacementStrategy::kPack));
}
void BM_Pack1Cpu(benchmark::State& state) {
  PlaceRelease(state,
               Group(1, ResourceSet::Of({{kCpu, 2}, {kMemory, 8e9}}), PlacementStrategy::kPack));
}
void BM_StrictSpread1Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(1, ResourceSet::Of({{kGpu, 1}}), PlacementStrategy::kStrictSpread));
}
void BM_Pack8Gpu(benchmark::State& state) {
  PlaceRelease(state, Group(8, ResourceSet::Of({{kGpu, 1}, {kCpu, 8}}), PlacementStrategy::kPack));
}
void BM_StrictSpread8Gpu(benchmark::State& state) {
  PlaceRelease(state,
               Group(8, ResourceSet::Of({{kGpu, 1}, {kCpu, 8}}), PlacementStrategy::kStrictSpread));
}
void BM_StrictPack8GpuA100(benchmark::State& state) {
  PlaceRelease(state, Group(8, ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A100", 0.001}}),
                            PlacementStrategy::kStrictPack));
}

// Topology gangs (placed last: once a key's domains are indexed, every
// allocation keeps them up to date). The first decision indexes the key.
void TopologyPlaceRelease(benchmark::State& state, int bundles, Topology topology,
                          bool fragmentation) {
  NodeResourceTable& table = Cluster(static_cast<int>(state.range(0)));
  std::unique_ptr<NodeScorer> scorer = fragmentation ? MakeSearch(false) : nullptr;
  const PlacementGroupSpec spec = Group(bundles, ResourceSet::Of({{kGpu, 1}, {kCpu, 1}}),
                                        PlacementStrategy::kPack, std::move(topology));
  const PlacementDecision first = BundlePlacer(&table, scorer.get()).Place(spec).value();
  for (const BundlePlacement& p : first.placements) table.Release(p.allocation).IgnoreError();
  PlaceRelease(state, spec, scorer.get());
}
void BM_Pack64GpuRequiredBlock(benchmark::State& state) {
  TopologyPlaceRelease(state, 64, {"berth.io/topology-block", {}}, false);
}
void BM_Pack64GpuRequiredBlockFragmentation(benchmark::State& state) {
  TopologyPlaceRelease(state, 64, {"berth.io/topology-block", {}}, true);
}
void BM_Pack8GpuRequiredRack(benchmark::State& state) {
  TopologyPlaceRelease(state, 8, {"berth.io/topology-rack", {}}, false);
}
void BM_Pack16GpuPreferredRackThenBlock(benchmark::State& state) {
  TopologyPlaceRelease(state, 16, {"", {"berth.io/topology-rack", "berth.io/topology-block"}},
                       false);
}

#define BERTH_SIZES Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_Pack1Gpu)->BERTH_SIZES;
BENCHMARK(BM_Pack1GpuA10G)->BERTH_SIZES;
BENCHMARK(BM_Pack1Cpu)->BERTH_SIZES;
BENCHMARK(BM_StrictSpread1Gpu)->BERTH_SIZES;
BENCHMARK(BM_Pack8Gpu)->BERTH_SIZES;
BENCHMARK(BM_StrictSpread8Gpu)->BERTH_SIZES;
BENCHMARK(BM_StrictPack8GpuA100)->BERTH_SIZES;
BENCHMARK(BM_FragmentationPack1Gpu)->BERTH_SIZES;
BENCHMARK(BM_FragmentationChurn)->BERTH_SIZES;
// Node by node is O(nodes) per decision: 100k nodes would take minutes.
BENCHMARK(BM_FragmentationPack1GpuPerNode)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FragmentationChurnPerNode)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Pack64GpuRequiredBlock)->BERTH_SIZES;
BENCHMARK(BM_Pack64GpuRequiredBlockFragmentation)->BERTH_SIZES;
BENCHMARK(BM_Pack8GpuRequiredRack)->BERTH_SIZES;
BENCHMARK(BM_Pack16GpuPreferredRackThenBlock)->BERTH_SIZES;

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
