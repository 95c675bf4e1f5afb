#include "placement/fragmentation_scorer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "placement/gpu_instances.h"
#include "placement/node_classes.h"

namespace berth {
namespace {

// Workloads with more distinct demands than this are unusual; past it Best
// forgets its rankings rather than grow without bound.
constexpr size_t kMaxRankings = 4096;

}  // namespace

// Everything the scorer keeps between decisions; see the header for what
// it computes.
class FragmentationScorer::Impl {
 public:
  // A shape reduced to what decides whether it can use a node's GPUs.
  struct Shape {
    int64_t cpu = 0;                             // units
    int64_t memory = 0;                          // units
    size_t threshold = 0;                        // index into per_instance_
    int64_t instances = 0;                       // instances that need at least that much room
    double weight = 0;                           // normalised
    double gpus = 0;                             // GPUs the task takes
    std::vector<std::string> accelerator_types;  // sorted; empty: any
  };
  // What the shapes take per GPU, on average (units per GPU).
  struct PerGpu {
    double cpu = 0;
    double memory = 0;
  };
  // The free state of one node, as fragmentation sees it.
  struct NodeView {
    int64_t cpu = 0;
    int64_t memory = 0;
    std::vector<int64_t> gpu_free;  // units per instance
  };

  // The shapes that may run on nodes of one accelerator type; the others
  // find all of such a node's free GPU unusable.
  struct TypeShapes {
    std::vector<uint32_t> accessible;
    double inaccessible_weight = 0;
  };
  // The last fragmentation computed for a node, valid while its state is.
  struct Cached {
    NodeView view;
    double fragmentation = -1;
  };
  // What a demand does to a node: its score is neg_growth - the scarcity
  // cost - tie, in that order (computed the same way on both paths, so the
  // score comes out bit for bit the same).
  struct Change {
    bool fits = false;  // GPU shares (Evaluate) and resources (ClassChange) fit
    double neg_growth = 0;
    double tie = 0;
  };
  // A class's state as fragmentation sees it, for the class of that serial.
  struct ClassState {
    uint64_t serial = 0;
    NodeView view;
    double fragmentation = -1;  // -1: not yet computed
  };
  // What a ranking depends on: the demand and the pools searched.
  struct RankingKey {
    ResourceSet sum;
    std::vector<int64_t> bundle_gpus;  // units
    std::vector<uint32_t> pools;       // indices into the table's pools
    friend bool operator==(const RankingKey& a, const RankingKey& b) {
      return a.bundle_gpus == b.bundle_gpus && a.pools == b.pools && a.sum == b.sum;
    }
    template <typename H>
    friend H AbslHashValue(H h, const RankingKey& k) {
      return H::combine(std::move(h), k.bundle_gpus, k.pools, k.sum);
    }
  };
  // The classes that fit one demand, by score. Entries of classes that
  // have since emptied stay until a search meets them.
  struct Ranking {
    uint64_t scarcity_version = 0;  // scarcity_version_ when scored
    uint64_t seen = 0;              // classes up to this serial are in, or do not fit
    // (-score, class serial, class id): best first.
    absl::btree_set<std::tuple<double, uint64_t, uint32_t>> ranked;
  };

  Impl(std::vector<Shape> shapes, std::vector<int64_t> per_instance, PerGpu per_gpu,
       Options options)
      : shapes_(std::move(shapes)),
        per_instance_(std::move(per_instance)),
        per_gpu_(per_gpu),
        options_(options) {}
  double Score(const NodeResourceTable& table, NodeIndex node, const ScoredDemand& demand);
  std::optional<NodeIndex> Best(const NodeResourceTable& table,
                                const std::vector<const NodeResourceTable::Pool*>& pools,
                                const ScoredDemand& demand, NodeScorer::Fits fits);
  double NodeFragmentation(const NodeResourceTable& table, NodeIndex node);

