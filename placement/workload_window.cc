#include "placement/workload_window.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {

WorkloadWindow::WorkloadWindow(WorkloadWindowOptions options) : options_(options) {}

void WorkloadWindow::Add(const PlacementGroupSpec& spec) {
  const absl::Span<const Bundle> bundles = spec.bundles();
  const bool one_node = spec.strategy() == PlacementStrategy::kPack ||
                        spec.strategy() == PlacementStrategy::kStrictPack;
  const Quantity gpus = spec.total().Get(kGpu);
  if (one_node && (gpus <= Quantity::Whole(1) || gpus.IsWhole())) {
    std::vector<uint32_t> all(bundles.size());
    std::iota(all.begin(), all.end(), 0);
    const std::optional<std::vector<std::string>> types = AllowedAcceleratorTypes(bundles, all);
    AddTask(spec.total(), types ? &*types : nullptr);
    return;
  }
  for (uint32_t b = 0; b < bundles.size(); ++b) {
    const std::optional<std::vector<std::string>> types = AllowedAcceleratorTypes(bundles, {b});
    AddTask(bundles[b].resources, types ? &*types : nullptr);
  }
}

void WorkloadWindow::AddTask(const ResourceSet& resources, const std::vector<std::string>* types) {
  const int64_t gpu = resources.Get(kGpu).units();
  if (gpu == 0) return;
  Key key(resources.Get(kCpu).units(), resources.Get(kMemory).units(), gpu,
          types == nullptr ? std::vector<std::string>() : *types);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    if (by_key_.size() >= options_.max_shapes) return;
    it = by_key_.emplace(std::move(key), 0).first;
  }
  ++it->second;
  ring_.push_back(&it->first);
  ++added_;
  if (ring_.size() > options_.capacity) {
    auto oldest = by_key_.find(*ring_.front());
    ring_.pop_front();
    if (--oldest->second == 0) by_key_.erase(oldest);
  }
}

WorkloadWindow::Contents WorkloadWindow::Export() const {
  Contents contents;
  std::map<const Key*, uint32_t> index;
  for (const auto& [key, count] : by_key_) {
    const auto& [cpu, memory, gpu, types] = key;
    index.emplace(&key, static_cast<uint32_t>(contents.shapes.size()));
    contents.shapes.push_back({cpu, memory, gpu, types});
  }
  contents.tasks.reserve(ring_.size());
  for (const Key* key : ring_) contents.tasks.push_back(index.at(key));
  contents.added = added_;
  return contents;
}

absl::Status WorkloadWindow::Restore(const Contents& contents) {
  for (size_t i = 0; i < contents.shapes.size(); ++i) {
    if (contents.shapes[i].gpu <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("shapes[", i, "].gpu: a task takes a GPU"));
    }
  }
  for (size_t i = 0; i < contents.tasks.size(); ++i) {
    if (contents.tasks[i] >= contents.shapes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("tasks[", i, "]: shape ", contents.tasks[i],
                                                     " of ", contents.shapes.size()));
    }
  }
  WorkloadWindow restored(options_);
  const size_t keep = std::min(contents.tasks.size(), options_.capacity);
  for (size_t i = contents.tasks.size() - keep; i < contents.tasks.size(); ++i) {
    const RecordedShape& s = contents.shapes[contents.tasks[i]];
    ResourceSet resources;
    resources.Set(kCpu, Quantity::FromUnits(s.cpu));
    resources.Set(kMemory, Quantity::FromUnits(s.memory));
    resources.Set(kGpu, Quantity::FromUnits(s.gpu));
    restored.AddTask(resources, s.accelerator_types.empty() ? nullptr : &s.accelerator_types);
  }
  restored.added_ = std::max<uint64_t>(contents.added, restored.added_);
  *this = std::move(restored);
  return absl::OkStatus();
}

std::vector<TaskShape> WorkloadWindow::Shapes() const {
  std::vector<TaskShape> shapes;
  shapes.reserve(by_key_.size());
  for (const auto& [key, count] : by_key_) {
    const auto& [cpu, memory, gpu, types] = key;
    shapes.push_back({Quantity::FromUnits(cpu), Quantity::FromUnits(memory),
                      Quantity::FromUnits(gpu), types, static_cast<double>(count)});
  }
  return shapes;
}

WorkloadWindow::Snapshot WorkloadWindow::Take() const {
  Snapshot s;
  for (const auto& [key, count] : by_key_) {
    s.fractions.emplace(key, static_cast<double>(count) / static_cast<double>(ring_.size()));
  }
  return s;
}

double WorkloadWindow::DistanceFrom(const Snapshot& then) const {
  if (ring_.empty() || then.fractions.empty()) {
    return ring_.empty() == then.fractions.empty() ? 0 : 1;
  }
  // Both maps are ordered by key: one merge pass.
  double sum = 0;
  auto a = by_key_.begin();
  auto b = then.fractions.begin();
  const double n = static_cast<double>(ring_.size());
  while (a != by_key_.end() || b != then.fractions.end()) {
    if (b == then.fractions.end() || (a != by_key_.end() && a->first < b->first)) {
      sum += static_cast<double>(a->second) / n;
      ++a;
    } else if (a == by_key_.end() || b->first < a->first) {
      sum += b->second;
      ++b;
    } else {
      sum += std::abs(static_cast<double>(a->second) / n - b->second);
      ++a;
      ++b;
    }
  }
  return sum / 2;
}

}  // namespace berth
