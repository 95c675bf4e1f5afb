#include "scheduler/bundle_committer.h"

#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"

namespace berth {
namespace {

std::string RequestId(const CommitTask& task, const NodeBundles& node, absl::string_view phase) {
  return absl::StrCat(task.placement_group_id, "/", task.attempt, "/", node.node_id, "/", phase);
}

}  // namespace

v1::PrepareBundleResourcesRequest BundleCommitter::PrepareRequest(const CommitTask& task,
                                                                 const NodeBundles& node) {
  // A group on one node has one participant: prepare and commit in one call.
  const bool single = task.nodes.size() == 1;
  v1::PrepareBundleResourcesRequest request;
  request.set_placement_group_id(task.placement_group_id);
  request.set_request_id(RequestId(task, node, single ? "prepare+commit" : "prepare"));
  request.set_commit(single);
  for (const RayletBundle& b : node.bundles) {
    v1::BundleReservation* r = request.add_bundles();
    r->set_bundle_index(b.bundle_index);
    ResourceSetToProto(b.resources, r->mutable_resources());
    GpuSharesToProto(b.gpus, r->mutable_gpus());
  }
  return request;
}

absl::Status BundleCommitter::PrepareOutcome(
    const NodeBundles& node, const absl::StatusOr<v1::PrepareBundleResourcesResponse>& response) {
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("prepare on ", node.node_id, ": ", response.status().message()));
  }
  if (!response->prepared()) {
    return absl::UnavailableError(absl::StrCat("node ", node.node_id, " refused to prepare: ", response->reason()));
  }
  return absl::OkStatus();
}

CancelTask BundleCommitter::CancelAfterFailure(const CommitTask& task, const NodeBundles& node) {
  CancelTask cancel{task.placement_group_id, node.address, {}, RequestId(task, node, "cancel")};
  for (const RayletBundle& b : node.bundles) cancel.bundle_indices.push_back(b.bundle_index);
  return cancel;
}

absl::Status BundleCommitter::Run(const CommitTask& task, const std::function<void()>& on_prepared) {
  const bool single = task.nodes.size() == 1;
  auto prepare = [this, &task](const NodeBundles& node) -> absl::Status {
    return PrepareOutcome(node, raylets_->Prepare(node.address, PrepareRequest(task, node)));
  };
  absl::Status first_error;
  if (single) {
    first_error = prepare(task.nodes[0]);
  } else {
    std::vector<std::future<absl::Status>> prepares;
    for (const NodeBundles& node : task.nodes) {
      prepares.push_back(std::async(std::launch::async, prepare, std::cref(node)));
    }
    for (auto& p : prepares) {
      absl::Status s = p.get();
      if (!s.ok() && first_error.ok()) first_error = s;
    }
  }
  // Cancel every node, not just those that answered: a node may have
  // prepared just before its call timed out. Cancelling is idempotent.
  auto cancel_all = [&] {
    for (const NodeBundles& node : task.nodes) Cancel(CancelAfterFailure(task, node));
  };
  if (!first_error.ok()) {
    cancel_all();
    return first_error;
  }
  on_prepared();
  if (single) return absl::OkStatus();  // committed with the prepare
  for (const NodeBundles& node : task.nodes) {
    v1::CommitBundleResourcesRequest request;
    request.set_placement_group_id(task.placement_group_id);
    request.set_request_id(RequestId(task, node, "commit"));
    for (const RayletBundle& b : node.bundles) request.add_bundle_indices(b.bundle_index);
    absl::Status s = raylets_->Commit(node.address, request);
    if (!s.ok()) s = raylets_->Commit(node.address, request);  // idempotent: one retry
    if (!s.ok()) {
      cancel_all();
      return absl::Status(s.code(), absl::StrCat("commit on ", node.node_id, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

void BundleCommitter::Cancel(const CancelTask& task) {
  v1::CancelResourceReserveRequest request;
  request.set_placement_group_id(task.placement_group_id);
  request.set_request_id(task.request_id);
  for (uint32_t b : task.bundle_indices) request.add_bundle_indices(b);
  if (!raylets_->Cancel(task.address, request).ok()) raylets_->Cancel(task.address, request).IgnoreError();
}

}  // namespace berth
