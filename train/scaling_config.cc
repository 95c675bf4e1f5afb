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
    if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
      return InternalAcceleratorResource(absl::StrCat(field, "[\"", name, "\"]"), *type,
                                         "set scaling_config.accelerator_type: \"$0\" instead");
    }
  }
  // Zero amounts are dropped, as in Ray: ResourceSet keeps no zero entries.
  return ResourceSet::FromDoubles(amounts, field);
}

// A worker's GPUs come only with use_gpu, as in Ray.
absl::Status GpusNeedUseGpu(const ScalingConfig& config, const ResourceSet& resources,
                            const std::string& field) {
  if (config.use_gpu || resources.Get(kGpu).IsZero()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, "[\"GPU\"]: GPUs requested with use_gpu false; set scaling_config.use_gpu: true"));
}

// One worker's bundle before any merge: `amounts` as resources_per_worker
// reads them (unset: Ray's default), with the GPU and accelerator rules.
absl::StatusOr<ResourceSet> WorkerResources(const ScalingConfig& config,
                                            const ResourceAmounts* amounts,
                                            const std::string& field) {
  ResourceSet worker = config.use_gpu ? ResourceSet::Of({{kGpu, 1}}) : ResourceSet::Of({{kCpu, 1}});
  if (amounts != nullptr) {
    absl::StatusOr<ResourceSet> r = UserResources(*amounts, field);
    if (!r.ok()) return r.status();
    worker = *std::move(r);
  }
  if (config.use_gpu && worker.Get(kGpu).IsZero()) worker.Set(kGpu, Quantity::Whole(1));
  if (absl::Status s = GpusNeedUseGpu(config, worker, field); !s.ok()) return s;
  if (absl::Status s = ValidateGpuRequest(worker.Get(kGpu), absl::StrCat(field, "[\"GPU\"]"));
      !s.ok()) {
    return s;
  }
  if (worker.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": every amount is zero; a worker must request some resource"));
  }
  if (!config.accelerator_type.empty()) {
    if (worker.Get(kGpu).IsZero()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scaling_config.accelerator_type: '", config.accelerator_type,
                       "' given but workers request no GPU; set scaling_config.use_gpu: true"));
    }
    worker.Set(AcceleratorResourceName(config.accelerator_type), kAcceleratorRequest);
  }
  return worker;
}

// Adds `extra` (trainer_resources or a rank's rank_resources) to a bundle;
// the sum must still be a valid GPU request.
absl::Status Merge(const ResourceSet& extra, const std::string& field, ResourceSet* bundle) {
  if (absl::Status s = bundle->Add(extra); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
  }
  return ValidateGpuRequest(bundle->Get(kGpu), absl::StrCat(field, "[\"GPU\"]"));
}

absl::Status ValidateAcceleratorType(const std::string& type) {
  if (absl::Status s = ValidateLabelValue(type, "scaling_config.accelerator_type");
      !s.ok() || type.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("scaling_config.accelerator_type: '", type,
                                                   "' may use only letters, digits and _ . / -"));
  }
  // The bundles carry `accelerator_type:<T>`, which must stay a valid
  // resource name: the head reports and reads bundles back through it.
  if (!ValidateResourceName(AcceleratorResourceName(type), "").ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scaling_config.accelerator_type: longer than ",
                                                   128 - kAcceleratorResourcePrefix.size(),
                                                   " characters"));
  }
  return absl::OkStatus();
}

// An elastic job's ranks from min_workers on come and go, so they must be
// alike: what differs per rank is for the ranks it always has.
absl::Status ValidateElastic(const ScalingConfig& config) {
  if (config.min_workers == 0) return absl::OkStatus();
  const int64_t n = config.num_workers;
  if (config.min_workers < 1 || config.min_workers > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling_config.min_workers: ", config.min_workers,
                     " is not in 1..num_workers (", n, ", the most)"));
  }
  if (config.resources_per_worker_list || config.label_selector.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling_config.min_workers: an elastic job's workers are alike; give ",
                     config.resources_per_worker_list ? "resources_per_worker" : "label_selector",
                     " once, not per rank"));
  }
  for (const auto& [rank, amounts] : config.rank_resources) {
    if (rank >= config.min_workers) {
      return absl::InvalidArgumentError(absl::StrCat("scaling_config.rank_resources[", rank,
                                                     "]: an elastic job shapes only "
                                                     "the ranks it always has, 0..",
                                                     config.min_workers - 1, " (min_workers ",
                                                     config.min_workers, ")"));
    }
  }
  if (!config.topology.empty()) {
    return absl::InvalidArgumentError(
        "scaling_config.topology: not yet for elastic jobs (min_workers); give one or the other");
  }
  return absl::OkStatus();
}

// The per-rank fields (resources_per_worker_list, label_selector,
// rank_resources) fit num_workers.
absl::Status ValidatePerRankFields(const ScalingConfig& config) {
  const int64_t n = config.num_workers;
  if (config.resources_per_worker_list) {
    if (config.resources_per_worker) {
      return absl::InvalidArgumentError(
          "scaling_config.resources_per_worker_list: give either resources_per_worker (every "
          "worker alike) or resources_per_worker_list (one entry per worker), not both");
    }
    if (static_cast<int64_t>(config.resources_per_worker_list->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scaling_config.resources_per_worker_list: ", config.resources_per_worker_list->size(),
          " entries for num_workers ", n, "; give one per worker"));
    }
  }
  const size_t selectors = config.label_selector.size();
  if (selectors > 1 && static_cast<int64_t>(selectors) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling_config.label_selector: ", selectors, " entries for num_workers ", n,
                     "; give one for every worker or one per worker"));
  }
  for (const auto& [rank, amounts] : config.rank_resources) {
    if (rank < 0 || rank >= n) {
      return absl::InvalidArgumentError(absl::StrCat("scaling_config.rank_resources[", rank,
                                                     "]: no such rank; ranks are 0..", n - 1));
    }
  }
  return absl::OkStatus();
}

