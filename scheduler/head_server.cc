#include "scheduler/head_server.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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

namespace {

using Records = std::vector<StateStore::Record>;

// The head's tables as the store holds them, and where that is (for the log).
struct StoredState {
  Records nodes, groups, jobs, queues, credentials, workload;
  std::string source;
};

// Reads every table; the first one that cannot be read is the error.
absl::StatusOr<StoredState> ScanStore(StateStore& store) {
  StoredState stored;
  const std::pair<absl::string_view, Records*> tables[] = {
      {HeadState::kNodesTable, &stored.nodes},
      {HeadState::kGroupsTable, &stored.groups},
      {HeadState::kJobsTable, &stored.jobs},
      {HeadState::kQueuesTable, &stored.queues},
      {HeadState::kCredentialsTable, &stored.credentials},
      {HeadState::kWorkloadTable, &stored.workload}};
  absl::Status first_failure;
  for (const auto& [table, records] : tables) {
    absl::StatusOr<Records> scanned = store.Scan(table);
    if (scanned.ok()) {
      *records = *std::move(scanned);
    } else if (first_failure.ok()) {
      first_failure = scanned.status();
    }
  }
  stored.source = store.Describe();
  if (!first_failure.ok()) return first_failure;
  return stored;
}

// The queue configuration the store holds, if any (the last record read).
absl::StatusOr<std::optional<QueueConfig>> ParseQueueConfig(const Records& queues) {
  std::optional<QueueConfig> queue_config;
  for (const auto& [key, value] : queues) {
    v1::QueueConfigRecord record;
    if (!record.ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: queue record ", key));
    }
    absl::StatusOr<QueueConfig> config = QueueConfigFromRecord(record);
    if (!config.ok()) return config.status();
    queue_config = *std::move(config);
  }
  return queue_config;
}

// Appends the stored train jobs to `restored`, for Start().
absl::Status ParseJobs(const Records& jobs, std::vector<v1::TrainJobRecord>* restored) {
  for (const auto& [id, value] : jobs) {
    if (!restored->emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: train job record ", id));
    }
  }
  return absl::OkStatus();
}

// What the scorer learned, before the groups it already counts; then the
// queues, while no group is known yet, so no queue is in use.
absl::Status RestoreSchedulingLocked(HeadState& state, const Records& workload,
                                     std::optional<QueueConfig> queue_config)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  for (const auto& [key, value] : workload) {
    v1::WorkloadWindowRecord record;
    if (!record.ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: workload record ", key));
    }
    if (absl::Status s = state.groups.RestoreWorkload(record); !s.ok()) {
      // A scorer that learns nothing (--placement-scorer) has no use for it.
      if (!absl::IsFailedPrecondition(s)) return s;
    }
  }
  if (!queue_config) return absl::OkStatus();
  return state.groups.Reconfigure(*std::move(queue_config));
}

// Nodes come back ALIVE (or DRAINING) with a fresh liveness period, plus
// one more for their raylets to reconnect: they keep heartbeating to the
// restarted head; those that do not are declared DEAD as usual.
absl::Status RestoreNodesLocked(HeadState& state, const Records& nodes, int64_t now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  const int64_t grace = state.config().liveness.timeout_ms();
  for (const auto& [id, value] : nodes) {
    v1::NodeRecord record;
    if (!record.ParseFromString(value))
      return absl::DataLossError(absl::StrCat("state store: node record ", id));
    absl::StatusOr<NodeManager::Registration> reg =
        state.nodes.Register(record.registration(), now);
    if (!reg.ok())
      return absl::DataLossError(
          absl::StrCat("state store: node ", id, ": ", reg.status().message()));
    if (record.state() == v1::NODE_STATE_DRAINING) {
      v1::DrainNodeRequest drain;
      drain.set_node_id(id);
      drain.set_reason(record.drain_reason());
      drain.set_deadline_unix_ms(record.drain_deadline_unix_ms());
      drain.set_request_id("restore/" + id);
      state.nodes.Drain(drain).IgnoreError();
    }
  }
  state.heartbeats.GraceAll(grace);
  return absl::OkStatus();
}