  const TypeShapes& ShapesFor(const std::string& accelerator_type);
  // Fills `view` with the node's free state now.
  void ViewNode(const NodeResourceTable::Node& node, NodeView* view) const;
  double Fragmentation(const NodeView& view, const TypeShapes& shapes);
  // `demand` on a node in state `now` (its instances `gpus`) of fragmentation `before`.
  Change Evaluate(const NodeView& now, GpuInstances gpus, double before, const TypeShapes& shapes,
                  const ScoredDemand& demand);
  // P(T) per accelerator type, recomputed (a new scarcity_version_) when
  // the ALIVE nodes change.
  double Scarcity(const NodeResourceTable& table, const std::string& accelerator_type);
  // What taking `demand`'s GPUs on a node of `accelerator_type` costs.
  double ScarcityCost(const NodeResourceTable& table, const std::string& accelerator_type,
                      const ScoredDemand& demand);
  // `demand` on class `id` of classes_ (synced); `needs`: its CPU and memory.
  Change ClassChange(const NodeResourceTable& table, uint32_t id, const ScoredDemand& demand,
                     const NodeView& needs);
  // The ranking of `demand` over `pools`, brought up to date with classes_.
  Ranking& RankingFor(const NodeResourceTable& table,
                      const std::vector<const NodeResourceTable::Pool*>& pools,
                      const ScoredDemand& demand);

  std::vector<Shape> shapes_;
  std::vector<int64_t> per_instance_;  // distinct per-instance room thresholds
  PerGpu per_gpu_;
  Options options_;
  absl::flat_hash_map<std::string, TypeShapes> by_type_;
  absl::flat_hash_map<std::string, double> scarcity_;
  // The table and its alive_version() the scarcities were computed for.
  const NodeResourceTable* scarcity_table_ = nullptr;
  std::optional<uint64_t> scarcity_alive_version_;
  uint64_t scarcity_version_ = 0;
  std::vector<Cached> cache_;  // by node index
  NodeClasses classes_;
  std::vector<ClassState> class_states_;  // by class id
  absl::flat_hash_map<RankingKey, Ranking> rankings_;
  // Scratch, kept to avoid allocating per candidate.
  NodeView now_;
  NodeView after_;
  std::vector<double> scarcity_costs_;  // by pool searched
  std::vector<int64_t> sorted_free_;
  std::vector<int64_t> roomy_;
  std::vector<int64_t> stranded_;
};

absl::StatusOr<std::unique_ptr<FragmentationScorer>> FragmentationScorer::Create(
    std::vector<TaskShape> shapes, Options options) {
  for (const auto& [name, weight] : {std::pair("scarcity_weight", options.scarcity_weight),
                                     std::pair("stranding_weight", options.stranding_weight)}) {
    if (!std::isfinite(weight) || weight < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.", name, ": must be finite and >= 0, got ", weight));
    }
  }
  if (shapes.empty()) return absl::InvalidArgumentError("shapes: empty");
  double total_weight = 0;
  std::vector<int64_t> per_instance;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TaskShape& s = shapes[i];
    if (!std::isfinite(s.weight) || s.weight < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes[", i, "].weight: must be finite and >= 0, got ", s.weight));
    }
    if (s.gpu > Quantity::Whole(1) && !s.gpu.IsWhole()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes[", i, "].gpu: above 1 it must be whole, got ", s.gpu.ToString()));
    }
    total_weight += s.weight;
    per_instance.push_back(std::min(s.gpu.units(), Quantity::kUnitsPerWhole));
  }
  if (total_weight <= 0) return absl::InvalidArgumentError("shapes: every weight is zero");
  std::sort(per_instance.begin(), per_instance.end());
  per_instance.erase(std::unique(per_instance.begin(), per_instance.end()), per_instance.end());

  std::vector<Impl::Shape> reduced;
  Impl::PerGpu per_gpu;
  double gpus = 0;
  for (TaskShape& s : shapes) {
    per_gpu.cpu += s.weight * static_cast<double>(s.cpu.units());
    per_gpu.memory += s.weight * static_cast<double>(s.memory.units());
    gpus += s.weight * s.gpu.ToDouble();
    Impl::Shape r;
    r.cpu = s.cpu.units();
    r.memory = s.memory.units();
    const int64_t room = std::min(s.gpu.units(), Quantity::kUnitsPerWhole);
    r.threshold =
        std::lower_bound(per_instance.begin(), per_instance.end(), room) - per_instance.begin();
    // A share needs one instance with that much room; whole GPUs need that
    // many fully free instances; a task without GPUs needs none.
    r.instances =
        s.gpu.IsZero() ? 0 : std::max<int64_t>(1, s.gpu.units() / Quantity::kUnitsPerWhole);
    std::sort(s.accelerator_types.begin(), s.accelerator_types.end());
    r.accelerator_types = std::move(s.accelerator_types);
    r.weight = s.weight / total_weight;
    r.gpus = s.gpu.ToDouble();
    reduced.push_back(std::move(r));
  }
  if (gpus > 0) {
    per_gpu.cpu /= gpus;
    per_gpu.memory /= gpus;
  }
  return std::unique_ptr<FragmentationScorer>(new FragmentationScorer(
      std::make_unique<Impl>(std::move(reduced), std::move(per_instance), per_gpu, options)));
}

