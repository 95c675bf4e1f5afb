// Conversions between the wire types (berth.v1 protos) and the placement
// core's types, shared by the head, the raylet and the client.
//
// Conversions from the wire validate like the core does and name the field
// path in errors (`bundles[2].resources.amounts["GPU"]`), so every daemon
// rejects the same bad input with the same message.
#ifndef BERTH_WIRE_PROTO_CONVERT_H_
#define BERTH_WIRE_PROTO_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/v1/common.pb.h"
#include "grpcpp/support/status.h"
#include "placement/gpu_instances.h"
#include "placement/label_selector.h"
#include "placement/node_resource_table.h"
#include "placement/placement_group_spec.h"
#include "placement/resource_set.h"

namespace berth {

absl::StatusOr<ResourceSet> ResourceSetFromProto(const v1::ResourceSet& proto,
                                                 absl::string_view field);
void ResourceSetToProto(const ResourceSet& set, v1::ResourceSet* proto);

absl::StatusOr<LabelSelector> LabelSelectorFromProto(const v1::LabelSelector& proto,
                                                     absl::string_view field);
void LabelSelectorToProto(const LabelSelector& selector, v1::LabelSelector* proto);

// Shares must name distinct instances with 1..10000 units each.
absl::StatusOr<std::vector<GpuShare>> GpuSharesFromProto(
    const google::protobuf::RepeatedPtrField<v1::GpuShare>& proto, absl::string_view field);
void GpuSharesToProto(const std::vector<GpuShare>& shares,
                      google::protobuf::RepeatedPtrField<v1::GpuShare>* proto);

// Bundles from the API. Users may not write `accelerator_type:` resources;
// they select accelerators with the `berth.io/accelerator-type` label.
// `allow_internal` accepts them, for bundles berth built itself (a train
// group's, as the head reports them in pending demand).
absl::StatusOr<PlacementGroupSpec> PlacementGroupSpecFromProto(
    const google::protobuf::RepeatedPtrField<v1::Bundle>& bundles, v1::PlacementStrategy strategy,
    bool allow_internal = false, const v1::Topology& topology = v1::Topology::default_instance());
void BundleToProto(const Bundle& bundle, v1::Bundle* proto);
Topology TopologyFromProto(const v1::Topology& proto);
void TopologyToProto(const Topology& topology, v1::Topology* proto);

v1::PlacementStrategy StrategyToProto(PlacementStrategy strategy);
v1::NodeState NodeStateToProto(NodeState state);

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);
// grpc::Status -> absl::Status, for clients.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Checks a caller-supplied string: at most `max` bytes; `required` = non-empty.
absl::Status ValidateString(absl::string_view value, absl::string_view field, size_t max,
                            bool required);

}  // namespace berth

#endif  // BERTH_WIRE_PROTO_CONVERT_H_
