#include "wire/proto_convert.h"

#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::StatusOr<ResourceSet> ResourceSetFromProto(const v1::ResourceSet& proto,
                                                 absl::string_view field) {
  std::map<std::string, double> amounts(proto.amounts().begin(), proto.amounts().end());
  return ResourceSet::FromDoubles(amounts, absl::StrCat(field, ".amounts"));
}

void ResourceSetToProto(const ResourceSet& set, v1::ResourceSet* proto) {
  proto->clear_amounts();
  for (const auto& [name, amount] : set.entries())
    (*proto->mutable_amounts())[name] = amount.ToDouble();
}

absl::StatusOr<LabelSelector> LabelSelectorFromProto(const v1::LabelSelector& proto,
                                                     absl::string_view field) {
  std::vector<LabelRequirement> requirements;
  for (int i = 0; i < proto.requirements_size(); ++i) {
    const v1::LabelSelectorRequirement& r = proto.requirements(i);
    LabelRequirement req;
    req.key = r.key();
    switch (r.op()) {
      case v1::LABEL_OPERATOR_IN:
        req.op = LabelOperator::kIn;
        break;
      case v1::LABEL_OPERATOR_NOT_IN:
        req.op = LabelOperator::kNotIn;
        break;
      case v1::LABEL_OPERATOR_EXISTS:
        req.op = LabelOperator::kExists;
        break;
      case v1::LABEL_OPERATOR_DOES_NOT_EXIST:
        req.op = LabelOperator::kDoesNotExist;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".requirements[", i, "].op: ", "unknown operator ", r.op()));
    }
    req.values.assign(r.values().begin(), r.values().end());
    requirements.push_back(std::move(req));
  }
  return LabelSelector::Create(std::move(requirements), field);
}

void LabelSelectorToProto(const LabelSelector& selector, v1::LabelSelector* proto) {
  proto->clear_requirements();
  for (const LabelRequirement& r : selector.requirements()) {
    v1::LabelSelectorRequirement* out = proto->add_requirements();
    out->set_key(r.key);
    switch (r.op) {
      case LabelOperator::kIn:
        out->set_op(v1::LABEL_OPERATOR_IN);
        break;
      case LabelOperator::kNotIn:
        out->set_op(v1::LABEL_OPERATOR_NOT_IN);
        break;
      case LabelOperator::kExists:
        out->set_op(v1::LABEL_OPERATOR_EXISTS);
        break;
      case LabelOperator::kDoesNotExist:
        out->set_op(v1::LABEL_OPERATOR_DOES_NOT_EXIST);
        break;
    }
    for (const std::string& v : r.values) out->add_values(v);
  }
}

absl::StatusOr<std::vector<GpuShare>> GpuSharesFromProto(
    const google::protobuf::RepeatedPtrField<v1::GpuShare>& proto, absl::string_view field) {
  std::vector<GpuShare> shares;
  absl::flat_hash_set<uint32_t> seen;
  for (int i = 0; i < proto.size(); ++i) {
    const v1::GpuShare& s = proto[i];
    if (s.units() < 1 || s.units() > Quantity::kUnitsPerWhole) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].units: ", s.units(), " is not in 1..10000"));
    }
    if (!seen.insert(s.index()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].index: GPU ", s.index(), " listed twice"));
    }
    shares.push_back({s.index(), Quantity::FromUnits(s.units())});
  }
  return shares;
}

void GpuSharesToProto(const std::vector<GpuShare>& shares,
                      google::protobuf::RepeatedPtrField<v1::GpuShare>* proto) {
  proto->Clear();
  for (const GpuShare& s : shares) {
    v1::GpuShare* out = proto->Add();
    out->set_index(s.index);
    out->set_units(s.amount.units());
  }
}

