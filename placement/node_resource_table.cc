#include "placement/node_resource_table.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kAlive:
      return "ALIVE";
    case NodeState::kDraining:
      return "DRAINING";
    case NodeState::kDead:
      return "DEAD";
  }
  return "UNKNOWN";
}

absl::string_view IndexedResourceName(IndexedResource r) {
  switch (r) {
    case IndexedResource::kCpu:
      return kCpu;
    case IndexedResource::kGpu:
      return kGpu;
    case IndexedResource::kMemory:
      return kMemory;
  }
  return "";
}

int64_t NodeResourceTable::IndexKey(const ResourceSet& set, IndexedResource r) {
  return set.Get(IndexedResourceName(r)).units();
}

NodeSpecFields NodeSpecFields::Under(absl::string_view prefix) {
  return {absl::StrCat(prefix, ".node_id"), absl::StrCat(prefix, ".resources"),
          absl::StrCat(prefix, ".labels"), absl::StrCat(prefix, ".accelerator_type")};
}

absl::StatusOr<NodeIndex> NodeResourceTable::AddNode(NodeSpec spec, const NodeSpecFields& fields) {
  if (spec.node_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(fields.node_id, ": empty"));
  }
  if (by_id_.contains(spec.node_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat(fields.node_id, ": node '", spec.node_id, "' is already registered"));
  }
  for (const auto& [name, amount] : spec.resources.entries()) {
    const std::string where = absl::StrCat(fields.resources, "[\"", name.str(), "\"]");
    if (absl::Status s = ValidateResourceName(name, fields.resources); !s.ok()) {
      return s;
    }
    if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
      return InternalAcceleratorResource(where, *type,
                                         "the head sets it from the node's accelerator_type");
    }
    if (amount > Quantity::FromUnits(Quantity::kMaxUnits)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": larger than the maximum quantity"));
    }
  }
  const Quantity gpus = spec.resources.Get(kGpu);
  if (!gpus.IsWhole()) {
    return absl::InvalidArgumentError(absl::StrCat(fields.resources, "[\"GPU\"]: ", gpus.ToString(),
                                                   ": a node has a whole number of GPU instances"));
  }
  if (gpus > Quantity::Whole(1024)) {
    return absl::InvalidArgumentError(
        absl::StrCat(fields.resources, "[\"GPU\"]: more than 1024 GPU instances on one node"));
  }
  for (const auto& [key, value] : spec.labels) {
    if (absl::Status s = ValidateLabelKey(key, fields.labels); !s.ok()) return s;
    if (absl::Status s = ValidateLabelValue(value, absl::StrCat(fields.labels, "[\"", key, "\"]"));
        !s.ok()) {
      return s;
    }
  }
  // The accelerator label follows accelerator_type, so selectors on it and the
  // accelerator pools always agree.
  auto label = spec.labels.find(std::string(kAcceleratorTypeLabel));
  if (label != spec.labels.end() && label->second != spec.accelerator_type) {
    return absl::InvalidArgumentError(
        absl::StrCat(fields.labels, "[\"", kAcceleratorTypeLabel, "\"]: '", label->second,
                     "' disagrees with accelerator_type '", spec.accelerator_type,
                     "'; set accelerator_type and berth sets the label"));
  }
  if (!spec.accelerator_type.empty()) {
    if (gpus.IsZero()) {
      return absl::InvalidArgumentError(absl::StrCat(fields.accelerator_type, ": '",
                                                     spec.accelerator_type,
                                                     "' given for a node without GPUs"));
    }
    if (absl::Status s = ValidateLabelValue(spec.accelerator_type, fields.accelerator_type);
        !s.ok() || spec.accelerator_type.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(fields.accelerator_type, ": '",
                                                     spec.accelerator_type,
                                                     "' may use only letters, digits and _ . / -"));
    }
    spec.resources.Set(AcceleratorResourceName(spec.accelerator_type), Quantity::Whole(1));
    spec.labels[std::string(kAcceleratorTypeLabel)] = spec.accelerator_type;
  }

  auto [pool_it, new_pool] = pool_by_key_.try_emplace(
      std::make_pair(spec.accelerator_type, !gpus.IsZero()), static_cast<uint32_t>(pools_.size()));
  if (new_pool) {
    pools_.emplace_back();
    pools_.back().accelerator_type = spec.accelerator_type;
    pools_.back().has_gpus = !gpus.IsZero();
  }

  const NodeIndex index = static_cast<NodeIndex>(nodes_.size());
  Node node;
  node.id = spec.node_id;
  node.total = spec.resources;
  node.available = spec.resources;
  node.labels = std::move(spec.labels);
  node.accelerator_type = std::move(spec.accelerator_type);
  node.gpus = GpuInstances(static_cast<uint32_t>(gpus.units() / Quantity::kUnitsPerWhole));
  node.pool = pool_it->second;
  for (const auto& [key, value] : node.labels) ++label_keys_[key];
  nodes_.push_back(std::move(node));
  by_id_[spec.node_id] = index;
  Index(index);
  return index;
}

