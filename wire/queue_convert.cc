#include "wire/queue_convert.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

std::map<std::string, double> ToMap(const google::protobuf::Map<std::string, double>& amounts) {
  return {amounts.begin(), amounts.end()};
}

void FromAmounts(const QuotaAmounts& amounts, google::protobuf::Map<std::string, double>* out) {
  for (const auto& [name, amount] : amounts) (*out)[name] = amount.ToDouble();
}

}  // namespace

absl::StatusOr<QueueSpec> QueueFromProto(const v1::Queue& proto, absl::string_view field) {
  QueueInput input;
  input.name = proto.name();
  input.cohort = proto.cohort();
  input.nominal = ToMap(proto.nominal_quota());
  input.borrowing_limit = ToMap(proto.borrowing_limit());
  input.lending_limit = ToMap(proto.lending_limit());
  if (proto.has_weight()) input.weight = proto.weight();
  input.team = proto.team();
  input.within_queue_preemption = proto.within_queue_preemption();
  input.default_time_limit_s = proto.default_time_limit_s();
  input.max_time_limit_s = proto.max_time_limit_s();
  return QueueSpecFromInput(input, field);
}

void QueueToProto(const QueueSpec& queue, v1::Queue* proto) {
  proto->set_name(queue.name);
  proto->set_cohort(queue.cohort);
  FromAmounts(queue.nominal, proto->mutable_nominal_quota());
  FromAmounts(queue.borrowing_limit, proto->mutable_borrowing_limit());
  FromAmounts(queue.lending_limit, proto->mutable_lending_limit());
  proto->set_weight(queue.weight);
  proto->set_team(queue.team);
  proto->set_within_queue_preemption(
      std::string(WithinQueuePreemptionName(queue.within_queue_preemption)));
  proto->set_default_time_limit_s(queue.default_time_limit_s);
  proto->set_max_time_limit_s(queue.max_time_limit_s);
}

v1::QueueConfigRecord QueueConfigToRecord(const QueueConfig& config) {
  v1::QueueConfigRecord record;
  for (const auto& [name, queue] : config.queues()) QueueToProto(queue, record.add_queues());
  for (const std::string& cohort : config.cohorts()) record.add_cohorts(cohort);
  for (const auto& [name, c] : config.priority_classes()) {
    v1::PriorityClass* out = record.add_priority_classes();
    out->set_name(c.name);
    out->set_value(c.value);
  }
  return record;
}

absl::StatusOr<QueueConfig> QueueConfigWith(
    const QueueConfig& base, const google::protobuf::RepeatedPtrField<std::string>& cohorts,
    const google::protobuf::RepeatedPtrField<v1::Queue>& queues,
    const google::protobuf::RepeatedPtrField<v1::PriorityClass>& priority_classes) {
  auto in = [](absl::string_view list, int i, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(list, "[", i, "].", s.message()));
  };
  QueueConfig config = base;
  for (int i = 0; i < cohorts.size(); ++i) {
    absl::StatusOr<QueueConfig> next = config.WithCohort(cohorts[i]);
    if (!next.ok()) return in("cohorts", i, next.status());
    config = *std::move(next);
  }
  for (int i = 0; i < priority_classes.size(); ++i) {
    absl::StatusOr<QueueConfig> next =
        config.WithPriorityClass({priority_classes[i].name(), priority_classes[i].value()});
    if (!next.ok()) return in("priority_classes", i, next.status());
    config = *std::move(next);
  }
  for (int i = 0; i < queues.size(); ++i) {
    // QueueFromProto names the field itself.
    absl::StatusOr<QueueSpec> queue = QueueFromProto(queues[i], absl::StrCat("queues[", i, "]"));
    if (!queue.ok()) return queue.status();
    absl::StatusOr<QueueConfig> next = config.WithQueue(*std::move(queue));
    if (!next.ok()) return in("queues", i, next.status());
    config = *std::move(next);
  }
  return config;
}

absl::StatusOr<QueueConfig> QueueConfigFromRecord(const v1::QueueConfigRecord& record) {
  absl::StatusOr<QueueConfig> config =
      QueueConfigWith(QueueConfig(), record.cohorts(), record.queues(), record.priority_classes());
  if (!config.ok()) {
    return absl::DataLossError(
        absl::StrCat("state store: queue config: ", config.status().message()));
  }
  return config;
}

}  // namespace berth