// Rank `i`'s bundle: its worker resources (`alike`, or its own entry of
// resources_per_worker_list), its rank_resources merged in, its selector.
absl::StatusOr<Bundle> RankBundle(const ScalingConfig& config,
                                  const std::optional<ResourceSet>& alike, int64_t i) {
  Bundle bundle;
  if (alike) {
    bundle.resources = *alike;
  } else {
    absl::StatusOr<ResourceSet> r =
        WorkerResources(config, &(*config.resources_per_worker_list)[i],
                        absl::StrCat("scaling_config.resources_per_worker_list[", i, "]"));
    if (!r.ok()) return r.status();
    bundle.resources = *std::move(r);
  }
  if (auto extra = config.rank_resources.find(i); extra != config.rank_resources.end()) {
    const std::string field = absl::StrCat("scaling_config.rank_resources[", i, "]");
    absl::StatusOr<ResourceSet> r = UserResources(extra->second, field);
    if (!r.ok()) return r.status();
    if (absl::Status s = GpusNeedUseGpu(config, *r, field); !s.ok()) return s;
    if (absl::Status s = Merge(*r, field, &bundle.resources); !s.ok()) return s;
  }
  const size_t selectors = config.label_selector.size();
  if (selectors > 0) bundle.selector = config.label_selector[selectors == 1 ? 0 : i];
  return bundle;
}

// Bundle i = rank i's worker, before the trainer is merged in.
absl::StatusOr<std::vector<Bundle>> WorkerBundles(const ScalingConfig& config) {
  // Ranks without an entry of their own share one worker bundle.
  std::optional<ResourceSet> alike;
  if (!config.resources_per_worker_list) {
    absl::StatusOr<ResourceSet> r = WorkerResources(
        config, config.resources_per_worker ? &*config.resources_per_worker : nullptr,
        "scaling_config.resources_per_worker");
    if (!r.ok()) return r.status();
    alike = *std::move(r);
  }
  std::vector<Bundle> bundles;
  bundles.reserve(config.num_workers);
  for (int64_t i = 0; i < config.num_workers; ++i) {
    absl::StatusOr<Bundle> bundle = RankBundle(config, alike, i);
    if (!bundle.ok()) return bundle.status();
    bundles.push_back(*std::move(bundle));
  }
  return bundles;
}

// The trainer's resources (trainer_resources, unset: {CPU: 1}) merged
// into rank 0's bundle.
absl::Status MergeTrainer(const ScalingConfig& config, Bundle* rank0) {
  ResourceSet trainer = ResourceSet::Of({{kCpu, 1}});
  if (config.trainer_resources) {
    absl::StatusOr<ResourceSet> r =
        UserResources(*config.trainer_resources, "scaling_config.trainer_resources");
    if (!r.ok()) return r.status();
    trainer = *std::move(r);
  }
  return Merge(trainer, "scaling_config.trainer_resources", &rank0->resources);
}

}  // namespace

absl::StatusOr<ElasticGroups> SplitElastic(const PlacementGroupSpec& group, size_t min_workers) {
  const absl::Span<const Bundle> bundles = group.bundles();
  if (min_workers < 1 || min_workers >= bundles.size()) {
    return absl::InvalidArgumentError(absl::StrCat("min_workers: ", min_workers, " of ",
                                                   bundles.size(), " leaves nothing elastic"));
  }
  absl::StatusOr<PlacementGroupSpec> core = PlacementGroupSpec::Create(
      std::vector<Bundle>(bundles.begin(), bundles.begin() + min_workers), group.strategy(),
      group.topology());
  if (!core.ok()) return core.status();
  absl::StatusOr<PlacementGroupSpec> extra =
      PlacementGroupSpec::Create({bundles[min_workers]}, PlacementStrategy::kPack);
  if (!extra.ok()) return extra.status();
  return ElasticGroups{*std::move(core), *std::move(extra)};
}

absl::StatusOr<PlacementGroupSpec> BuildTrainPlacementGroup(const ScalingConfig& config) {
  const int64_t n = config.num_workers;
  if (n < 1 || n > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling_config.num_workers: ", n, " is not in 1..", kMaxWorkers));
  }
  absl::StatusOr<PlacementStrategy> strategy =
      ParsePlacementStrategy(config.placement_strategy, "scaling_config.placement_strategy");
  if (!strategy.ok()) return strategy.status();
  if (!config.accelerator_type.empty()) {
    if (absl::Status s = ValidateAcceleratorType(config.accelerator_type); !s.ok()) return s;
  }
  if (absl::Status s = ValidatePerRankFields(config); !s.ok()) return s;
  if (absl::Status s = ValidateElastic(config); !s.ok()) return s;
  absl::StatusOr<std::vector<Bundle>> bundles = WorkerBundles(config);
  if (!bundles.ok()) return bundles.status();
  if (absl::Status s = MergeTrainer(config, &(*bundles)[0]); !s.ok()) return s;
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpec::Create(*std::move(bundles), *strategy, config.topology);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scaling_config: ", spec.status().message()));
  }
  return spec;
}

bool WorkerBundlesAlike(const PlacementGroupSpec& group) {
  const absl::Span<const Bundle> bundles = group.bundles();
  for (size_t i = 2; i < bundles.size(); ++i) {
    if (!(bundles[i] == bundles[1])) return false;
  }
  return true;
}

}  // namespace berth
