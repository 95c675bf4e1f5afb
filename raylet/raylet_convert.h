// Conversions between the node agent's own types (bundles, workers) and the
// messages of RayletService and NodeService (proto/berth/v1/).
//
// Conversions from the wire check their input and name the offending field
// in INVALID_ARGUMENT errors (`field` is the message's own name in the
// request); conversions to the wire never fail.
#ifndef BERTH_RAYLET_RAYLET_CONVERT_H_
#define BERTH_RAYLET_RAYLET_CONVERT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "berth/v1/common.pb.h"
#include "berth/v1/raylet.pb.h"
#include "raylet/bundle_reservations.h"
#include "raylet/worker_processes.h"

namespace berth {

// A bundle's index, resources and GPU shares, checked.
absl::StatusOr<BundleRequest> BundleRequestFromProto(
    uint32_t bundle_index, const v1::ResourceSet& resources,
    const google::protobuf::RepeatedPtrField<v1::GpuShare>& gpus, const std::string& field);

BundleKey BundleKeyFromProto(const v1::BundleKey& proto);
void BundleKeyToProto(const BundleKey& key, v1::BundleKey* proto);

void WorkerRecordToProto(const WorkerRecord& record, v1::WorkerStatus* proto);

}  // namespace berth

#endif  // BERTH_RAYLET_RAYLET_CONVERT_H_
