#include "client/queue_file.h"

#include <limits>
#include <vector>

#include "client/yaml_reader.h"

namespace berth {
namespace {

// The queue file's schema: which keys it has and how they fill an
// ApplyQueuesRequest.
class QueueFileReader {
 public:
  explicit QueueFileReader(const YamlReader& yaml) : yaml_(yaml) {}

  absl::Status Read(const YAML::Node& root, v1::ApplyQueuesRequest* out) const {
    // ApplyQueuesRequest's fields, in the order errors have always listed
    // them (the proto declares queues before priority_classes).
    return yaml_.ForEachKey(
        root, "", {"cohorts", "priority_classes", "queues"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          if (key == "cohorts") {
            return yaml_.ForEachItem(value, key,
                                     [&](const YAML::Node& item, const std::string& path) {
                                       return yaml_.String(item, path, out->add_cohorts());
                                     });
          }
          if (key == "priority_classes") {
            return yaml_.ForEachItem(
                value, key, [&](const YAML::Node& item, const std::string& path) {
                  return PriorityClass(item, path, out->add_priority_classes());
                });
          }
          return yaml_.ForEachItem(value, key,
                                   [&](const YAML::Node& item, const std::string& path) {
                                     return Queue(item, path, out->add_queues());
                                   });
        });
  }

 private:
  absl::Status PriorityClass(const YAML::Node& node, const std::string& path,
                             v1::PriorityClass* out) const {
    return yaml_.ForEachKey(
        node, path, FieldKeys(*v1::PriorityClass::descriptor()),
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) {
          if (key == "name") return yaml_.String(value, ChildPath(path, key), out->mutable_name());
          return yaml_.SetInteger(value, ChildPath(path, key), std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(),
                                  [&](int64_t n) { out->set_value(n); });
        });
  }

  // Quotas and limits: resource names as the head checks them (`GPU:A10G`
  // included), amounts as quantities.
  absl::Status Amounts(const YAML::Node& node, absl::string_view path,
                       google::protobuf::Map<std::string, double>* out) const {
    return yaml_.ForEachEntry(
        node, path,
        [&](const std::string& name, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          absl::StatusOr<double> amount = yaml_.ResourceQuantity(value, EntryPath(path, name));
          if (!amount.ok()) return amount.status();
          (*out)[name] = *amount;
          return absl::OkStatus();
        });
  }

  // Queue's fields, in the order errors have always listed them, except
  // that nominal_quota is written `quota` and `status` is the head's to
  // report, not the file's to set.
  absl::Status Queue(const YAML::Node& node, const std::string& path, v1::Queue* out) const {
    return yaml_.ForEachKey(
        node, path,
        {"name", "cohort", "team", "quota", "borrowing_limit", "lending_limit", "weight",
         "within_queue_preemption", "default_time_limit", "max_time_limit"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string at = ChildPath(path, key);
          if (key == "name") return yaml_.String(value, at, out->mutable_name());
          if (key == "cohort") return yaml_.String(value, at, out->mutable_cohort());
          if (key == "team") return yaml_.String(value, at, out->mutable_team());
          if (key == "within_queue_preemption")
            return yaml_.String(value, at, out->mutable_within_queue_preemption());
          if (key == "default_time_limit" || key == "max_time_limit") {
            absl::StatusOr<int64_t> seconds = yaml_.DurationSeconds(value, at, 1);
            if (!seconds.ok()) return seconds.status();
            if (key == "default_time_limit") out->set_default_time_limit_s(*seconds);
            if (key == "max_time_limit") out->set_max_time_limit_s(*seconds);
            return absl::OkStatus();
          }
          if (key == "quota") return Amounts(value, at, out->mutable_nominal_quota());
          if (key == "borrowing_limit") return Amounts(value, at, out->mutable_borrowing_limit());
          if (key == "lending_limit") return Amounts(value, at, out->mutable_lending_limit());
          absl::StatusOr<double> weight = yaml_.Number(value, at);
          if (!weight.ok()) return weight.status();
          out->set_weight(*weight);
          return absl::OkStatus();
        });
  }

  const YamlReader& yaml_;
};

}  // namespace

absl::StatusOr<v1::ApplyQueuesRequest> ParseQueueFile(const std::string& text,
                                                      const std::string& name) {
  const YamlReader yaml(name, "queue file");
  v1::ApplyQueuesRequest request;
  absl::Status status = yaml.ReadOneDocument(text, "queue file", [&](const YAML::Node& root) {
    return QueueFileReader(yaml).Read(root, &request);
  });
  if (!status.ok()) return status;
  return request;
}

absl::StatusOr<v1::ApplyQueuesRequest> LoadQueueFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseQueueFile(*text, path);
}

}  // namespace berth
