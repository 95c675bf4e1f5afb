#include "scheduler/node_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// `unhealthy` checked against a node of `gpu_count` GPUs, by index.
absl::StatusOr<std::map<uint32_t, v1::UnhealthyGpu>> UnhealthyByIndex(
    const google::protobuf::RepeatedPtrField<v1::UnhealthyGpu>& unhealthy, int gpu_count) {
  std::map<uint32_t, v1::UnhealthyGpu> by_index;
  for (int i = 0; i < unhealthy.size(); ++i) {
    const v1::UnhealthyGpu& gpu = unhealthy[i];
    const std::string field = absl::StrCat("unhealthy_gpus[", i, "]");
    if (gpu.index() >= static_cast<uint32_t>(gpu_count)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".index: ", gpu.index(), "; the node has ", gpu_count, " GPU(s)"));
    }
    if (absl::Status s = ValidateString(gpu.reason(), field + ".reason", 1024, false); !s.ok())
      return s;
    if (!by_index.emplace(gpu.index(), gpu).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".index: GPU ", gpu.index(), " is listed twice"));
    }
  }
  return by_index;
}

bool SameGpus(const std::map<uint32_t, v1::UnhealthyGpu>& a,
              const std::map<uint32_t, v1::UnhealthyGpu>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.reason() == y.second.reason() &&
           x.second.since_unix_ms() == y.second.since_unix_ms();
  });
}

}  // namespace

absl::StatusOr<NodeManager::Registration> NodeManager::Register(
    const v1::RegisterNodeRequest& request, int64_t now_ms) {
  if (absl::Status s = ValidateString(request.node_id(), "node_id", 128, true); !s.ok()) return s;
  if (absl::Status s = ValidateString(request.address(), "address", 256, true); !s.ok()) return s;
  if (absl::Status s = ValidateString(request.metrics_address(), "metrics_address", 256, false);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, false); !s.ok()) {
    return s;
  }
  if (static_cast<size_t>(request.labels_size()) > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: ", request.labels_size(), " labels; at most ", kMaxLabels));
  }
  auto existing = nodes_.find(request.node_id());
  if (existing != nodes_.end()) {
    const NodeResourceTable::Node& node = table_->node(existing->second.index);
    if (!request.request_id().empty() &&
        request.request_id() ==
            RegistrationOf(request.node_id()).value_or(v1::RegisterNodeRequest()).request_id()) {
      return Registration{existing->second.index, false};  // a retry of the same call
    }
    if (node.state != NodeState::kDead) {
      return absl::AlreadyExistsError(
          absl::StrCat("node_id: node '", request.node_id(), "' is already registered and ",
                       NodeStateName(node.state),
                       "; a restarted raylet may register again once the head "
                       "has declared the old one DEAD"));
    }
  }

  NodeSpec spec;
  spec.node_id = request.node_id();
  absl::StatusOr<ResourceSet> total = ResourceSetFromProto(request.total(), "total");
  if (!total.ok()) return total.status();
  spec.resources = *std::move(total);
  for (const auto& [key, value] : request.labels()) {
    if (!NodeMaySetLabel(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[\"", key, "\"]: keys starting with berth.io/ are set by berth (",
                       kNodePoolLabel, " and the topology keys excepted)"));
    }
    spec.labels[key] = value;
  }
  const int64_t gpu_count = spec.resources.Get(kGpu).units() / Quantity::kUnitsPerWhole;
  if (request.gpus_size() != gpu_count || !spec.resources.Get(kGpu).IsWhole()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gpus: ", request.gpus_size(), " GPU instances listed but total.amounts[\"GPU\"] is ",
        spec.resources.Get(kGpu).ToString()));
  }
  for (int i = 0; i < request.gpus_size(); ++i) {
    const v1::GpuInstance& gpu = request.gpus(i);
    if (gpu.index() != static_cast<uint32_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("gpus[", i, "].index: ", gpu.index(),
                                                     "; instances must be 0..n-1 in order"));
    }
    if (gpu.accelerator_type() != request.gpus(0).accelerator_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gpus[", i, "].accelerator_type: '", gpu.accelerator_type(), "' differs from gpus[0]'s '",
          request.gpus(0).accelerator_type(), "'; a node has one accelerator type"));
    }
  }
  if (request.gpus_size() > 0) spec.accelerator_type = request.gpus(0).accelerator_type();
  absl::StatusOr<std::map<uint32_t, v1::UnhealthyGpu>> unhealthy =
      UnhealthyByIndex(request.unhealthy_gpus(), request.gpus_size());
  if (!unhealthy.ok()) return unhealthy.status();

  bool replaced_dead = false;
  if (existing != nodes_.end()) {
    // The DEAD record goes; its bundles were already rescheduled.
    if (absl::Status s = table_->RemoveNode(request.node_id()); !s.ok()) return s;
    drains_.erase(request.node_id());
    nodes_.erase(existing);
    replaced_dead = true;
  }
  // The registration's own names for what the table checks.
  absl::StatusOr<NodeIndex> index = table_->AddNode(
      std::move(spec), {"node_id", "total.amounts", "labels", "gpus[0].accelerator_type"});
  if (!index.ok()) return index.status();
  NodeRecord record;
  record.index = *index;
  // Without what the table and the heartbeat book keep (RegistrationOf
  // puts it back).
  v1::RegisterNodeRequest kept = request;
  kept.clear_total();
  kept.clear_labels();
  kept.clear_address();
  record.registration = kept.SerializeAsString();
  nodes_[request.node_id()] = std::move(record);
  Withhold(request.node_id(), *index, *std::move(unhealthy));
  heartbeats_->Registered(request.node_id(), request.address(), now_ms);
  return Registration{*index, replaced_dead};
}

