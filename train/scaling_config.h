// ScalingConfig -> the placement group of a train job.
//
// Ray Train's semantics: one trainer plus num_workers workers; the trainer's
// resources are merged into bundle 0 (rank 0's), so the trainer and rank 0
// always share a node and a large trainer_resources (say 200Gi of memory for
// checkpointing) lands rank 0 on a node that has it. accelerator_type T adds
// `accelerator_type:T: 0.001` to every bundle. Beyond Ray, ranks may differ:
// rank_resources merges extra resources into single ranks' bundles,
// resources_per_worker_list gives every rank its own, and label_selector one
// selector for all or one per rank; bundle i is always rank i's (the rank
// assignment keeps it so, rank_assignment.h). Pure: no I/O.
#ifndef BERTH_TRAIN_SCALING_CONFIG_H_
#define BERTH_TRAIN_SCALING_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"

namespace berth {

using ResourceAmounts = std::map<std::string, double>;

struct ScalingConfig {
  int64_t num_workers = 1;
  bool use_gpu = false;
  // Unset: {GPU: 1} with use_gpu, else {CPU: 1}. Zero entries are dropped.
  std::optional<ResourceAmounts> resources_per_worker;
  // One entry per worker, entry i rank i's, each read as resources_per_worker
  // is; exclusive with it.
  std::optional<std::vector<ResourceAmounts>> resources_per_worker_list;
  // Extra resources merged into single ranks' bundles (rank -> amounts).
  std::map<int64_t, ResourceAmounts> rank_resources;
  // Empty: any node. One: every worker's. num_workers: entry i rank i's.
  std::vector<LabelSelector> label_selector;
  // Unset: {CPU: 1}. Zero entries are dropped.
  std::optional<ResourceAmounts> trainer_resources;
  std::string accelerator_type;  // e.g. "A10G"; empty: any
  std::string placement_strategy = "PACK";
  // The group's topology (PlacementGroupSpec): all ranks in one rack, say.
  Topology topology;
  // Elastic: at least this many workers, at most num_workers. 0: not elastic.
  int64_t min_workers = 0;
};

// Validates `config` (errors name the field under `scaling_config.`) and
// returns the job's placement group: bundle i = rank i's worker, bundle 0
// with the trainer merged in.
absl::StatusOr<PlacementGroupSpec> BuildTrainPlacementGroup(const ScalingConfig& config);

// An elastic job's groups: its first `min_workers` bundles placed as one
// gang (the trainer's and the first ranks'), and the bundle of each further
// worker, which gets a one-bundle group of its own (they are all alike).
struct ElasticGroups {
  PlacementGroupSpec core;
  PlacementGroupSpec extra;
};
absl::StatusOr<ElasticGroups> SplitElastic(const PlacementGroupSpec& group, size_t min_workers);

// Whether the workers' bundles (all but bundle 0, which holds the trainer)
// are alike, so which of them a rank gets is free (rank_assignment.h).
bool WorkerBundlesAlike(const PlacementGroupSpec& group);

}  // namespace berth

#endif  // BERTH_TRAIN_SCALING_CONFIG_H_
