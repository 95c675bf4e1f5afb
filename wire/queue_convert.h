// Queues between the API (v1::Queue, v1::QueueConfigRecord) and the
// queueing core (queueing/queue_config.h). Conversion from the API
// validates as QueueSpecFromInput does: errors name the field.
#ifndef BERTH_WIRE_QUEUE_CONVERT_H_
#define BERTH_WIRE_QUEUE_CONVERT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/state.pb.h"
#include "queueing/queue_config.h"

namespace berth {

absl::StatusOr<QueueSpec> QueueFromProto(const v1::Queue& proto, absl::string_view field);
void QueueToProto(const QueueSpec& queue, v1::Queue* proto);

v1::QueueConfigRecord QueueConfigToRecord(const QueueConfig& config);
// DATA_LOSS if the record does not make a valid config.
absl::StatusOr<QueueConfig> QueueConfigFromRecord(const v1::QueueConfigRecord& record);
// `base` with the cohorts, priority classes and queues added or replaced,
// in that order; an error names the entry (cohorts[i]..., queues[i]...,
// priority_classes[i]...).
absl::StatusOr<QueueConfig> QueueConfigWith(
    const QueueConfig& base, const google::protobuf::RepeatedPtrField<std::string>& cohorts,
    const google::protobuf::RepeatedPtrField<v1::Queue>& queues,
    const google::protobuf::RepeatedPtrField<v1::PriorityClass>& priority_classes);

}  // namespace berth

#endif  // BERTH_WIRE_QUEUE_CONVERT_H_
