// PlacementGroupManager's requests (placement_group_manager.h): a create
// request checked (idempotency by request_id, names, limits, queue and
// priority class, topology keys), then queued as a gang of its queue.
#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "queueing/queue_config.h"
#include "scheduler/placement_group_manager.h"
#include "wire/message_fingerprint.h"
#include "wire/proto_convert.h"

namespace berth {
std::optional<std::string> PlacementGroupManager::Existing(
    const v1::CreatePlacementGroupRequest& request, absl::Status* status) const {
  auto it = by_request_id_.find(request.request_id());
  if (it == by_request_id_.end()) return std::nullopt;
  const Group& group = *it->second;
  if (group.fingerprint != MessageFingerprint(request)) {
    *status = absl::InvalidArgumentError(
        absl::StrCat("request_id: '", request.request_id(), "' was used for a different request"));
  }
  return group.id;
}

absl::StatusOr<std::string> PlacementGroupManager::Create(
    const v1::CreatePlacementGroupRequest& request, const std::string& new_id, int64_t now_ms) {
  if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  absl::Status retry;
  if (std::optional<std::string> id = Existing(request, &retry)) {
    if (!retry.ok()) return retry;
    return *id;
  }
  absl::StatusOr<PlacementGroupSpec> spec =
      PlacementGroupSpecFromProto(request.bundles(), request.strategy(), false, request.topology());
  if (!spec.ok()) return spec.status();
  return CreateFromSpec(*std::move(spec), request, new_id, now_ms);
}

absl::StatusOr<std::vector<std::string>> PlacementGroupManager::CreateBatch(
    const google::protobuf::RepeatedPtrField<v1::CreatePlacementGroupRequest>& requests,
    const std::vector<std::string>& new_ids, int64_t now_ms) {
  // Check everything first: a batch is created whole or not at all.
  std::vector<std::string> ids(requests.size());
  std::vector<std::optional<PlacementGroupSpec>> specs(requests.size());
  absl::flat_hash_map<std::string, int> request_ids, names;
  size_t new_groups = 0;
  for (int i = 0; i < requests.size(); ++i) {
    const v1::CreatePlacementGroupRequest& request = requests[i];
    auto in_request = [i](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("requests[", i, "].", s.message()));
    };
    if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
      return in_request(s);
    }
    if (auto [it, inserted] = request_ids.emplace(request.request_id(), i); !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("requests[", i, "].request_id: repeats requests[", it->second, "]'s"));
    }
    absl::Status retry;
    if (std::optional<std::string> id = Existing(request, &retry)) {
      if (!retry.ok()) return in_request(retry);
      ids[i] = *id;
      continue;
    }
    absl::StatusOr<PlacementGroupSpec> spec = PlacementGroupSpecFromProto(
        request.bundles(), request.strategy(), false, request.topology());
    if (!spec.ok()) return in_request(spec.status());
    if (absl::Status s = CheckNew(*spec, request, new_groups); !s.ok()) return in_request(s);
    if (groups_.count(new_ids.at(i)) != 0) {
      return absl::AlreadyExistsError(absl::StrCat("placement group id ", new_ids[i]));
    }
    if (!request.name().empty()) {
      if (auto [it, inserted] = names.emplace(request.name(), i); !inserted) {
        return absl::AlreadyExistsError(absl::StrCat("requests[", i, "].name: '", request.name(),
                                                     "' is also requests[", it->second, "]'s"));
      }
    }
    specs[i] = *std::move(spec);
    ++new_groups;
  }
  for (int i = 0; i < requests.size(); ++i) {
    if (specs[i]) ids[i] = Insert(*std::move(specs[i]), requests[i], new_ids.at(i), now_ms);
  }
  return ids;
}

absl::StatusOr<std::string> PlacementGroupManager::CreateFromSpec(
    PlacementGroupSpec spec, const v1::CreatePlacementGroupRequest& meta, const std::string& new_id,
    int64_t now_ms) {
  if (auto it = by_request_id_.find(meta.request_id());
      it != by_request_id_.end() && !meta.job_id().empty()) {
    if (it->second->job_id == meta.job_id()) return it->second->id;
  }
  if (absl::Status s = CheckNew(spec, meta, 0); !s.ok()) return s;
  if (groups_.count(new_id) != 0)
    return absl::AlreadyExistsError(absl::StrCat("placement group id ", new_id));
  return Insert(std::move(spec), meta, new_id, now_ms);
}

