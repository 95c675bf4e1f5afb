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
}

v1::QueueConfigRecord QueueConfigToRecord(const QueueConfig& config) {
  v1::QueueConfigRecord record;
  for (const auto& [name, queue] : config.queues()) QueueToProto(queue, record.add_queues());
  for (const std::string& cohort : config.cohorts()) record.add_cohorts(cohort);
  return record;
}

absl::StatusOr<QueueConfig> QueueConfigFromRecord(const v1::QueueConfigRecord& record) {
  absl::StatusOr<QueueConfig> config = QueueConfig();
  for (const std::string& cohort : record.cohorts()) {
    config = config->WithCohort(cohort);
    if (!config.ok()) break;
  }
  for (int i = 0; config.ok() && i < record.queues_size(); ++i) {
    absl::StatusOr<QueueSpec> queue =
        QueueFromProto(record.queues(i), absl::StrCat("queues[", i, "]"));
    if (!queue.ok()) {
      config = queue.status();
      break;
    }
    config = config->WithQueue(*std::move(queue));
  }
  if (!config.ok()) {
    return absl::DataLossError(
        absl::StrCat("state store: queue config: ", config.status().message()));
  }
  return config;
}

}  // namespace berth
