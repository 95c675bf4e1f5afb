#include "placement/node_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// Mean over CPU, memory and (on GPU nodes) GPU of the fraction of the
// node's total left free once `demand` is placed.
double FreeFractionAfter(const NodeResourceTable& table, NodeIndex index,
                         const ScoredDemand& demand) {
  const NodeResourceTable::Node& node = table.node(index);
  double sum = 0;
  int counted = 0;
  for (absl::string_view name : {kCpu, kMemory, kGpu}) {
    const int64_t total = node.total.Get(name).units();
    if (total == 0) continue;
    const int64_t left = node.available.Get(name).units() - demand.sum.Get(name).units();
    sum += static_cast<double>(left) / static_cast<double>(total);
    ++counted;
  }
  return counted == 0 ? 0 : sum / counted;
}

// Workloads with more distinct demands than this are unusual; past it Best
// forgets its rankings rather than grow without bound.
constexpr size_t kMaxRankings = 4096;

}  // namespace

std::optional<NodeIndex> NodeScorer::Best(const NodeResourceTable& table,
                                          const std::vector<const NodeResourceTable::Pool*>& pools,
                                          const ScoredDemand& demand, Fits fits) {
  std::optional<std::pair<double, NodeIndex>> best;
  for (const NodeResourceTable::Pool* pool : pools) {
    VisitAscending(pool->by_free[static_cast<int>(demand.primary)], demand.primary_amount,
                   [&](NodeIndex n) {
                     if (!fits(n)) return false;
                     const double score = Score(table, n, demand);
                     if (!best || score > best->first || (score == best->first && n < best->second)) {
                       best = std::make_pair(score, n);
                     }
                     return false;
                   });
  }
  if (!best) return std::nullopt;
  return best->second;
}

double FirstFitScorer::Score(const NodeResourceTable&, NodeIndex node, const ScoredDemand&) {
  return -static_cast<double>(node);
}

double RandomScorer::Score(const NodeResourceTable&, NodeIndex, const ScoredDemand&) {
  return std::uniform_real_distribution<double>(0, 1)(rng_);
}

double WorstFitScorer::Score(const NodeResourceTable& table, NodeIndex node,
                             const ScoredDemand& demand) {
  return FreeFractionAfter(table, node, demand);
}

double BestFitScorer::Score(const NodeResourceTable& table, NodeIndex node,
                            const ScoredDemand& demand) {
  return -FreeFractionAfter(table, node, demand);
}

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
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes[", i, "].gpu: above 1 it must be whole, got ", s.gpu.ToString()));
    }
    total_weight += s.weight;
    per_instance.push_back(std::min(s.gpu.units(), Quantity::kUnitsPerWhole));
  }
  if (total_weight <= 0) return absl::InvalidArgumentError("shapes: every weight is zero");
  std::sort(per_instance.begin(), per_instance.end());
  per_instance.erase(std::unique(per_instance.begin(), per_instance.end()), per_instance.end());

  std::vector<Shape> reduced;
  PerGpu per_gpu;
  double gpus = 0;
  for (TaskShape& s : shapes) {
    per_gpu.cpu += s.weight * static_cast<double>(s.cpu.units());
    per_gpu.memory += s.weight * static_cast<double>(s.memory.units());
    gpus += s.weight * s.gpu.ToDouble();
    Shape r;
    r.cpu = s.cpu.units();
    r.memory = s.memory.units();
    const int64_t room = std::min(s.gpu.units(), Quantity::kUnitsPerWhole);
    r.threshold = std::lower_bound(per_instance.begin(), per_instance.end(), room) -
                  per_instance.begin();
    // A share needs one instance with that much room; whole GPUs need that
    // many fully free instances; a task without GPUs needs none.
    r.instances = s.gpu.IsZero() ? 0 : std::max<int64_t>(1, s.gpu.units() / Quantity::kUnitsPerWhole);
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
  return std::unique_ptr<FragmentationScorer>(
      new FragmentationScorer(std::move(reduced), std::move(per_instance), per_gpu, options));
}

const FragmentationScorer::TypeShapes& FragmentationScorer::ShapesFor(
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

void FragmentationScorer::ViewNode(const NodeResourceTable::Node& node, NodeView* view) const {
  view->cpu = node.available.Get(kCpu).units();
  view->memory = node.available.Get(kMemory).units();
  view->gpu_free.clear();
  for (uint32_t i = 0; i < node.gpus.count(); ++i) view->gpu_free.push_back(node.gpus.free(i).units());
}

double FragmentationScorer::Fragmentation(const NodeView& view, const TypeShapes& shapes) {
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
    if (per_gpu_.memory > 0) fed = std::min(fed, static_cast<double>(view.memory) / per_gpu_.memory);
    const double free_gpus = static_cast<double>(total_free) / Quantity::kUnitsPerWhole;
    fragmented += options_.stranding_weight * std::max(0.0, free_gpus - fed);
  }
  return fragmented;
}

double FragmentationScorer::Scarcity(const NodeResourceTable& table,
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
        const bool accepts = s.accelerator_types.empty() ||
                             std::binary_search(s.accelerator_types.begin(),
                                                s.accelerator_types.end(), type);
        if (accepts) pressure += s.weight * s.gpus / usable;
      }
    }
    // Scaled so that a distribution without restrictions gives 1 everywhere.
    for (auto& [type, pressure] : scarcity_) pressure *= demand > 0 ? total / demand : 0;
  }
  auto it = scarcity_.find(accelerator_type);
  return it == scarcity_.end() ? 0 : it->second;
}

double FragmentationScorer::NodeFragmentation(const NodeResourceTable& table, NodeIndex index) {
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

FragmentationScorer::Change FragmentationScorer::Evaluate(const NodeView& now, GpuInstances gpus,
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

double FragmentationScorer::ScarcityCost(const NodeResourceTable& table,
                                         const std::string& accelerator_type,
                                         const ScoredDemand& demand) {
  return options_.scarcity_weight == 0 ? 0
                                       : options_.scarcity_weight * demand.sum.Get(kGpu).ToDouble() *
                                             Scarcity(table, accelerator_type);
}

double FragmentationScorer::Score(const NodeResourceTable& table, NodeIndex index,
                                  const ScoredDemand& demand) {
  const NodeResourceTable::Node& node = table.node(index);
  const double before = NodeFragmentation(table, index);
  const Change change =
      Evaluate(now_, node.gpus, before, ShapesFor(node.accelerator_type), demand);
  return change.neg_growth - ScarcityCost(table, node.accelerator_type, demand) - change.tie;
}

FragmentationScorer::Change FragmentationScorer::ClassChange(const NodeResourceTable& table,
                                                             uint32_t id,
                                                             const ScoredDemand& demand,
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

FragmentationScorer::Ranking& FragmentationScorer::RankingFor(
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
        r.ranked.insert({-(change.neg_growth - scarcity_costs_[i] - change.tie),
                         classes_.get(id).serial, id});
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

std::optional<NodeIndex> FragmentationScorer::Best(
    const NodeResourceTable& table, const std::vector<const NodeResourceTable::Pool*>& pools,
    const ScoredDemand& demand, Fits fits) {
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
