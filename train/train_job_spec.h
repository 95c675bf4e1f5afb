// What a train job's spec says, checked and read once: the validation of a
// SubmitTrainJobRequest (errors name the field), the job's placement group,
// and the shape of its entrypoint (one process per rank or a launcher per
// node; whether a store host runs beside rank 0). Pure.
#ifndef BERTH_TRAIN_TRAIN_JOB_SPEC_H_
#define BERTH_TRAIN_TRAIN_JOB_SPEC_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/v1/head.pb.h"
#include "placement/placement_group_spec.h"
#include "train/worker_env.h"
#include "wire/train_job_state.h"

namespace berth {

// Every field of the request but the job's placement (which
// PlacementGroupForJob checks); errors name the field (`spec.name`, ...).
// `max_stop_grace` bounds spec.stop_grace_period_s.
absl::Status ValidateTrainJobRequest(const v1::SubmitTrainJobRequest& request,
                                     size_t max_name_length, absl::Duration max_stop_grace);

// Converts the wire ScalingConfig into the train layer's, then into the
// job's placement group. Errors name the field under `spec.scaling_config`.
absl::StatusOr<PlacementGroupSpec> PlacementGroupForJob(const v1::TrainJobSpec& spec);

// A user command started once per node (a launcher, or per_node), which
// starts the node's ranks itself.
bool IsPerNode(const v1::TrainJobSpec& spec);

// A per-rank Python command gets a store host of its own interpreter
// (worker_env.h); a launcher's agent hosts its own.
bool HasStoreHost(const v1::TrainJobSpec& spec);
Launcher LauncherOf(const v1::Entrypoint::Command& command);

}  // namespace berth

#endif  // BERTH_TRAIN_TRAIN_JOB_SPEC_H_