FragmentationScorer::FragmentationScorer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FragmentationScorer::~FragmentationScorer() = default;

double FragmentationScorer::Score(const NodeResourceTable& table, NodeIndex node,
                                  const ScoredDemand& demand) {
  return impl_->Score(table, node, demand);
}

std::optional<NodeIndex> FragmentationScorer::Best(
    const NodeResourceTable& table, const std::vector<const NodeResourceTable::Pool*>& pools,
    const ScoredDemand& demand, Fits fits) {
  return impl_->Best(table, pools, demand, fits);
}

double FragmentationScorer::NodeFragmentation(const NodeResourceTable& table, NodeIndex node) {
  return impl_->NodeFragmentation(table, node);
}

const FragmentationScorer::Impl::TypeShapes& FragmentationScorer::Impl::ShapesFor(
    const std::string& accelerator_type) {
  auto [it, inserted] = by_type_.try_emplace(accelerator_type);
  if (inserted) {
    for (uint32_t i = 0; i < shapes_.size(); ++i) {
      const Shape& s = shapes_[i];
      if (s.accelerator_types.empty() ||
          std::binary_search(s.accelerator_types.begin(), s.accelerator_types.end(),
                             accelerator_type)) {
        it->second.accessible.push_back(i);
      } else {
        it->second.inaccessible_weight += s.weight;
      }
    }
  }
  return it->second;
}

void FragmentationScorer::Impl::ViewNode(const NodeResourceTable::Node& node,
                                         NodeView* view) const {
  view->cpu = node.available.Get(kCpu).units();
  view->memory = node.available.Get(kMemory).units();
  view->gpu_free.clear();
  for (uint32_t i = 0; i < node.gpus.count(); ++i)
    view->gpu_free.push_back(node.gpus.free(i).units());
}

double FragmentationScorer::Impl::Fragmentation(const NodeView& view, const TypeShapes& shapes) {
  int64_t total_free = 0;
  for (int64_t f : view.gpu_free) total_free += f;
  if (total_free == 0) return 0;
  // Per threshold: instances with at least that much room, and the free
  // units of those with less (unusable by a task needing that much), in
  // one pass over the thresholds and the instances, both ascending.
  sorted_free_ = view.gpu_free;
  std::sort(sorted_free_.begin(), sorted_free_.end());
  roomy_.resize(per_instance_.size());
  stranded_.resize(per_instance_.size());
  size_t below = 0;
  int64_t below_free = 0;
  for (size_t t = 0; t < per_instance_.size(); ++t) {
    for (; below < sorted_free_.size() && sorted_free_[below] < per_instance_[t]; ++below) {
      below_free += sorted_free_[below];
    }
    roomy_[t] = static_cast<int64_t>(sorted_free_.size() - below);
    stranded_[t] = below_free;
  }
  double fragmented = shapes.inaccessible_weight * static_cast<double>(total_free);
  for (uint32_t i : shapes.accessible) {
    const Shape& s = shapes_[i];
    const bool runs =
        view.cpu >= s.cpu && view.memory >= s.memory && roomy_[s.threshold] >= s.instances;
    fragmented += s.weight * static_cast<double>(runs ? stranded_[s.threshold] : total_free);
  }
  fragmented /= Quantity::kUnitsPerWhole;
  if (options_.stranding_weight > 0) {
    // GPUs the free CPU and memory can feed at the shapes' mean ratio.
    double fed = std::numeric_limits<double>::infinity();
    if (per_gpu_.cpu > 0) fed = std::min(fed, static_cast<double>(view.cpu) / per_gpu_.cpu);
    if (per_gpu_.memory > 0)
      fed = std::min(fed, static_cast<double>(view.memory) / per_gpu_.memory);
    const double free_gpus = static_cast<double>(total_free) / Quantity::kUnitsPerWhole;
    fragmented += options_.stranding_weight * std::max(0.0, free_gpus - fed);
  }
  return fragmented;
}

