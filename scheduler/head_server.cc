#include "scheduler/head_server.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "wire/queue_convert.h"

namespace berth {

HeadServer::HeadServer(HeadConfig config, std::unique_ptr<StateStore> store)
    : state_(std::move(config), std::move(store)),
      raylets_(state_.config().raylet_rpc_timeout, state_.config().cluster_token,
               state_.config().tls),
      scheduler_(&state_, &raylets_),
      node_service_(&state_, &raylets_),
      placement_group_service_(&state_, &scheduler_),
      cluster_service_(&state_),
      train_job_service_(&state_, &scheduler_, &raylets_),
      queue_service_(&state_),
      package_service_(&state_) {}

HeadServer::~HeadServer() { Stop(); }

std::vector<grpc::Service*> HeadServer::services() {
  return {&node_service_,      &placement_group_service_, &cluster_service_,
          &train_job_service_, &queue_service_,           &package_service_};
}

absl::Status HeadServer::Restore() {
  // The next epoch first: from here on every write of an older head fails.
  absl::StatusOr<uint64_t> epoch = state_.store().AdvanceEpoch();
  if (!epoch.ok()) return epoch.status();
  epoch_ = *epoch;
  absl::StatusOr<std::vector<StateStore::Record>> nodes, groups, jobs, queues, credentials,
      workload;
  std::string source;
  {
    nodes = state_.store().Scan(HeadState::kNodesTable);
    groups = state_.store().Scan(HeadState::kGroupsTable);
    jobs = state_.store().Scan(HeadState::kJobsTable);
    queues = state_.store().Scan(HeadState::kQueuesTable);
    credentials = state_.store().Scan(HeadState::kCredentialsTable);
    workload = state_.store().Scan(HeadState::kWorkloadTable);
    source = state_.store().Describe();
  }
  for (const auto* scanned : {&nodes, &groups, &jobs, &queues, &credentials, &workload}) {
    if (!scanned->ok()) return scanned->status();
  }
  std::optional<QueueConfig> queue_config;
  for (const auto& [key, value] : *queues) {
    v1::QueueConfigRecord record;
    if (!record.ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: queue record ", key));
    }
    absl::StatusOr<QueueConfig> config = QueueConfigFromRecord(record);
    if (!config.ok()) return config.status();
    queue_config = *std::move(config);
  }
  for (const auto& [digest, team] : *credentials) state_.teams.Add(digest, team);
  if (absl::Status s = state_.packages.Restore(state_.store(), absl::Now()); !s.ok()) return s;
  for (const auto& [id, value] : *jobs) {
    if (!restored_jobs_.emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: train job record ", id));
    }
  }
  absl::MutexLock lock(&state_.mu);
  for (const auto& [key, value] : *workload) {
    // What the scorer learned, before the groups it already counts.
    v1::WorkloadWindowRecord record;
    if (!record.ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: workload record ", key));
    }
    if (absl::Status s = state_.groups.RestoreWorkload(record); !s.ok()) {
      // A scorer that learns nothing (--placement-scorer) has no use for it.
      if (!absl::IsFailedPrecondition(s)) return s;
    }
  }
  if (queue_config) {
    // No group is known yet, so no queue is in use.
    if (absl::Status s = state_.groups.Reconfigure(*std::move(queue_config)); !s.ok()) return s;
  }
  const int64_t now = HeadNowMs();
  // Nodes come back ALIVE (or DRAINING) with a fresh liveness period, plus
  // one more for their raylets to reconnect: they keep heartbeating to the
  // restarted head; those that do not are declared DEAD as usual.
  const int64_t grace = state_.config().liveness.timeout_ms();
  for (const auto& [id, value] : *nodes) {
    v1::NodeRecord record;
    if (!record.ParseFromString(value))
      return absl::DataLossError(absl::StrCat("state store: node record ", id));
    absl::StatusOr<NodeManager::Registration> reg =
        state_.nodes.Register(record.registration(), now);
    if (!reg.ok())
      return absl::DataLossError(
          absl::StrCat("state store: node ", id, ": ", reg.status().message()));
    if (record.state() == v1::NODE_STATE_DRAINING) {
      v1::DrainNodeRequest drain;
      drain.set_node_id(id);
      drain.set_reason(record.drain_reason());
      drain.set_request_id("restore/" + id);
      state_.nodes.Drain(drain).IgnoreError();
    }
  }
  state_.nodes.GraceAll(grace);
  std::vector<v1::PlacementGroupRecord> records;
  for (const auto& [id, value] : *groups) {
    if (!records.emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: placement group record ", id));
    }
  }
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.arrival() < b.arrival(); });
  for (const v1::PlacementGroupRecord& record : records) {
    if (absl::Status s = state_.groups.Restore(record, now); !s.ok()) return s;
  }
  if (absl::Status s = state_.Durable(state_.PersistLocked()); !s.ok()) return s;
  // What the raylets hold beyond the restored groups (a commit in flight
  // when the head stopped, a group removed since) is released, with the
  // workers in it.
  for (const auto& [id, value] : *nodes) {
    const std::optional<NodeIndex> index = state_.table.FindNode(id);
    const std::string address = index ? state_.nodes.Address(*index) : "";
    if (address.empty()) continue;
    const v1::ReleaseUnusedBundlesRequest release =
        ReleaseAllBut(state_.groups.BundlesOn(id), absl::StrCat("restore/", id, "/", now));
    scheduler_.Submit([this, address, id = id, release] {
      absl::StatusOr<v1::ReleaseUnusedBundlesResponse> released =
          raylets_.ReleaseUnused(address, release);
      if (!released.ok() || released->released_size() == 0) return;
      LogInfo("node ", id, " released ", released->released_size(),
              " bundle(s) the restored state does not hold");
      // Bundles placed there since the snapshot may have gone with them.
      HeadState::BundleLoss lost;
      {
        absl::MutexLock lock(&state_.mu);
        lost = state_.LoseBundlesLocked(id, released->released());
      }
      if (lost.groups.empty()) return;
      state_.Durable(lost.seq).IgnoreError();  // logged
      state_.TellJobs(lost.groups);
    });
  }
  LogInfo("restored ", nodes->size(), " node(s), ", records.size(), " placement group(s), ",
          restored_jobs_.size(), " train job(s) and ", state_.groups.queue_config().queues().size(),
          " queue(s) from ", source);
  state_.kick = true;
  return absl::OkStatus();
}