absl::StatusOr<bool> NodeManager::SetUnhealthyGpus(
    const std::string& node_id,
    const google::protobuf::RepeatedPtrField<v1::UnhealthyGpu>& unhealthy) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end())
    return absl::NotFoundError(absl::StrCat("node_id: no node '", node_id, "'"));
  v1::RegisterNodeRequest registration;
  registration.ParseFromString(it->second.registration);
  absl::StatusOr<std::map<uint32_t, v1::UnhealthyGpu>> by_index =
      UnhealthyByIndex(unhealthy, registration.gpus_size());
  if (!by_index.ok()) return by_index.status();
  if (SameGpus(*by_index, UnhealthyGpus(node_id))) return false;
  *registration.mutable_unhealthy_gpus() = unhealthy;
  it->second.registration = registration.SerializeAsString();
  Withhold(node_id, it->second.index, *std::move(by_index));
  return true;
}

void NodeManager::Withhold(const std::string& node_id, NodeIndex index,
                           std::map<uint32_t, v1::UnhealthyGpu> unhealthy) {
  if (unhealthy.empty() && unhealthy_.count(node_id) == 0) return;  // healthy, as it was
  ++gpu_health_version_;
  const uint32_t count = table_->node(index).gpus.count();
  for (uint32_t gpu = 0; gpu < count; ++gpu) {
    // Both known to exist: the GPUs were checked against the registration.
    table_->SetGpuWithheld(index, gpu, unhealthy.count(gpu) > 0).IgnoreError();
  }
  if (unhealthy.empty()) {
    unhealthy_.erase(node_id);
  } else {
    unhealthy_[node_id] = std::move(unhealthy);
  }
}

const std::map<uint32_t, v1::UnhealthyGpu>& NodeManager::UnhealthyGpus(
    const std::string& node_id) const {
  static const std::map<uint32_t, v1::UnhealthyGpu> kNone;
  if (unhealthy_.empty()) return kNone;  // as a rule: asked of every placed bundle
  auto it = unhealthy_.find(node_id);
  return it == unhealthy_.end() ? kNone : it->second;
}

bool NodeManager::MarkDead(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || table_->node(it->second.index).state == NodeState::kDead) return false;
  return table_->SetNodeState(node_id, NodeState::kDead).ok();
}

std::optional<v1::RegisterNodeRequest> NodeManager::RegistrationOf(
    const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  v1::RegisterNodeRequest registration;
  registration.ParseFromString(it->second.registration);
  // The table's totals and labels, less what it derived from the node's
  // accelerator type.
  const NodeResourceTable::Node& node = table_->node(it->second.index);
  ResourceSetToProto(WithoutAcceleratorTypes(node.total), registration.mutable_total());
  for (const auto& [key, value] : node.labels) {
    if (key != kAcceleratorTypeLabel) (*registration.mutable_labels())[key] = value;
  }
  if (std::optional<HeartbeatBook::Entry> heard = heartbeats_->Find(node_id)) {
    registration.set_address(std::move(heard->address));
  }
  return registration;
}