absl::StatusOr<PlacementGroupSpec> PlacementGroupSpecFromProto(
    const google::protobuf::RepeatedPtrField<v1::Bundle>& bundles, v1::PlacementStrategy strategy,
    bool allow_internal, const v1::Topology& topology) {
  PlacementStrategy s;
  switch (strategy) {
    case v1::PLACEMENT_STRATEGY_UNSPECIFIED:
    case v1::PLACEMENT_STRATEGY_PACK:
      s = PlacementStrategy::kPack;
      break;
    case v1::PLACEMENT_STRATEGY_SPREAD:
      s = PlacementStrategy::kSpread;
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_PACK:
      s = PlacementStrategy::kStrictPack;
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD:
      s = PlacementStrategy::kStrictSpread;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("strategy: unknown strategy ", strategy,
                       " (want PACK, SPREAD, STRICT_PACK or STRICT_SPREAD)"));
  }
  if (static_cast<size_t>(bundles.size()) > PlacementGroupSpec::kMaxBundles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bundles: ", bundles.size(), " bundles; at most ", PlacementGroupSpec::kMaxBundles));
  }
  std::vector<Bundle> out;
  for (int i = 0; i < bundles.size(); ++i) {
    const std::string field = absl::StrCat("bundles[", i, "]");
    for (const auto& [name, amount] : bundles[i].resources().amounts()) {
      std::optional<absl::string_view> type = PinnedAcceleratorType(name);
      if (!allow_internal && type) {
        return InternalAcceleratorResource(
            absl::StrCat(field, ".resources.amounts[\"", name, "\"]"), *type,
            absl::StrCat("select the accelerator with ", field,
                         ".selector: ", kAcceleratorTypeLabel, " in ($0)"));
      }
    }
    absl::StatusOr<ResourceSet> resources =
        ResourceSetFromProto(bundles[i].resources(), absl::StrCat(field, ".resources"));
    if (!resources.ok()) return resources.status();
    absl::StatusOr<LabelSelector> selector =
        LabelSelectorFromProto(bundles[i].selector(), absl::StrCat(field, ".selector"));
    if (!selector.ok()) return selector.status();
    out.push_back({*std::move(resources), *std::move(selector)});
  }
  return PlacementGroupSpec::Create(std::move(out), s, TopologyFromProto(topology));
}

Topology TopologyFromProto(const v1::Topology& proto) {
  return {proto.required(), {proto.preferred().begin(), proto.preferred().end()}};
}

void TopologyToProto(const Topology& topology, v1::Topology* proto) {
  proto->set_required(topology.required);
  proto->mutable_preferred()->Assign(topology.preferred.begin(), topology.preferred.end());
}

void BundleToProto(const Bundle& bundle, v1::Bundle* proto) {
  ResourceSetToProto(bundle.resources, proto->mutable_resources());
  LabelSelectorToProto(bundle.selector, proto->mutable_selector());
}

v1::PlacementStrategy StrategyToProto(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack:
      return v1::PLACEMENT_STRATEGY_PACK;
    case PlacementStrategy::kSpread:
      return v1::PLACEMENT_STRATEGY_SPREAD;
    case PlacementStrategy::kStrictPack:
      return v1::PLACEMENT_STRATEGY_STRICT_PACK;
    case PlacementStrategy::kStrictSpread:
      return v1::PLACEMENT_STRATEGY_STRICT_SPREAD;
  }
  return v1::PLACEMENT_STRATEGY_UNSPECIFIED;
}

v1::NodeState NodeStateToProto(NodeState state) {
  switch (state) {
    case NodeState::kAlive:
      return v1::NODE_STATE_ALIVE;
    case NodeState::kDraining:
      return v1::NODE_STATE_DRAINING;
    case NodeState::kDead:
      return v1::NODE_STATE_DEAD;
  }
  return v1::NODE_STATE_UNSPECIFIED;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status ValidateString(absl::string_view value, absl::string_view field, size_t max,
                            bool required) {
  if (required && value.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value.size(), " bytes; at most ", max));
  }
  return absl::OkStatus();
}

}  // namespace berth
