#include "scheduler/node_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"

namespace berth {

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
  heartbeats_->Registered(request.node_id(), request.address(), now_ms);
  return Registration{*index, replaced_dead};
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
    info->set_last_heartbeat_unix_ms(heard.last_heard_ms);
    info->set_drain_reason(DrainReason(node.id));
    if (auto drain = drains_.find(node.id);
        drain != drains_.end() && node.state == NodeState::kDraining)
      info->set_drain_deadline_unix_ms(drain->second.deadline_ms);
  }
  return absl::OkStatus();
}

}  // namespace berth