std::string NodeManager::DrainReason(const std::string& node_id) const {
  auto it = drains_.find(node_id);
  return it == drains_.end() ? "" : it->second.reason;
}

absl::Status NodeManager::Drain(const v1::DrainNodeRequest& request) {
  if (absl::Status s = ValidateString(request.node_id(), "node_id", 128, true); !s.ok()) return s;
  if (absl::Status s = ValidateString(request.reason(), "reason", 1024, false); !s.ok()) return s;
  auto it = nodes_.find(request.node_id());
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat("node_id: no node '", request.node_id(), "'"));
  }
  if (table_->node(it->second.index).state == NodeState::kDead) {
    return absl::FailedPreconditionError(
        absl::StrCat("node_id: node '", request.node_id(), "' is DEAD"));
  }
  if (request.deadline_unix_ms() < 0) {
    return absl::InvalidArgumentError("deadline_unix_ms: must be 0 (none) or a time");
  }
  if (absl::Status s = table_->SetNodeState(request.node_id(), NodeState::kDraining); !s.ok()) {
    return s;
  }
  drains_[request.node_id()] = {request.reason().empty() ? "drained by operator" : request.reason(),
                                request.deadline_unix_ms()};
  heartbeats_->SetDraining(request.node_id(), true);
  return absl::OkStatus();
}

absl::Status NodeManager::Undrain(const std::string& node_id) {
  if (absl::Status s = ValidateString(node_id, "node_id", 128, true); !s.ok()) return s;
  auto it = nodes_.find(node_id);
  if (it == nodes_.end())
    return absl::NotFoundError(absl::StrCat("node_id: no node '", node_id, "'"));
  const NodeState state = table_->node(it->second.index).state;
  if (state != NodeState::kDraining) {
    return absl::FailedPreconditionError(
        absl::StrCat("node_id: node '", node_id, "' is ", NodeStateName(state), ", not DRAINING"));
  }
  if (absl::Status s = table_->SetNodeState(node_id, NodeState::kAlive); !s.ok()) return s;
  drains_.erase(node_id);
  heartbeats_->SetDraining(node_id, false);
  return absl::OkStatus();
}

std::string NodeManager::Address(NodeIndex index) const {
  const NodeResourceTable::Node& node = table_->node(index);
  if (node.removed || node.state == NodeState::kDead) return "";
  return heartbeats_->Address(node.id);
}

absl::Status NodeManager::ListNodes(const v1::ListNodesRequest& request,
                                    v1::ListNodesResponse* response) const {
  absl::StatusOr<LabelSelector> selector = LabelSelectorFromProto(request.selector(), "selector");
  if (!selector.ok()) return selector.status();
  std::vector<const std::pair<const std::string, NodeRecord>*> sorted;
  for (const auto& entry : nodes_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* entry : sorted) {
    const NodeRecord& record = entry->second;
    const NodeResourceTable::Node& node = table_->node(record.index);
    const v1::NodeState state = NodeStateToProto(node.state);
    if (request.states_size() > 0 && std::find(request.states().begin(), request.states().end(),
                                               state) == request.states().end()) {
      continue;
    }
    if (!selector->Matches(node.labels)) continue;
    v1::NodeInfo* info = response->add_nodes();
    info->set_node_id(node.id);
    v1::RegisterNodeRequest registration;
    registration.ParseFromString(record.registration);
    const HeartbeatBook::Entry heard = heartbeats_->Find(node.id).value_or(HeartbeatBook::Entry());
    info->set_address(heard.address);
    info->set_metrics_address(registration.metrics_address());
    info->set_state(state);
    ResourceSetToProto(node.total, info->mutable_total());
    // Nothing can be placed on a DEAD node, whatever its books say is free.
    if (node.state != NodeState::kDead) {
      ResourceSetToProto(node.available, info->mutable_available());
    }
    info->mutable_labels()->insert(node.labels.begin(), node.labels.end());
    *info->mutable_gpus() = registration.gpus();
    *info->mutable_unhealthy_gpus() = registration.unhealthy_gpus();
    info->set_last_heartbeat_unix_ms(heard.last_heard_ms);
    info->set_drain_reason(DrainReason(node.id));
    if (auto drain = drains_.find(node.id);
        drain != drains_.end() && node.state == NodeState::kDraining)
      info->set_drain_deadline_unix_ms(drain->second.deadline_ms);
  }
  return absl::OkStatus();
}

}  // namespace berth