double FragmentationScorer::Impl::Scarcity(const NodeResourceTable& table,
                                           const std::string& accelerator_type) {
  if (scarcity_table_ != &table || scarcity_alive_version_ != table.alive_version()) {
    scarcity_.clear();
    scarcity_table_ = &table;
    scarcity_alive_version_ = table.alive_version();
    ++scarcity_version_;
    absl::flat_hash_map<std::string, double> capacity;  // GPUs of ALIVE nodes per type
    double total = 0;
    for (const NodeResourceTable::Pool& pool : table.pools()) {
      if (!pool.has_gpus) continue;
      for (const auto& [units, node] : pool.by_total[static_cast<int>(IndexedResource::kGpu)]) {
        capacity[pool.accelerator_type] += static_cast<double>(units) / Quantity::kUnitsPerWhole;
        total += static_cast<double>(units) / Quantity::kUnitsPerWhole;
      }
    }
    double demand = 0;
    for (const Shape& s : shapes_) demand += s.weight * s.gpus;
    for (const auto& [type, gpus] : capacity) scarcity_[type] = 0;
    for (const Shape& s : shapes_) {
      // Each shape's demand, per GPU of the capacity it may use.
      double usable = total;
      if (!s.accelerator_types.empty()) {
        usable = 0;
        for (const std::string& t : s.accelerator_types) {
          if (auto it = capacity.find(t); it != capacity.end()) usable += it->second;
        }
      }
      if (usable <= 0) continue;
      for (auto& [type, pressure] : scarcity_) {
        const bool accepts =
            s.accelerator_types.empty() ||
            std::binary_search(s.accelerator_types.begin(), s.accelerator_types.end(), type);
        if (accepts) pressure += s.weight * s.gpus / usable;
      }
    }
    // Scaled so that a distribution without restrictions gives 1 everywhere.
    for (auto& [type, pressure] : scarcity_) pressure *= demand > 0 ? total / demand : 0;
  }
  auto it = scarcity_.find(accelerator_type);
  return it == scarcity_.end() ? 0 : it->second;
}

double FragmentationScorer::Impl::NodeFragmentation(const NodeResourceTable& table,
                                                    NodeIndex index) {
  const NodeResourceTable::Node& node = table.node(index);
  ViewNode(node, &now_);
  if (cache_.size() <= index) cache_.resize(table.slot_count());
  Cached& cached = cache_[index];
  if (cached.fragmentation < 0 || cached.view.cpu != now_.cpu ||
      cached.view.memory != now_.memory || cached.view.gpu_free != now_.gpu_free) {
    cached.view = now_;
    cached.fragmentation = Fragmentation(now_, ShapesFor(node.accelerator_type));
  }
  return cached.fragmentation;
}

FragmentationScorer::Impl::Change FragmentationScorer::Impl::Evaluate(const NodeView& now,
                                                                      GpuInstances gpus,
                                                                      double before,
                                                                      const TypeShapes& shapes,
                                                                      const ScoredDemand& demand) {
  // The node as it would be: the shares land where GpuInstances puts them.
  Change change;
  for (Quantity g : demand.bundle_gpus) {
    if (!gpus.Allocate(g).ok()) return change;
  }
  change.fits = true;
  after_.cpu = now.cpu - demand.sum.Get(kCpu).units();
  after_.memory = now.memory - demand.sum.Get(kMemory).units();
  after_.gpu_free.clear();
  for (uint32_t i = 0; i < gpus.count(); ++i) after_.gpu_free.push_back(gpus.free(i).units());
  change.neg_growth = -(Fragmentation(after_, shapes) - before);
  // Ties go to the node left with the least free GPU; the small factor keeps
  // packing from outweighing a real difference in the other terms.
  change.tie = 1e-7 * gpus.TotalFree().ToDouble();
  return change;
}

double FragmentationScorer::Impl::ScarcityCost(const NodeResourceTable& table,
                                               const std::string& accelerator_type,
                                               const ScoredDemand& demand) {
  return options_.scarcity_weight == 0
             ? 0
             : options_.scarcity_weight * demand.sum.Get(kGpu).ToDouble() *
                   Scarcity(table, accelerator_type);
}

double FragmentationScorer::Impl::Score(const NodeResourceTable& table, NodeIndex index,
                                        const ScoredDemand& demand) {
  const NodeResourceTable::Node& node = table.node(index);
  const double before = NodeFragmentation(table, index);
  const Change change = Evaluate(now_, node.gpus, before, ShapesFor(node.accelerator_type), demand);
  return change.neg_growth - ScarcityCost(table, node.accelerator_type, demand) - change.tie;
}