// The placement groups in their order of arrival, with their exact
// reservations; returns how many there are.
absl::StatusOr<size_t> RestoreGroupsLocked(HeadState& state, const Records& groups, int64_t now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  std::vector<v1::PlacementGroupRecord> records;
  for (const auto& [id, value] : groups) {
    if (!records.emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: placement group record ", id));
    }
  }
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.arrival() < b.arrival(); });
  for (const v1::PlacementGroupRecord& record : records) {
    if (absl::Status s = state.groups.Restore(record, now); !s.ok()) return s;
  }
  return records.size();
}

// Asks node `id` to release what `release` does not keep, and takes the
// bundles it released from the state.
void ReleaseUnusedOn(HeadState& state, RayletClients& raylets, const std::string& id,
                     const std::string& address, const v1::ReleaseUnusedBundlesRequest& release) {
  absl::StatusOr<v1::ReleaseUnusedBundlesResponse> released =
      raylets.ReleaseUnused(address, release);
  if (!released.ok() || released->released_size() == 0) return;
  LogInfo("node ", id, " released ", released->released_size(),
          " bundle(s) the restored state does not hold");
  // Bundles placed there since the snapshot may have gone with them.
  HeadState::BundleLoss lost;
  {
    absl::MutexLock lock(&state.mu);
    lost = state.LoseBundlesLocked(id, released->released());
  }
  if (lost.groups.empty()) return;
  state.Durable(lost.seq).IgnoreError();  // logged
  state.TellJobs(std::move(lost.told));
}

// What the raylets hold beyond the restored groups (a commit in flight
// when the head stopped, a group removed since) is released, with the
// workers in it, by the scheduler's threads.
void ReleaseUnrestoredBundlesLocked(HeadState& state, RayletClients& raylets, Scheduler& scheduler,
                                    const Records& nodes, int64_t now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  for (const auto& [id, value] : nodes) {
    const std::optional<NodeIndex> index = state.table.FindNode(id);
    const std::string address = index ? state.nodes.Address(*index) : "";
    if (address.empty()) continue;
    const v1::ReleaseUnusedBundlesRequest release =
        ReleaseAllBut(state.groups.BundlesOn(id), absl::StrCat("restore/", id, "/", now));
    scheduler.Submit([head = &state, clients = &raylets, address, id = id, release] {
      ReleaseUnusedOn(*head, *clients, id, address, release);
    });
  }
}

}  // namespace

absl::Status HeadServer::Restore() {
  // The next epoch first: from here on every write of an older head fails.
  absl::StatusOr<uint64_t> epoch = state_.store().AdvanceEpoch();
  if (!epoch.ok()) return epoch.status();
  epoch_ = *epoch;
  absl::StatusOr<StoredState> stored = ScanStore(state_.store());
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::optional<QueueConfig>> queue_config = ParseQueueConfig(stored->queues);
  if (!queue_config.ok()) return queue_config.status();
  for (const auto& [digest, team] : stored->credentials) state_.teams.Add(digest, team);
  if (absl::Status s = state_.packages.Restore(state_.store(), absl::Now()); !s.ok()) return s;
  if (absl::Status s = ParseJobs(stored->jobs, &restored_jobs_); !s.ok()) return s;
  absl::MutexLock lock(&state_.mu);
  if (absl::Status s = RestoreSchedulingLocked(state_, stored->workload, *std::move(queue_config));
      !s.ok()) {
    return s;
  }
  const int64_t now = HeadNowMs();
  if (absl::Status s = RestoreNodesLocked(state_, stored->nodes, now); !s.ok()) return s;
  absl::StatusOr<size_t> groups = RestoreGroupsLocked(state_, stored->groups, now);
  if (!groups.ok()) return groups.status();
  if (absl::Status s = state_.Durable(state_.PersistLocked()); !s.ok()) return s;
  ReleaseUnrestoredBundlesLocked(state_, raylets_, scheduler_, stored->nodes, now);
  LogInfo("restored ", stored->nodes.size(), " node(s), ", *groups, " placement group(s), ",
          restored_jobs_.size(), " train job(s) and ", state_.groups.queue_config().queues().size(),
          " queue(s) from ", stored->source);
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
  train.stage = [this](const v1::TrainJobRecord& record) { return state_.StageJob(record); };
  train.durable = [this](uint64_t seq) { state_.Durable(seq).IgnoreError(); };  // logged
  // The jobs' process starts share the committers with the reservation calls.
  train.raylet_calls = [this](std::function<void()> work) { scheduler_.Submit(std::move(work)); };
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
