#include "scheduler/node_scorer.h"

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

}  // namespace

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
  // units of those with less (unusable by a task needing that much).
  roomy_.assign(per_instance_.size(), 0);
  stranded_.assign(per_instance_.size(), 0);
  for (size_t t = 0; t < per_instance_.size(); ++t) {
    for (int64_t f : view.gpu_free) {
      if (f >= per_instance_[t]) {
        ++roomy_[t];
      } else {
        stranded_[t] += f;
      }
    }
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
  if (scarcity_.empty() || scarcity_alive_count_ != table.alive_count()) {
    scarcity_.clear();
    scarcity_alive_count_ = table.alive_count();
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

double FragmentationScorer::Score(const NodeResourceTable& table, NodeIndex index,
                                  const ScoredDemand& demand) {
  const NodeResourceTable::Node& node = table.node(index);
  const double before = NodeFragmentation(table, index);
  // The node as it would be: the shares land where GpuInstances puts them.
  GpuInstances gpus = node.gpus;
  for (Quantity g : demand.bundle_gpus) gpus.Allocate(g).IgnoreError();
  after_.cpu = now_.cpu - demand.sum.Get(kCpu).units();
  after_.memory = now_.memory - demand.sum.Get(kMemory).units();
  after_.gpu_free.clear();
  for (uint32_t i = 0; i < gpus.count(); ++i) after_.gpu_free.push_back(gpus.free(i).units());
  const double growth = Fragmentation(after_, ShapesFor(node.accelerator_type)) - before;
  const double scarcity =
      options_.scarcity_weight == 0
          ? 0
          : options_.scarcity_weight * demand.sum.Get(kGpu).ToDouble() *
                Scarcity(table, node.accelerator_type);
  // Ties go to the node left with the least free GPU; the small factor keeps
  // packing from outweighing a real difference in the other terms.
  return -growth - scarcity - 1e-7 * gpus.TotalFree().ToDouble();
}

}  // namespace berth
