#include "raylet/raylet_convert.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

v1::WorkerState WorkerStateToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kRunning:
      return v1::WORKER_STATE_RUNNING;
    case WorkerState::kExited:
      return v1::WORKER_STATE_EXITED;
    case WorkerState::kFailed:
      return v1::WORKER_STATE_FAILED;
    case WorkerState::kKilled:
      return v1::WORKER_STATE_KILLED;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<BundleRequest> BundleRequestFromProto(
    uint32_t bundle_index, const v1::ResourceSet& resources,
    const google::protobuf::RepeatedPtrField<v1::GpuShare>& gpus, const std::string& field) {
  BundleRequest request;
  request.bundle_index = bundle_index;
  absl::StatusOr<ResourceSet> set =
      ResourceSetFromProto(resources, absl::StrCat(field, ".resources"));
  if (!set.ok()) return set.status();
  request.resources = *std::move(set);
  absl::StatusOr<std::vector<GpuShare>> shares =
      GpuSharesFromProto(gpus, absl::StrCat(field, ".gpus"));
  if (!shares.ok()) return shares.status();
  request.gpus = *std::move(shares);
  return request;
}

BundleKey BundleKeyFromProto(const v1::BundleKey& proto) {
  return {proto.placement_group_id(), proto.bundle_index()};
}

void BundleKeyToProto(const BundleKey& key, v1::BundleKey* proto) {
  proto->set_placement_group_id(key.placement_group_id);
  proto->set_bundle_index(key.bundle_index);
}

void WorkerRecordToProto(const WorkerRecord& record, v1::WorkerStatus* proto) {
  proto->set_worker_id(record.worker_id);
  proto->set_job_id(record.job_id);
  proto->set_pid(record.pid);
  proto->set_state(WorkerStateToProto(record.state));
  proto->set_exit_code(record.exit_code);
  proto->set_signal(record.signal);
  proto->set_started_unix_ms(record.started_unix_ms);
  proto->set_ended_unix_ms(record.ended_unix_ms);
  proto->set_placement_group_id(record.placement_group_id);
  proto->set_bundle_index(record.bundle_index);
  proto->set_error(record.error);
  proto->set_failed_unix_us(record.failed_unix_us);
}

}  // namespace berth
