#include "scheduler/two_phase_commit.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

std::string RequestId(const CommitTask& task, const NodeBundles& node, absl::string_view phase) {
  return absl::StrCat(task.placement_group_id, "/", task.attempt, "/", node.node_id, "/", phase);
}

}  // namespace

v1::BundleOp TwoPhaseCommit::Prepare(size_t i) const {
  const NodeBundles& node = task_.nodes.at(i);
  v1::BundleOp op;
  v1::PrepareBundleResourcesRequest& request = *op.mutable_prepare();
  request.set_placement_group_id(task_.placement_group_id);
  request.set_request_id(RequestId(task_, node, single_node() ? "prepare+commit" : "prepare"));
  request.set_commit(single_node());
  for (const RayletBundle& b : node.bundles) {
    v1::BundleReservation* r = request.add_bundles();
    r->set_bundle_index(b.bundle_index);
    ResourceSetToProto(b.resources, r->mutable_resources());
    GpuSharesToProto(b.gpus, r->mutable_gpus());
  }
  return op;
}

v1::BundleOp TwoPhaseCommit::Commit(size_t i) const {
  const NodeBundles& node = task_.nodes.at(i);
  v1::BundleOp op;
  v1::CommitBundleResourcesRequest& request = *op.mutable_commit();
  request.set_placement_group_id(task_.placement_group_id);
  request.set_request_id(RequestId(task_, node, "commit"));
  for (const RayletBundle& b : node.bundles) request.add_bundle_indices(b.bundle_index);
  return op;
}

std::vector<CancelTask> TwoPhaseCommit::CancelAll() const {
  std::vector<CancelTask> cancels;
  for (const NodeBundles& node : task_.nodes) {
    CancelTask& cancel = cancels.emplace_back();
    cancel.placement_group_id = task_.placement_group_id;
    cancel.address = node.address;
    cancel.request_id = RequestId(task_, node, "cancel");
    for (const RayletBundle& b : node.bundles) cancel.bundle_indices.push_back(b.bundle_index);
  }
  return cancels;
}

bool TwoPhaseCommit::OnPrepareAnswer(size_t i, const absl::Status& call,
                                     const v1::PrepareBundleResourcesResponse& response) {
  const std::string& node = task_.nodes.at(i).node_id;
  absl::Status outcome;
  if (!call.ok()) {
    outcome = absl::Status(call.code(), absl::StrCat("prepare on ", node, ": ", call.message()));
  } else if (!response.prepared()) {
    outcome = absl::UnavailableError(
        absl::StrCat("node ", node, " refused to prepare: ", response.reason()));
  }
  return Answer(std::move(outcome), &prepare_answers_);
}

bool TwoPhaseCommit::OnCommitAnswer(size_t i, const absl::Status& call) {
  absl::Status outcome;
  if (!call.ok()) {
    outcome = absl::Status(
        call.code(), absl::StrCat("commit on ", task_.nodes.at(i).node_id, ": ", call.message()));
  }
  return Answer(std::move(outcome), &commit_answers_);
}

bool TwoPhaseCommit::Answer(absl::Status outcome, size_t* answers) {
  absl::MutexLock lock(&mu_);
  if (!outcome.ok() && first_error_.ok()) first_error_ = std::move(outcome);
  return ++*answers == task_.nodes.size();
}

absl::Status TwoPhaseCommit::status() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

}  // namespace berth
