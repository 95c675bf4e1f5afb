#include "scheduler/head_state.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/random_id.h"
#include "wire/proto_convert.h"
#include "wire/queue_convert.h"

namespace berth {

int64_t HeadNowMs() { return absl::ToUnixMillis(absl::Now()); }

int64_t HeadMonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AdmissionPolicy HeadAdmission(const HeadState& state, bool node_methods) {
  AdmissionPolicy policy{state.config().cluster_token, state.config().tls};
  policy.teams = &state.teams;
  policy.team_methods = {"CreatePlacementGroup",
                         "CreatePlacementGroups",
                         "GetPlacementGroup",
                         "ListPlacementGroups",
                         "WaitPlacementGroupReady",
                         "WaitPlacementGroupsReady",
                         "RemovePlacementGroup",
                         "RemovePlacementGroups",
                         "SubmitTrainJob",
                         "GetTrainJob",
                         "ListTrainJobs",
                         "StopTrainJob",
                         "StreamTrainJobLogs",
                         "StatPackage",
                         "UploadPackage",
                         "GetClusterStatus",
                         "ListNodes",
                         "GetQueue",
                         "ListQueues"};
  if (node_methods) {
    for (const char* method : {"RegisterNode", "Heartbeat", "ReportWorkerExit"}) {
      policy.role_of_method[method] = TlsRole::kNode;
    }
  }
  policy.gate = [&state](const grpc::ServerContextBase&) { return state.Serving(); };
  return policy;
}

void HeadState::StandBy(std::string why) {
  absl::MutexLock lock(&role_mu_);
  not_serving_ = std::move(why);
}

void HeadState::BecomeActive(v1::HeadInfo head) {
  absl::MutexLock lock(&role_mu_);
  not_serving_.reset();
  epoch_.store(head.epoch());
  head_ = std::move(head);
}

grpc::Status HeadState::Serving() const {
  {
    absl::MutexLock lock(&role_mu_);
    if (not_serving_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, *not_serving_);
  }
  if (!store_->ClaimUnexpired()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this head's lease on the state store lapsed: it is stepping down");
  }
  return grpc::Status::OK;
}

v1::HeadInfo HeadState::head() const {
  absl::MutexLock lock(&role_mu_);
  return head_;
}

HeadState::HeadState(HeadConfig config, std::unique_ptr<StateStore> store)
    : config_(std::move(config)),
      store_(store ? std::move(store) : NewNoStateStore()),
      writer_(store_.get()),
      packages(config_.package_limit_bytes,
               [this](const std::vector<StateStore::Write>& batch) {
                 uint64_t seq = writer_.staged();
                 for (const StateStore::Write& w : batch)
                   seq = writer_.Stage(w.table, w.key, w.value);
                 return Durable(seq);
               }),
      heartbeats(config_.liveness),
      nodes(&table, &heartbeats),
      groups(&table, &nodes, config_.scheduler) {
  groups.set_observer(&metrics_);
}

uint64_t HeadState::PersistLocked() {
  uint64_t seq = writer_.staged();
  std::vector<std::string> changed = groups.TakeChanged();
  // Every group change comes here: a store that keeps nothing is spared
  // the records' serialization.
  if (!store_->KeepsRecords()) {
    groups.TakeWorkloadChange();
    return seq;
  }
  for (const std::string& id : changed) {
    std::optional<v1::PlacementGroupRecord> record = groups.Export(id);
    seq = writer_.Stage(
        kGroupsTable, id,
        record ? std::optional<std::string>(record->SerializeAsString()) : std::nullopt);
  }
  if (std::optional<v1::WorkloadWindowRecord> workload = groups.TakeWorkloadChange()) {
    seq = writer_.Stage(kWorkloadTable, kWorkloadKey, workload->SerializeAsString());
  }
  return seq;
}

HeadState::BundleLoss HeadState::LoseBundlesLocked(
    const std::string& node_id, const google::protobuf::RepeatedPtrField<v1::BundleKey>& released) {
  BundleLoss loss;
  loss.groups = groups.OnBundlesReleased(node_id, released, HeadNowMs());
  if (loss.groups.empty()) return loss;
  loss.told = JobSnapshotsLocked(loss.groups);
  loss.seq = PersistLocked();
  kick = true;
  return loss;
}

GroupSnapshot HeadState::SnapshotLocked(const std::string& id) {
  return GroupSnapshot{id, groups.Info(id), ++snapshots_taken};
}

std::vector<GroupSnapshot> HeadState::JobSnapshotsLocked(const std::vector<std::string>& ids) {
  std::vector<GroupSnapshot> snapshots;
  for (const std::string& id : ids) {
    if (groups.OfJob(id)) snapshots.push_back(SnapshotLocked(id));
  }
  return snapshots;
}

void HeadState::TellJobs(std::vector<GroupSnapshot> changed) {
  if (TrainJobController* controller = jobs()) {
    for (GroupSnapshot& group : changed) controller->OnGroupChanged(std::move(group));
  }
}

uint64_t HeadState::PersistNodeLocked(const std::string& node_id) {
  std::optional<v1::RegisterNodeRequest> registration = nodes.RegistrationOf(node_id);
  std::optional<NodeIndex> index = table.FindNode(node_id);
  if (!registration || !index || table.node(*index).state == NodeState::kDead) {
    return writer_.Stage(kNodesTable, node_id, std::nullopt);
  }
  v1::NodeRecord record;
  *record.mutable_registration() = *std::move(registration);
  record.set_state(NodeStateToProto(table.node(*index).state));
  record.set_drain_reason(nodes.DrainReason(node_id));
  if (auto drain = nodes.drains().find(node_id); drain != nodes.drains().end())
    record.set_drain_deadline_unix_ms(drain->second.deadline_ms);
  return writer_.Stage(kNodesTable, node_id, record.SerializeAsString());
}

uint64_t HeadState::PersistQueuesLocked() {
  return writer_.Stage(kQueuesTable, kQueuesKey,
                       QueueConfigToRecord(groups.queue_config()).SerializeAsString());
}

absl::Status HeadState::Durable(uint64_t seq) {
  absl::Status s = writer_.WaitDurable(seq);
  if (!s.ok()) LogError(s.message());
  return s;
}

absl::Status HeadState::PersistCredential(const std::string& digest,
                                          std::optional<std::string> team) {
  return Durable(writer_.Stage(kCredentialsTable, digest, std::move(team)));
}

uint64_t HeadState::StageJob(const v1::TrainJobRecord& record) {
  return writer_.Stage(kJobsTable, record.info().job_id(), record.SerializeAsString());
}

std::string HeadState::NewPlacementGroupId() {
  return absl::StrFormat("pg-%012x", RandomIdBits() & 0xffffffffffffULL);
}

v1::ReleaseUnusedBundlesRequest ReleaseAllBut(const std::vector<v1::HeldBundle>& held,
                                              std::string request_id) {
  v1::ReleaseUnusedBundlesRequest release;
  release.set_request_id(std::move(request_id));
  for (const v1::HeldBundle& h : held) {
    *release.add_in_use() = h.key();
    v1::KeptBundle* kept = release.add_kept();
    kept->set_placement_group_id(h.key().placement_group_id());
    kept->mutable_bundle()->set_bundle_index(h.key().bundle_index());
    *kept->mutable_bundle()->mutable_resources() = h.resources();
    *kept->mutable_bundle()->mutable_gpus() = h.gpus();
  }
  return release;
}

}  // namespace berth
