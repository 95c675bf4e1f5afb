// ScalingConfig -> the placement group of a train job.
//
// Ray Train's semantics: one trainer plus num_workers workers; the trainer's
// resources are merged into bundle 0 (rank 0's), so the trainer and rank 0
// always share a node and a large trainer_resources (say 200Gi of memory for
// checkpointing) lands rank 0 on a node that has it. accelerator_type T adds
// `accelerator_type:T: 0.001` to every bundle. Pure: no I/O.
#ifndef BERTH_TRAIN_SCALING_CONFIG_H_
#define BERTH_TRAIN_SCALING_CONFIG_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "placement/placement_group_spec.h"

namespace berth {

struct ScalingConfig {
  int64_t num_workers = 1;
  bool use_gpu = false;
  // Unset: {GPU: 1} with use_gpu, else {CPU: 1}. Zero entries are dropped.
  std::optional<std::map<std::string, double>> resources_per_worker;
  // Unset: {CPU: 1}. Zero entries are dropped.
  std::optional<std::map<std::string, double>> trainer_resources;
  std::string accelerator_type;  // e.g. "A10G"; empty: any
  std::string placement_strategy = "PACK";
};

// Validates `config` (errors name the field under `scaling_config.`) and
// returns the job's placement group: bundle 0 = trainer + rank-0 worker,
// bundles 1..num_workers-1 = one worker each.
absl::StatusOr<PlacementGroupSpec> BuildTrainPlacementGroup(const ScalingConfig& config);

}  // namespace berth

#endif  // BERTH_TRAIN_SCALING_CONFIG_H_