void HeadServer::Start(const std::string& address, const std::string& heads) {
  TrainControllerConfig train = state_.config().train;
  train.job.head_address = heads.empty() ? address : heads;
  train.job.cluster_token = state_.config().cluster_token;
  // A node silent with most of the cluster is declared only after the
  // liveness timeout and as long again (node_liveness.h).
  train.job.node_dead_after = absl::Milliseconds(2 * state_.config().liveness.timeout_ms());
  train.on_restart = [this] { state_.metrics().OnJobRestart(); };
  train.persist = [this](const v1::TrainJobRecord& record) { state_.PersistJob(record); };
  jobs_ = std::make_unique<TrainJobController>(&scheduler_, &raylets_, std::move(train));
  jobs_->Restore(restored_jobs_);
  restored_jobs_.clear();
  state_.set_jobs(jobs_.get());
  scheduler_.Start(epoch_);
  raylets_.set_head_epoch(epoch_);
  v1::HeadInfo head;
  head.set_address(address);
  head.set_epoch(epoch_);
  head.set_active_since_unix_ms(HeadNowMs());
  state_.BecomeActive(std::move(head));
  LogInfo("active at ", address, ", epoch ", epoch_);
}

void HeadServer::Stop() {
  // The jobs go on without this head (a restarted head or a standby takes
  // them over from the store); its threads stop, then the controller.
  if (jobs_) jobs_->Leave();
  scheduler_.Stop();
  state_.set_jobs(nullptr);
  jobs_.reset();
}

void HeadServer::SetMetricsAddress(const std::string& address) {
  absl::MutexLock lock(&state_.mu);
  state_.metrics_address = address;
}

std::vector<std::shared_ptr<prometheus::Collectable>> HeadServer::MetricsCollectables() {
  auto state = std::make_shared<CallbackCollectable>([this] {
    HeadSnapshot snapshot;
    cluster_service_.GetClusterStatus(nullptr, nullptr, &snapshot.status);
    v1::ListNodesRequest all;
    node_service_.ListNodes(nullptr, &all, &snapshot.nodes);
    snapshot.now_ms = HeadNowMs();
    return HeadStateFamilies(snapshot);
  });
  return {state_.metrics().registry(), state};
}

}  // namespace berth