absl::Status PlacementGroupManager::CheckNew(const PlacementGroupSpec& spec,
                                             const v1::CreatePlacementGroupRequest& meta,
                                             size_t also_pending) const {
  if (absl::Status s = ValidateString(meta.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(meta.name(), "name", config_.max_name_length, false);
      !s.ok()) {
    return s;
  }
  if (spec.bundles().size() > config_.max_bundles_per_group) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bundles: ", spec.bundles().size(), " bundles; at most ", config_.max_bundles_per_group,
        " per group (berth-head --max-bundles-per-group)"));
  }
  if (absl::Status s = CheckQueueing(meta.queue(), meta.priority_class(), meta.priority(),
                                     spec.topology(), QueueingFields());
      !s.ok()) {
    return s;
  }
  if (meta.time_limit_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_limit_s: ", meta.time_limit_s(), " is negative; 0 means no limit"));
  }
  const size_t pending = waiting_.size() + queues_.lacking() + also_pending;
  if (pending >= config_.max_pending_groups) {
    return absl::ResourceExhaustedError(
        absl::StrCat(pending,
                     " placement groups are already waiting to be placed (berth-head "
                     "--max-pending-groups ",
                     config_.max_pending_groups, "); remove some or retry later"));
  }
  if (absl::Status s = ValidateString(meta.job_id(), "job_id", 128, false); !s.ok()) return s;
  if (by_request_id_.contains(meta.request_id())) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id: '", meta.request_id(), "' was already used"));
  }
  if (!meta.name().empty() && by_name_.contains(meta.name())) {
    return absl::AlreadyExistsError(absl::StrCat("name: a placement group named '", meta.name(),
                                                 "' exists (", by_name_.at(meta.name()), ")"));
  }
  return absl::OkStatus();
}

absl::Status PlacementGroupManager::CheckQueueing(absl::string_view queue,
                                                  absl::string_view priority_class,
                                                  int32_t priority, const Topology& topology,
                                                  const QueueingFields& fields) const {
  if (absl::StatusOr<const QueueSpec*> q = queues_.config().Resolve(queue, fields.queue); !q.ok()) {
    return q.status();
  }
  if (absl::StatusOr<int32_t> p =
          queues_.config().PriorityOf(priority_class, priority, fields.priority_class);
      !p.ok()) {
    return p.status();
  }
  return CheckTopologyKeys(topology, fields.topology);
}

absl::Status PlacementGroupManager::CheckTopologyKeys(const Topology& topology,
                                                      absl::string_view field) const {
  // A key no node has carried is most likely a typo; the well-known ones
  // may name nodes an autoscaler has yet to start.
  auto known = [&](const std::string& key) {
    return table_->HasLabelKey(key) ||
           std::find(std::begin(kTopologyLabels), std::end(kTopologyLabels), key) !=
               std::end(kTopologyLabels);
  };
  const std::vector<std::string> keys = topology.keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (known(keys[i])) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        field, topology.required.empty() ? absl::StrCat(".preferred[", i, "]") : ".required",
        ": no node carries label '", keys[i], "'; label nodes with berth start --labels ", keys[i],
        "=<domain>, or use one of ", absl::StrJoin(kTopologyLabels, ", ")));
  }
  return absl::OkStatus();
}

std::string PlacementGroupManager::Insert(PlacementGroupSpec spec,
                                          const v1::CreatePlacementGroupRequest& meta,
                                          const std::string& new_id, int64_t now_ms) {
  // The scorer observes it there; a spec equal to another group's is shared.
  std::unique_ptr<CapacityModel::Gang> placement =
      capacity_.Add(std::make_shared<const PlacementGroupSpec>(std::move(spec)));
  Group g(new_id, PlacerCapacity::SpecOf({&new_id, placement.get()}));
  g.name = meta.name();
  g.job_id = meta.job_id();
  g.request_id = meta.request_id();
  g.fingerprint = MessageFingerprint(meta);
  g.created_ms = now_ms;
  g.waiting_since_ms = now_ms;
  Group& inserted = groups_.emplace(new_id, std::move(g)).first->second;
  IndexRequestId(inserted);
  if (!meta.name().empty()) by_name_[meta.name()] = new_id;
  GangRequest gang = GangOf(inserted);
  gang.queue = meta.queue();
  // CheckNew resolved its class and queue, and its id is new.
  gang.priority = queues_.config()
                      .PriorityOf(meta.priority_class(), meta.priority(), "priority_class")
                      .value_or(meta.priority());
  gang.preemptible = !meta.has_preemptible() || meta.preemptible();
  if (meta.time_limit_s() > 0) gang.time_limit_ms = meta.time_limit_s() * 1000;
  queues_.Submit(std::move(gang), now_ms, std::move(placement)).IgnoreError();
  waiting_.insert(new_id);
  pass_due_ = true;
  changed_.insert(new_id);
  return new_id;
}

GangRequest PlacementGroupManager::GangOf(const Group& g) const {
  GangRequest r;
  r.id = g.id;
  r.demand = g.spec->total();
  r.shape = absl::HashOf(*g.spec);
  return r;
}

std::string PlacementGroupManager::GangName(const std::string& id) const {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second.job_id.empty()) return absl::StrCat("placement group ", id);
  return absl::StrCat("job ", it->second.job_id);
}

}  // namespace berth