FragmentationScorer::Impl::Change FragmentationScorer::Impl::ClassChange(
    const NodeResourceTable& table, uint32_t id, const ScoredDemand& demand,
    const NodeView& needs) {
  const NodeClasses::Class& c = classes_.get(id);
  if (class_states_.size() <= id) class_states_.resize(classes_.id_limit());
  ClassState& state = class_states_[id];
  if (state.serial != c.serial) {
    state.serial = c.serial;
    state.view.cpu = c.key.available.Get(kCpu).units();
    state.view.memory = c.key.available.Get(kMemory).units();
    state.view.gpu_free = c.key.gpu_free;
    state.fragmentation = -1;
  }
  // Most classes a demand meets lack its CPU or memory: ruled out first.
  if (state.view.cpu < needs.cpu || state.view.memory < needs.memory ||
      !c.key.available.Contains(demand.sum)) {
    return {};
  }
  const TypeShapes& shapes = ShapesFor(table.pools()[c.key.pool].accelerator_type);
  if (state.fragmentation < 0) state.fragmentation = Fragmentation(state.view, shapes);
  return Evaluate(state.view, c.gpus, state.fragmentation, shapes, demand);
}

FragmentationScorer::Impl::Ranking& FragmentationScorer::Impl::RankingFor(
    const NodeResourceTable& table, const std::vector<const NodeResourceTable::Pool*>& pools,
    const ScoredDemand& demand) {
  RankingKey key{demand.sum, {}, {}};
  for (Quantity g : demand.bundle_gpus) key.bundle_gpus.push_back(g.units());
  for (const NodeResourceTable::Pool* pool : pools) {
    key.pools.push_back(static_cast<uint32_t>(pool - table.pools().data()));
  }
  if (rankings_.size() >= kMaxRankings && !rankings_.contains(key)) rankings_.clear();
  Ranking& r = rankings_[key];
  scarcity_costs_.clear();
  for (const NodeResourceTable::Pool* pool : pools) {
    scarcity_costs_.push_back(ScarcityCost(table, pool->accelerator_type, demand));
  }
  // Scores hold the scarcity costs of their time: new costs, new ranking.
  if (r.scarcity_version != scarcity_version_) r = Ranking{scarcity_version_};
  NodeView needs;
  needs.cpu = demand.sum.Get(kCpu).units();
  needs.memory = demand.sum.Get(kMemory).units();
  for (size_t i = 0; i < pools.size(); ++i) {
    classes_.VisitOpenedSince(key.pools[i], r.seen, [&](uint32_t id) {
      const Change change = ClassChange(table, id, demand, needs);
      if (change.fits) {
        r.ranked.insert(
            {-(change.neg_growth - scarcity_costs_[i] - change.tie), classes_.get(id).serial, id});
      }
    });
  }
  r.seen = classes_.last_serial();
  // Entries of emptied classes are dropped as searches meet them; this
  // bounds the ones searches do not reach.
  if (r.ranked.size() > 2 * classes_.size() + 64) {
    for (auto it = r.ranked.begin(); it != r.ranked.end();) {
      it = classes_.Holds(std::get<2>(*it), std::get<1>(*it)) ? std::next(it) : r.ranked.erase(it);
    }
  }
  return r;
}

std::optional<NodeIndex> FragmentationScorer::Impl::Best(
    const NodeResourceTable& table, const std::vector<const NodeResourceTable::Pool*>& pools,
    const ScoredDemand& demand, NodeScorer::Fits fits) {
  classes_.Sync(table);
  Ranking& r = RankingFor(table, pools, demand);
  // A class's candidate is its lowest member that `fits` takes (members
  // differ only in index and labels); among classes of equal score the
  // lowest candidate wins, so classes are tried until the score drops.
  std::optional<std::pair<double, NodeIndex>> best;
  for (auto it = r.ranked.begin(); it != r.ranked.end();) {
    const auto [neg_score, serial, id] = *it;
    if (!classes_.Holds(id, serial)) {
      it = r.ranked.erase(it);
      continue;
    }
    if (best && -neg_score < best->first) break;
    for (NodeIndex n : classes_.get(id).members) {
      if (best && n > best->second) break;
      if (fits(n)) {
        best = std::make_pair(-neg_score, n);
        break;
      }
    }
    ++it;
  }
  if (!best) return std::nullopt;
  return best->second;
}

}  // namespace berth