std::optional<NodeIndex> NodeResourceTable::FindNode(absl::string_view node_id) const {
  auto it = by_id_.find(node_id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

const NodeResourceTable::Pool* NodeResourceTable::FindPool(absl::string_view accelerator_type,
                                                           bool has_gpus) const {
  auto it = pool_by_key_.find(std::make_pair(std::string(accelerator_type), has_gpus));
  return it == pool_by_key_.end() ? nullptr : &pools_[it->second];
}

void NodeResourceTable::Index(NodeIndex index) {
  Node& node = nodes_[index];
  Pool& pool = pools_[node.pool];
  for (int r = 0; r < kNumIndexedResources; ++r) {
    const auto res = static_cast<IndexedResource>(r);
    pool.by_free[r].insert({IndexKey(node.available, res), index});
    pool.by_total[r].insert({IndexKey(node.total, res), index});
  }
  for (const auto& [name, amount] : node.total.entries())
    alive_total_[name.str()] += amount.units();
  CountInDomains(index, 1);
  ++alive_count_;
  ++alive_version_;
  Touch(index);
}

void NodeResourceTable::Unindex(NodeIndex index) {
  Node& node = nodes_[index];
  Pool& pool = pools_[node.pool];
  for (int r = 0; r < kNumIndexedResources; ++r) {
    const auto res = static_cast<IndexedResource>(r);
    pool.by_free[r].erase({IndexKey(node.available, res), index});
    pool.by_total[r].erase({IndexKey(node.total, res), index});
  }
  for (const auto& [name, amount] : node.total.entries()) {
    auto it = alive_total_.find(name);
    it->second -= amount.units();
    if (it->second == 0) alive_total_.erase(it);
  }
  CountInDomains(index, -1);
  --alive_count_;
  ++alive_version_;
  Touch(index);
}

NodeResourceTable::IndexKeys NodeResourceTable::KeysOf(const ResourceSet& set) {
  IndexKeys keys;
  for (int r = 0; r < kNumIndexedResources; ++r) {
    keys[r] = IndexKey(set, static_cast<IndexedResource>(r));
  }
  return keys;
}

void NodeResourceTable::Reindex(NodeIndex index, const IndexKeys& before) {
  Node& node = nodes_[index];
  if (node.state != NodeState::kAlive || node.removed) return;
  Pool& pool = pools_[node.pool];
  const IndexKeys after = KeysOf(node.available);
  for (int r = 0; r < kNumIndexedResources; ++r) {
    if (before[r] == after[r]) continue;
    pool.by_free[r].erase({before[r], index});
    pool.by_free[r].insert({after[r], index});
  }
  for (auto& [key, domains] : domains_) {
    if (Domain* d = DomainOf(key, index, &domains)) {
      for (int r = 0; r < kNumIndexedResources; ++r) d->free[r] += after[r] - before[r];
    }
  }
  Touch(index);
}

void NodeResourceTable::CountInDomains(NodeIndex index, int sign) {
  for (auto& [key, domains] : domains_) CountInDomain(key, index, sign, &domains);
}

NodeResourceTable::Domain* NodeResourceTable::DomainOf(const std::string& key, NodeIndex index,
                                                       DomainIndex* domains) {
  const Node& node = nodes_[index];
  auto label = node.labels.find(key);
  if (label == node.labels.end()) return nullptr;
  auto [it, added] =
      domains->by_value.try_emplace(label->second, static_cast<uint32_t>(domains->domains.size()));
  if (added) domains->domains.push_back(Domain{label->second, {}, {}, {}});
  return &domains->domains[it->second];
}

void NodeResourceTable::CountInDomain(const std::string& key, NodeIndex index, int sign,
                                      DomainIndex* domains) {
  Domain* d = DomainOf(key, index, domains);
  if (d == nullptr) return;
  const Node& node = nodes_[index];
  for (int r = 0; r < kNumIndexedResources; ++r) {
    const auto res = static_cast<IndexedResource>(r);
    d->free[r] += sign * IndexKey(node.available, res);
    d->total[r] += sign * IndexKey(node.total, res);
  }
  if (sign > 0) {
    d->nodes.insert(index);
  } else {
    d->nodes.erase(index);
  }
}

const NodeResourceTable::DomainIndex& NodeResourceTable::Domains(const std::string& key) {
  auto [it, added] = domains_.try_emplace(key);
  if (added) {
    for (NodeIndex n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      if (node.removed || node.state != NodeState::kAlive) continue;
      CountInDomain(key, n, 1, &it->second);
    }
  }
  return it->second;
}

void NodeResourceTable::Touch(NodeIndex index) {
  if (changed_at_.size() <= index) changed_at_.resize(nodes_.size(), 0);
  if (changed_at_[index] != 0) changes_.erase({changed_at_[index], index});
  changed_at_[index] = ++change_count_;
  changes_.insert({change_count_, index});
}

absl::Status NodeResourceTable::SetNodeState(absl::string_view node_id, NodeState state) {
  std::optional<NodeIndex> index = FindNode(node_id);
  if (!index) return absl::NotFoundError(absl::StrCat("node '", node_id, "' is not registered"));
  Node& node = nodes_[*index];
  if (node.state == state) return absl::OkStatus();
  if (node.state == NodeState::kDead) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", node_id, "' is DEAD; it must register again"));
  }
  if (node.state == NodeState::kAlive) Unindex(*index);
  node.state = state;
  if (state == NodeState::kAlive) Index(*index);
  return absl::OkStatus();
}

absl::Status NodeResourceTable::RemoveNode(absl::string_view node_id) {
  std::optional<NodeIndex> index = FindNode(node_id);
  if (!index) return absl::NotFoundError(absl::StrCat("node '", node_id, "' is not registered"));
  Node& node = nodes_[*index];
  if (node.state == NodeState::kAlive) Unindex(*index);
  for (const auto& [key, value] : node.labels) {
    auto it = label_keys_.find(key);
    if (--it->second == 0) label_keys_.erase(it);
  }
  node.removed = true;
  node.state = NodeState::kDead;
  by_id_.erase(node.id);
  return absl::OkStatus();
}

bool NodeResourceTable::AliveTotalCovers(const ResourceSet& demand) const {
  for (const auto& [name, amount] : demand.entries()) {
    auto it = alive_total_.find(name);
    if (it == alive_total_.end() || it->second < amount.units()) return false;
  }
  return true;
}

Quantity NodeResourceTable::AliveTotal(absl::string_view name) const {
  auto it = alive_total_.find(name);
  if (it == alive_total_.end()) return Quantity();
  return Quantity::FromUnits(it->second > INT64_MAX ? INT64_MAX : static_cast<int64_t>(it->second));
}

bool NodeResourceTable::CanAllocate(NodeIndex index, const ResourceSet& request) const {
  const Node& node = nodes_[index];
  return !node.removed && node.available.Contains(request) &&
         node.gpus.CanAllocate(request.Get(kGpu));
}

bool NodeResourceTable::FitsTotal(NodeIndex index, const ResourceSet& request) const {
  const Node& node = nodes_[index];
  return node.total.Contains(request) &&
         GpuInstances::FitsCapacity(request.Get(kGpu), node.gpus.count());
}

absl::StatusOr<Allocation> NodeResourceTable::Allocate(NodeIndex index,
                                                       const ResourceSet& request) {
  if (index >= nodes_.size() || nodes_[index].removed) {
    return absl::NotFoundError(absl::StrCat("node slot ", index, " is not registered"));
  }
  Node& node = nodes_[index];
  if (absl::Status s = ValidateGpuRequest(request.Get(kGpu), "request[\"GPU\"]"); !s.ok()) return s;
  if (!CanAllocate(index, request)) {
    return absl::ResourceExhaustedError(absl::StrCat("node '", node.id, "' cannot fit ",
                                                     request.ToString(), " now; free ",
                                                     node.available.ToString()));
  }
  const IndexKeys before = KeysOf(node.available);
  absl::StatusOr<std::vector<GpuShare>> gpus = node.gpus.Allocate(request.Get(kGpu));
  if (!gpus.ok()) return gpus.status();
  // Contains() held, so the subtraction cannot go negative.
  node.available.Subtract(request).IgnoreError();
  Reindex(index, before);
  return Allocation{index, request, *std::move(gpus)};
}

absl::Status NodeResourceTable::Reserve(const Allocation& allocation) {
  if (allocation.node >= nodes_.size() || nodes_[allocation.node].removed) {
    return absl::NotFoundError(absl::StrCat("node slot ", allocation.node, " is not registered"));
  }
  Node& node = nodes_[allocation.node];
  // A withheld GPU's share was never offered, so it is not taken from what is.
  ResourceSet offered = allocation.resources;
  offered.Set(kGpu, node.gpus.OfferedOf(allocation.gpus));
  if (!node.available.Contains(offered)) {
    return absl::ResourceExhaustedError(absl::StrCat("node '", node.id, "' cannot hold ",
                                                     allocation.resources.ToString(), "; free ",
                                                     node.available.ToString()));
  }
  int64_t gpu_units = 0;
  for (const GpuShare& share : allocation.gpus) gpu_units += share.amount.units();
  if (gpu_units != allocation.resources.Get(kGpu).units()) {
    return absl::InvalidArgumentError("allocation: its GPU shares do not add up to its GPU amount");
  }
  if (absl::Status s = node.gpus.Take(allocation.gpus); !s.ok()) return s;
  const IndexKeys before = KeysOf(node.available);
  node.available.Subtract(offered).IgnoreError();
  Reindex(allocation.node, before);
  return absl::OkStatus();
}

absl::Status NodeResourceTable::Release(const Allocation& allocation) {
  if (allocation.node >= nodes_.size() || nodes_[allocation.node].removed) {
    return absl::NotFoundError(
        absl::StrCat("node slot ", allocation.node, " is no longer registered"));
  }
  Node& node = nodes_[allocation.node];
  int64_t gpu_units = 0;
  for (const GpuShare& share : allocation.gpus) gpu_units += share.amount.units();
  if (gpu_units != allocation.resources.Get(kGpu).units()) {
    return absl::InvalidArgumentError("allocation: its GPU shares do not add up to its GPU amount");
  }
  // Added in place and taken back on any refusal (exact arithmetic), which
  // spares every release a copy of the node's set.
  const IndexKeys before = KeysOf(node.available);
  if (absl::Status s = node.available.Add(allocation.resources); !s.ok()) return s;
  absl::Status refused;
  if (!node.total.Contains(node.available)) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("releasing ", allocation.resources.ToString(), " on node '", node.id,
                     "' would exceed its totals: release does not match an allocation"));
  } else {
    refused = node.gpus.Release(allocation.gpus);
  }
  if (!refused.ok()) {
    node.available.Subtract(allocation.resources).IgnoreError();
    return refused;
  }
  // What it held of withheld GPUs is kept back.
  if (const int64_t kept = gpu_units - node.gpus.OfferedOf(allocation.gpus).units(); kept > 0) {
    node.available.Set(kGpu, Quantity::FromUnits(node.available.Get(kGpu).units() - kept));
  }
  Reindex(allocation.node, before);
  return absl::OkStatus();
}

absl::Status NodeResourceTable::SetGpuWithheld(NodeIndex index, uint32_t gpu, bool withheld) {
  if (index >= nodes_.size() || nodes_[index].removed) {
    return absl::NotFoundError(absl::StrCat("node slot ", index, " is not registered"));
  }
  Node& node = nodes_[index];
  if (gpu >= node.gpus.count()) {
    return absl::NotFoundError(absl::StrCat("node '", node.id, "' has no GPU ", gpu));
  }
  if (node.gpus.withheld(gpu) == withheld) return absl::OkStatus();
  const IndexKeys before = KeysOf(node.available);
  // free() is the room the instance offers: read while it offers it.
  const Quantity room = withheld ? node.gpus.free(gpu) : Quantity();
  node.gpus.SetWithheld(gpu, withheld);
  const int64_t change = withheld ? -room.units() : node.gpus.free(gpu).units();
  node.available.Set(kGpu, Quantity::FromUnits(node.available.Get(kGpu).units() + change));
  Reindex(index, before);
  return absl::OkStatus();
}

}  // namespace berth
