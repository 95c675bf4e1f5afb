#include "train/scaling_config.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "placement/gpu_instances.h"
#include "placement/label_selector.h"

namespace berth {
namespace {

constexpr int64_t kMaxWorkers = 4096;

absl::StatusOr<ResourceSet> UserResources(const std::map<std::string, double>& amounts,
                                          const std::string& field) {
  for (const auto& [name, value] : amounts) {
    if (absl::StartsWith(name, kAcceleratorResourcePrefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[\"", name, "\"]: the accelerator_type: resource is internal; set ",
                       "scaling_config.accelerator_type: \"",
                       name.substr(kAcceleratorResourcePrefix.size()), "\" instead"));
    }
  }
  // Zero amounts are dropped, as in Ray: ResourceSet keeps no zero entries.
  return ResourceSet::FromDoubles(amounts, field);
}

}  // namespace

absl::StatusOr<PlacementGroupSpec> BuildTrainPlacementGroup(const ScalingConfig& config) {
  if (config.num_workers < 1 || config.num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scaling_config.num_workers: ", config.num_workers, " is not in 1..", kMaxWorkers));
  }
  absl::StatusOr<PlacementStrategy> strategy =
      ParsePlacementStrategy(config.placement_strategy, "scaling_config.placement_strategy");
  if (!strategy.ok()) return strategy.status();

  ResourceSet worker = config.use_gpu ? ResourceSet::Of({{kGpu, 1}}) : ResourceSet::Of({{kCpu, 1}});
  if (config.resources_per_worker) {
    absl::StatusOr<ResourceSet> r =
        UserResources(*config.resources_per_worker, "scaling_config.resources_per_worker");
    if (!r.ok()) return r.status();
    worker = *std::move(r);
  }
  if (config.use_gpu && worker.Get(kGpu).IsZero()) worker.Set(kGpu, Quantity::Whole(1));
  if (!config.use_gpu && !worker.Get(kGpu).IsZero()) {
    return absl::InvalidArgumentError(
        "scaling_config.resources_per_worker[\"GPU\"]: GPUs requested with use_gpu false; "
        "set scaling_config.use_gpu: true");
  }
  if (absl::Status s =
          ValidateGpuRequest(worker.Get(kGpu), "scaling_config.resources_per_worker[\"GPU\"]");
      !s.ok()) {
    return s;
  }
  if (worker.empty()) {
    return absl::InvalidArgumentError(
        "scaling_config.resources_per_worker: every amount is zero; a worker must request "
        "some resource");
  }
  if (!config.accelerator_type.empty()) {
    if (absl::Status s =
            ValidateLabelValue(config.accelerator_type, "scaling_config.accelerator_type");
        !s.ok() || config.accelerator_type.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("scaling_config.accelerator_type: '",
                                                     config.accelerator_type,
                                                     "' may use only letters, digits and _ . / -"));
    }
    // The bundles carry `accelerator_type:<T>`, which must stay a valid
    // resource name: the head reports and reads bundles back through it.
    if (!ValidateResourceName(AcceleratorResourceName(config.accelerator_type), "").ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scaling_config.accelerator_type: longer than ",
                       128 - kAcceleratorResourcePrefix.size(), " characters"));
    }
    if (worker.Get(kGpu).IsZero()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scaling_config.accelerator_type: '", config.accelerator_type,
                       "' given but workers request no GPU; set scaling_config.use_gpu: true"));
    }
    worker.Set(AcceleratorResourceName(config.accelerator_type), kAcceleratorRequest);
  }

  ResourceSet trainer = ResourceSet::Of({{kCpu, 1}});
  if (config.trainer_resources) {
    absl::StatusOr<ResourceSet> r =
        UserResources(*config.trainer_resources, "scaling_config.trainer_resources");
    if (!r.ok()) return r.status();
    trainer = *std::move(r);
  }
  ResourceSet rank0 = worker;
  if (absl::Status s = rank0.Add(trainer); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling_config.trainer_resources: ", s.message()));
  }

  std::vector<Bundle> bundles;
  bundles.reserve(config.num_workers);
  bundles.push_back({rank0, {}});
  for (int64_t i = 1; i < config.num_workers; ++i) bundles.push_back({worker, {}});
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpec::Create(std::move(bundles), *strategy);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scaling_config: ", spec.status().message()));
  }
  return spec;
}

}  // namespace berth
