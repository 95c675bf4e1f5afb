#include "scheduler/head_server.h"

#include <cstdio>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "auth/admission.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

namespace {

// Every call carries the cluster token; those only a raylet makes need a
// node certificate when the cluster speaks TLS.
AdmissionPolicy HeadAdmission(const HeadConfig& config, bool raylet_methods) {
  AdmissionPolicy policy{config.cluster_token, config.tls};
  if (raylet_methods) {
    for (const char* method : {"RegisterNode", "Heartbeat", "ReportWorkerExit"}) {
      policy.role_of_method[method] = TlsRole::kNode;
    }
  }
  return policy;
}

}  // namespace

HeadServer::HeadServer(HeadConfig config, std::unique_ptr<StateStore> store)
    : Admitted<v1::NodeService::Service>(HeadAdmission(config, /*raylet_methods=*/true)),
      Admitted<v1::PlacementGroupService::Service>(HeadAdmission(config, false)),
      Admitted<v1::ClusterService::Service>(HeadAdmission(config, false)),
      Admitted<v1::TrainJobService::Service>(HeadAdmission(config, false)),
      config_(config),
      raylets_(config.raylet_rpc_timeout, config.cluster_token, config.tls),
      batcher_(&raylets_, [this](std::function<void()> work) { Submit(std::move(work)); },
               [this](uint64_t seq) { Durable(seq).IgnoreError(); }),
      store_(store ? std::move(store) : NewMemoryStateStore()),
      writer_(store_.get()),
      nodes_(&table_, config.liveness),
      groups_(&table_, &nodes_, config.scheduler) {
  groups_.set_observer(&metrics_);
}

absl::Status HeadServer::Restore() {
  absl::StatusOr<std::vector<StateStore::Record>> nodes, groups, jobs;
  std::string source;
  {
    nodes = store_->Scan(kNodesTable);
    groups = store_->Scan(kGroupsTable);
    jobs = store_->Scan(kJobsTable);
    source = store_->Describe();
  }
  for (const auto* scanned : {&nodes, &groups, &jobs}) {
    if (!scanned->ok()) return scanned->status();
  }
  for (const auto& [id, value] : *jobs) {
    if (!restored_jobs_.emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: train job record ", id));
    }
  }
  absl::MutexLock lock(&mu_);
  const int64_t now = NowMs();
  // Nodes come back ALIVE (or DRAINING) with a fresh liveness period, plus
  // one more for their raylets to reconnect: they keep heartbeating to the
  // restarted head; those that do not are declared DEAD as usual.
  const int64_t grace = config_.liveness.heartbeat_period_ms * config_.liveness.misses;
  for (const auto& [id, value] : *nodes) {
    v1::NodeRecord record;
    if (!record.ParseFromString(value)) return absl::DataLossError(absl::StrCat("state store: node record ", id));
    absl::StatusOr<NodeManager::Registration> reg = nodes_.Register(record.registration(), now + grace);
    if (!reg.ok()) return absl::DataLossError(absl::StrCat("state store: node ", id, ": ", reg.status().message()));
    if (record.state() == v1::NODE_STATE_DRAINING) {
      v1::DrainNodeRequest drain;
      drain.set_node_id(id);
      drain.set_reason(record.drain_reason());
      drain.set_request_id("restore/" + id);
      nodes_.Drain(drain).IgnoreError();
    }
  }
  std::vector<v1::PlacementGroupRecord> records;
  for (const auto& [id, value] : *groups) {
    if (!records.emplace_back().ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("state store: placement group record ", id));
    }
  }
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.arrival() < b.arrival(); });
  for (const v1::PlacementGroupRecord& record : records) {
    if (absl::Status s = groups_.Restore(record, now); !s.ok()) return s;
  }
  if (absl::Status s = writer_.WaitDurable(PersistLocked()); !s.ok()) return s;
  // What the raylets hold beyond the restored groups (a commit in flight
  // when the head stopped, a group removed since) is released, with the
  // workers in it.
  for (const auto& [id, value] : *nodes) {
    const std::optional<NodeIndex> index = table_.FindNode(id);
    const std::string address = index ? nodes_.Address(*index) : "";
    if (address.empty()) continue;
    v1::ReleaseUnusedBundlesRequest release;
    release.set_request_id(absl::StrCat("restore/", id, "/", now));
    for (const v1::HeldBundle& h : groups_.BundlesOn(id)) *release.add_in_use() = h.key();
    Submit([this, address, id = id, release] {
      absl::StatusOr<v1::ReleaseUnusedBundlesResponse> released = raylets_.ReleaseUnused(address, release);
      if (released.ok() && released->released_size() > 0) {
        LogInfo("node ", id, " released ", released->released_size(),
                " bundle(s) the restored state does not hold");
      }
    });
  }
  LogInfo("restored ", nodes->size(), " node(s), ", records.size(), " placement group(s) and ",
          restored_jobs_.size(), " train job(s) from ", source);
  kick_ = true;
  return absl::OkStatus();
}

uint64_t HeadServer::PersistLocked() {
  uint64_t seq = writer_.staged();
  for (const std::string& id : groups_.TakeChanged()) {
    std::optional<v1::PlacementGroupRecord> record = groups_.Export(id);
    seq = writer_.Stage(kGroupsTable, id, record ? std::optional<std::string>(record->SerializeAsString()) : std::nullopt);
  }
  return seq;
}

uint64_t HeadServer::PersistNodeLocked(const std::string& node_id) {
  std::optional<v1::RegisterNodeRequest> registration = nodes_.RegistrationOf(node_id);
  std::optional<NodeIndex> index = table_.FindNode(node_id);
  if (!registration || !index || table_.node(*index).state == NodeState::kDead) {
    return writer_.Stage(kNodesTable, node_id, std::nullopt);
  }
  v1::NodeRecord record;
  *record.mutable_registration() = *std::move(registration);
  record.set_state(NodeStateToProto(table_.node(*index).state));
  record.set_drain_reason(nodes_.DrainReason(node_id));
  return writer_.Stage(kNodesTable, node_id, record.SerializeAsString());
}

absl::Status HeadServer::Durable(uint64_t seq) {
  absl::Status s = writer_.WaitDurable(seq);
  if (!s.ok()) LogError(s.message());
  return s;
}

HeadServer::~HeadServer() { Stop(); }

void HeadServer::Start(const std::string& head_address) {
  TrainControllerConfig train = config_.train;
  train.job.head_address = head_address;
  train.job.cluster_token = config_.cluster_token;
  train.on_restart = [this] { metrics_.OnJobRestart(); };
  train.job.node_dead_after =
      absl::Milliseconds(config_.liveness.heartbeat_period_ms * config_.liveness.misses);
  train.persist = [this](const v1::TrainJobRecord& record) {
    Durable(writer_.Stage(kJobsTable, record.info().job_id(), record.SerializeAsString())).IgnoreError();
  };
  jobs_ = std::make_unique<TrainJobController>(this, &raylets_, std::move(train));
  jobs_->Restore(restored_jobs_);
  restored_jobs_.clear();
  for (int i = 0; i < config_.committer_threads; ++i) {
    committer_threads_.emplace_back([this] { CommitterLoop(); });
  }
  scheduling_thread_ = std::thread([this] { SchedulingLoop(); });
}

void HeadServer::Stop() {
  // The jobs end first (their groups are removed through the head), then
  // the threads that tell the controller of events, then the controller.
  if (jobs_) jobs_->Shutdown();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (scheduling_thread_.joinable()) scheduling_thread_.join();
  {
    absl::MutexLock lock(&work_mu_);
    work_stopping_ = true;
  }
  for (std::thread& t : committer_threads_) t.join();
  committer_threads_.clear();
  jobs_.reset();
}

std::string HeadServer::NewPlacementGroupId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("pg-%012x", rng() & 0xffffffffffffULL);
}

void HeadServer::Submit(std::function<void()> work) {
  absl::MutexLock lock(&work_mu_);
  work_.push_back(std::move(work));
}

void HeadServer::SubmitCancels(std::vector<CancelTask> cancels) {
  for (CancelTask& c : cancels) {
    v1::BundleOp op;
    v1::CancelResourceReserveRequest* request = op.mutable_cancel();
    request->set_placement_group_id(std::move(c.placement_group_id));
    request->set_request_id(std::move(c.request_id));
    for (uint32_t b : c.bundle_indices) request->add_bundle_indices(b);
    batcher_.Enqueue(c.address, std::move(op), nullptr);
  }
}

void HeadServer::CommitterLoop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&work_mu_);
      work_mu_.Await(absl::Condition(
          +[](HeadServer* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->work_mu_) {
            return !s->work_.empty() || s->work_stopping_;
          },
          this));
      if (work_.empty()) return;  // stopping, and nothing left to do
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

void HeadServer::StartCommit(CommitTask task) {
  auto commit = std::make_shared<TwoPhaseCommit>(std::move(task));
  for (size_t i = 0; i < commit->task().nodes.size(); ++i) {
    batcher_.Enqueue(commit->task().nodes[i].address, commit->Prepare(i),
                     [this, commit, i](const BundleOpBatcher::Result& r) -> uint64_t {
                       if (!commit->OnPrepareAnswer(i, r.status, r.prepare)) return 0;
                       return AfterPrepares(commit);
                     });
  }
}

uint64_t HeadServer::AfterPrepares(const std::shared_ptr<TwoPhaseCommit>& commit) {
  const CommitTask& task = commit->task();
  if (!commit->status().ok()) return FailCommit(*commit, /*prepared=*/false);
  {
    absl::MutexLock lock(&mu_);
    groups_.OnPrepared(task.placement_group_id, task.attempt);
  }
  if (commit->single_node()) return FinishCommit(task, absl::OkStatus(), true);  // committed with the prepare
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    batcher_.Enqueue(task.nodes[i].address, commit->Commit(i),
                     [this, commit, i](const BundleOpBatcher::Result& r) -> uint64_t {
                       if (!commit->OnCommitAnswer(i, r.status)) return 0;
                       if (!commit->status().ok()) return FailCommit(*commit, /*prepared=*/true);
                       return FinishCommit(commit->task(), absl::OkStatus(), true);
                     });
  }
  return 0;
}

uint64_t HeadServer::FailCommit(const TwoPhaseCommit& commit, bool prepared) {
  // Queued before the group can be placed again: each node's ops go in
  // order, so these cannot release a later attempt's bundles.
  SubmitCancels(commit.CancelAll());
  return FinishCommit(commit.task(), commit.status(), prepared);
}

uint64_t HeadServer::FinishCommit(const CommitTask& task, const absl::Status& result, bool prepared) {
  uint64_t seq = 0;
  std::vector<CancelTask> released;  // the group was removed meanwhile
  {
    absl::MutexLock lock(&mu_);
    if (!result.ok()) metrics_.OnCommitFailed(prepared);
    released = groups_.OnCommitDone(task.placement_group_id, task.attempt, result, NowMs());
    seq = PersistLocked();
    kick_ = true;
  }
  if (!result.ok()) {
    LogWarning(task.placement_group_id, " attempt ", task.attempt, ": ", result.message());
  }
  if (jobs_) jobs_->OnGroupChanged(task.placement_group_id);  // CREATED, or waiting again
  SubmitCancels(std::move(released));
  return seq;  // the batcher waits once for its whole call
}

void HeadServer::SchedulingLoop() {
  const int64_t liveness_every = std::max<int64_t>(config_.liveness.heartbeat_period_ms / 4, 10);
  int64_t next_liveness = 0;
  while (true) {
    std::vector<CommitTask> tasks;
    std::vector<std::string> dead_nodes;
    absl::Time wake;
    uint64_t seq = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      const int64_t now = NowMs();
      if (now >= next_liveness) {
        for (const std::string& dead : nodes_.CheckLiveness(now)) {
          LogWarning("node ", dead, " missed its heartbeats: DEAD");
          groups_.OnNodeDead(dead, now);
          metrics_.OnNodeDead();
          PersistNodeLocked(dead);
          seq = PersistLocked();
          dead_nodes.push_back(dead);
        }
        next_liveness = now + liveness_every;
      }
      tasks = groups_.Schedule(now);
      int64_t wake_ms = next_liveness;
      if (std::optional<int64_t> due = groups_.NextDue()) wake_ms = std::min(wake_ms, std::max(*due, now + 1));
      wake = absl::FromUnixMillis(wake_ms);
      kick_ = false;
    }
    if (seq != 0) Durable(seq).IgnoreError();  // logged
    for (const std::string& dead : dead_nodes) {
      if (jobs_) jobs_->OnNodeDead(dead);  // their jobs' attempts are over
    }
    for (CommitTask& task : tasks) StartCommit(std::move(task));
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](HeadServer* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
                                return s->kick_ || s->stopping_;
                              },
                              this),
                          wake);
  }
}

// --- NodeService -----------------------------------------------------------

grpc::Status HeadServer::RegisterNode(grpc::ServerContext* context, const v1::RegisterNodeRequest* request,
                                      v1::RegisterNodeResponse* response) {
  // Before the node can receive new bundles, it drops any it holds that the
  // head does not know (left from before a head or raylet restart).
  std::vector<v1::HeldBundle> held;
  {
    absl::MutexLock lock(&mu_);
    held = groups_.BundlesOn(request->node_id());
  }
  if (!request->address().empty() && request->node_id().size() <= 128) {
    v1::ReleaseUnusedBundlesRequest release;
    release.set_request_id(absl::StrCat("register/", request->request_id()));
    for (const v1::HeldBundle& h : held) *release.add_in_use() = h.key();
    absl::StatusOr<v1::ReleaseUnusedBundlesResponse> released =
        raylets_.ReleaseUnused(request->address(), release);
    if (released.ok() && released->released_size() > 0) {
      LogInfo("node ", request->node_id(), " released ", released->released_size(), " stale bundle(s)");
    }
  }
  absl::ReleasableMutexLock lock(&mu_);
  absl::StatusOr<NodeManager::Registration> reg = nodes_.Register(*request, NowMs());
  if (!reg.ok()) return ToGrpcStatus(reg.status());
  LogInfo("node ", request->node_id(), " registered at ", request->address(), ": ",
          table_.node(reg->index).total.ToString());
  const uint64_t seq = PersistNodeLocked(request->node_id());
  groups_.OnNodesChanged(NowMs());
  kick_ = true;
  response->set_accepted(true);
  response->set_heartbeat_interval_ms(static_cast<uint32_t>(nodes_.heartbeat_period_ms()));
  for (v1::HeldBundle& h : held) *response->add_held_bundles() = std::move(h);
  lock.Release();
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                                   v1::HeartbeatResponse* response) {
  if (request->node_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "node_id: required");
  }
  absl::MutexLock lock(&mu_);
  const bool known = nodes_.Heartbeat(*request, NowMs());
  response->set_ack(known);
  response->set_reregister_required(!known);
  if (known) {
    std::optional<NodeIndex> index = table_.FindNode(request->node_id());
    response->set_drain_requested(index && table_.node(*index).state == NodeState::kDraining);
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                                   v1::ListNodesResponse* response) {
  absl::MutexLock lock(&mu_);
  return ToGrpcStatus(nodes_.ListNodes(*request, response));
}

grpc::Status HeadServer::DrainNode(grpc::ServerContext* context, const v1::DrainNodeRequest* request,
                                   v1::DrainNodeResponse* response) {
  absl::ReleasableMutexLock lock(&mu_);
  absl::Status s = nodes_.Drain(*request);
  if (!s.ok()) return ToGrpcStatus(s);
  const uint64_t seq = PersistNodeLocked(request->node_id());
  response->set_accepted(true);
  response->set_bundles_to_move(static_cast<uint32_t>(groups_.BundlesOn(request->node_id()).size()));
  lock.Release();
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::ReportWorkerExit(grpc::ServerContext* context,
                                          const v1::ReportWorkerExitRequest* request,
                                          v1::ReportWorkerExitResponse*) {
  // The controller is told after mu_ is released: it calls back into the head.
  if (absl::Status s = ValidateString(request->node_id(), "node_id", 128, true); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = ValidateString(request->status().worker_id(), "status.worker_id", 256, true);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::ReleasableMutexLock lock(&mu_);
  if (!table_.FindNode(request->node_id())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("node_id: no node '", request->node_id(), "'"));
  }
  for (const v1::ReportWorkerExitRequest& seen : worker_exits_) {
    if (seen.node_id() == request->node_id() &&
        seen.status().worker_id() == request->status().worker_id()) {
      return grpc::Status::OK;  // a retried report
    }
  }
  worker_exits_.push_back(*request);
  while (worker_exits_.size() > config_.max_worker_exits_kept) worker_exits_.pop_front();
  lock.Release();
  if (jobs_) jobs_->OnWorkerExit(request->node_id(), request->status());
  return grpc::Status::OK;
}

grpc::Status HeadServer::ListWorkerExits(grpc::ServerContext* context,
                                         const v1::ListWorkerExitsRequest* request,
                                         v1::ListWorkerExitsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const v1::ReportWorkerExitRequest& exit : worker_exits_) {
    if (!request->job_id().empty() && exit.status().job_id() != request->job_id()) continue;
    if (!request->placement_group_id().empty() &&
        exit.status().placement_group_id() != request->placement_group_id()) {
      continue;
    }
    *response->add_exits() = exit;
  }
  return grpc::Status::OK;
}

// --- PlacementGroupService -------------------------------------------------

grpc::Status HeadServer::CreatePlacementGroup(grpc::ServerContext* context,
                                              const v1::CreatePlacementGroupRequest* request,
                                              v1::CreatePlacementGroupResponse* response) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::string> id = groups_.Create(*request, NewPlacementGroupId(), NowMs());
    if (!id.ok()) return ToGrpcStatus(id.status());
    seq = PersistLocked();
    response->set_placement_group_id(*id);
    kick_ = true;
  }
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::GetPlacementGroup(grpc::ServerContext* context,
                                           const v1::GetPlacementGroupRequest* request,
                                           v1::GetPlacementGroupResponse* response) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = groups_.Get(*request, response->mutable_placement_group()); !s.ok()) return ToGrpcStatus(s);
    seq = writer_.staged();
  }
  // Show only what a restarted head would show too.
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::ListPlacementGroups(grpc::ServerContext* context,
                                             const v1::ListPlacementGroupsRequest* request,
                                             v1::ListPlacementGroupsResponse* response) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    groups_.List(*request, response);
    seq = writer_.staged();
  }
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::WaitPlacementGroupReady(grpc::ServerContext* context,
                                                 const v1::WaitPlacementGroupReadyRequest* request,
                                                 v1::WaitPlacementGroupReadyResponse* response) {
  absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  const std::string& id = request->placement_group_id();
  absl::ReleasableMutexLock lock(&mu_);
  if (!groups_.State(id)) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::optional<v1::PlacementGroupState> s = groups_.State(id);
    return !s || *s == v1::PLACEMENT_GROUP_STATE_CREATED || *s == v1::PLACEMENT_GROUP_STATE_REMOVED ||
           stopping_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  response->set_ready(groups_.State(id) == v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  groups_.Get(get, response->mutable_placement_group()).IgnoreError();
  const uint64_t seq = writer_.staged();
  lock.Release();
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::RemovePlacementGroup(grpc::ServerContext* context,
                                              const v1::RemovePlacementGroupRequest* request,
                                              v1::RemovePlacementGroupResponse*) {
  absl::StatusOr<std::vector<CancelTask>> cancels;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    cancels = groups_.Remove(request->placement_group_id());
    if (!cancels.ok()) return ToGrpcStatus(cancels.status());
    kick_ = true;
    seq = PersistLocked();
  }
  // Durably removed before the raylets release: a head restarted in
  // between must not restore a group whose bundles are gone.
  const absl::Status durable = Durable(seq);
  SubmitCancels(*std::move(cancels));
  return ToGrpcStatus(durable);
}

namespace {

// The most groups one batch call names (CreatePlacementGroups and friends).
constexpr int kMaxBatch = 10000;

grpc::Status CheckBatchSize(int size, const char* field) {
  if (size == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat(field, ": at least one is required"));
  }
  if (size > kMaxBatch) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat(field, ": ", size, " entries; at most ", kMaxBatch, " per call"));
  }
  return grpc::Status::OK;
}

bool Settled(std::optional<v1::PlacementGroupState> state) {
  return !state || *state == v1::PLACEMENT_GROUP_STATE_CREATED || *state == v1::PLACEMENT_GROUP_STATE_REMOVED;
}

}  // namespace

grpc::Status HeadServer::AllKnownLocked(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  for (int i = 0; i < ids.size(); ++i) {
    if (!groups_.State(ids[i])) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("placement_group_ids[", i, "]: no placement group '", ids[i], "'"));
    }
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::CreatePlacementGroups(grpc::ServerContext* context,
                                               const v1::CreatePlacementGroupsRequest* request,
                                               v1::CreatePlacementGroupsResponse* response) {
  if (grpc::Status s = CheckBatchSize(request->requests_size(), "requests"); !s.ok()) return s;
  std::vector<std::string> new_ids;
  new_ids.reserve(request->requests_size());
  for (int i = 0; i < request->requests_size(); ++i) new_ids.push_back(NewPlacementGroupId());
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::vector<std::string>> ids = groups_.CreateBatch(request->requests(), new_ids, NowMs());
    if (!ids.ok()) return ToGrpcStatus(ids.status());
    seq = PersistLocked();
    for (std::string& id : *ids) response->add_placement_group_ids(std::move(id));
    kick_ = true;
  }
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::WaitPlacementGroupsReady(grpc::ServerContext* context,
                                                  const v1::WaitPlacementGroupsReadyRequest* request,
                                                  v1::WaitPlacementGroupsReadyResponse* response) {
  const auto& ids = request->placement_group_ids();
  if (grpc::Status s = CheckBatchSize(ids.size(), "placement_group_ids"); !s.ok()) return s;
  absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  absl::ReleasableMutexLock lock(&mu_);
  if (grpc::Status s = AllKnownLocked(ids); !s.ok()) return s;
  // Groups settle roughly in order: each check resumes where the last one
  // stopped instead of looking at every group on every wake-up.
  int settled = 0;
  auto all_settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (settled < ids.size() && Settled(groups_.State(ids[settled]))) ++settled;
    return settled == ids.size() || stopping_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&all_settled), deadline);
  bool ready = true;
  for (const std::string& id : ids) {
    const v1::PlacementGroupState state = groups_.State(id).value_or(v1::PLACEMENT_GROUP_STATE_REMOVED);
    ready = ready && state == v1::PLACEMENT_GROUP_STATE_CREATED;
    response->add_states(state);
  }
  response->set_ready(ready);
  const uint64_t seq = writer_.staged();
  lock.Release();
  return ToGrpcStatus(Durable(seq));
}

grpc::Status HeadServer::RemovePlacementGroups(grpc::ServerContext* context,
                                               const v1::RemovePlacementGroupsRequest* request,
                                               v1::RemovePlacementGroupsResponse*) {
  const auto& ids = request->placement_group_ids();
  if (grpc::Status s = CheckBatchSize(ids.size(), "placement_group_ids"); !s.ok()) return s;
  if (absl::Status s = ValidateString(request->request_id(), "request_id", 128, true); !s.ok()) {
    return ToGrpcStatus(s);
  }
  std::vector<CancelTask> cancels;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    if (grpc::Status s = AllKnownLocked(ids); !s.ok()) return s;
    for (const std::string& id : ids) {
      absl::StatusOr<std::vector<CancelTask>> released = groups_.Remove(id);
      if (!released.ok()) continue;  // removed twice in this batch: the first removal answered
      cancels.insert(cancels.end(), std::make_move_iterator(released->begin()),
                     std::make_move_iterator(released->end()));
    }
    kick_ = true;
    seq = PersistLocked();
  }
  // As RemovePlacementGroup: durable before the raylets release.
  const absl::Status durable = Durable(seq);
  SubmitCancels(std::move(cancels));
  return ToGrpcStatus(durable);
}

// --- ClusterService --------------------------------------------------------

grpc::Status HeadServer::GetClusterStatus(grpc::ServerContext* context, const v1::GetClusterStatusRequest*,
                                          v1::GetClusterStatusResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    groups_.ClusterStatus(response);
    response->set_as_of_unix_ms(NowMs());
    if (autoscaler_.reported_unix_ms() != 0) *response->mutable_autoscaler() = autoscaler_;
    response->set_metrics_address(metrics_address_);
  }
  v1::ListTrainJobsResponse jobs;
  jobs_->List({}, &jobs);
  std::map<v1::TrainJobState, uint32_t> by_state;
  for (const v1::TrainJobInfo& job : jobs.jobs()) ++by_state[job.state()];
  for (const auto& [state, count] : by_state) {
    v1::TrainJobStateCount* c = response->add_train_jobs();
    c->set_state(state);
    c->set_count(count);
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::ReportAutoscalerStatus(grpc::ServerContext* context,
                                                const v1::ReportAutoscalerStatusRequest* request,
                                                v1::ReportAutoscalerStatusResponse*) {
  for (int i = 0; i < request->status().pools_size(); ++i) {
    if (request->status().pools(i).name().empty()) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("status.pools[", i, "].name: required")));
    }
  }
  absl::MutexLock lock(&mu_);
  autoscaler_ = request->status();
  autoscaler_.set_reported_unix_ms(NowMs());
  return grpc::Status::OK;
}

void HeadServer::SetMetricsAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  metrics_address_ = address;
}

std::vector<std::shared_ptr<prometheus::Collectable>> HeadServer::MetricsCollectables() {
  auto state = std::make_shared<CallbackCollectable>([this] {
    HeadSnapshot snapshot;
    GetClusterStatus(nullptr, nullptr, &snapshot.status);
    v1::ListNodesRequest all;
    ListNodes(nullptr, &all, &snapshot.nodes);
    snapshot.now_ms = NowMs();
    return HeadStateFamilies(snapshot);
  });
  return {metrics_.registry(), state};
}

// --- TrainJobService -------------------------------------------------------

grpc::Status HeadServer::SubmitTrainJob(grpc::ServerContext* context, const v1::SubmitTrainJobRequest* request,
                                        v1::SubmitTrainJobResponse* response) {
  absl::StatusOr<std::string> id = jobs_->Submit(*request);
  if (!id.ok()) return ToGrpcStatus(id.status());
  response->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status HeadServer::GetTrainJob(grpc::ServerContext* context, const v1::GetTrainJobRequest* request,
                                     v1::GetTrainJobResponse* response) {
  return ToGrpcStatus(jobs_->Get(request->job_id(), response->mutable_job()));
}

grpc::Status HeadServer::ListTrainJobs(grpc::ServerContext* context, const v1::ListTrainJobsRequest* request,
                                       v1::ListTrainJobsResponse* response) {
  jobs_->List(*request, response);
  return grpc::Status::OK;
}

grpc::Status HeadServer::StopTrainJob(grpc::ServerContext* context, const v1::StopTrainJobRequest* request,
                                      v1::StopTrainJobResponse*) {
  return ToGrpcStatus(jobs_->Stop(request->job_id()));
}

grpc::Status HeadServer::StreamTrainJobLogs(grpc::ServerContext* context,
                                            const v1::StreamTrainJobLogsRequest* request,
                                            grpc::ServerWriter<v1::LogChunk>* writer) {
  std::optional<uint32_t> rank;
  if (request->has_rank()) rank = request->rank();
  // Read offsets per (worker, stream); a restart brings new worker ids.
  std::map<std::pair<std::string, int>, uint64_t> offsets;
  while (true) {
    absl::StatusOr<std::vector<RankLog>> sources = jobs_->Logs(request->job_id(), rank);
    if (!sources.ok()) return ToGrpcStatus(sources.status());
    bool wrote = false;
    bool all_exited = true;
    for (const RankLog& source : *sources) {
      const std::string address = RayletAddress(source.node_id);
      if (address.empty()) continue;
      for (v1::LogStream stream : {v1::LOG_STREAM_STDOUT, v1::LOG_STREAM_STDERR}) {
        auto [it, fresh] = offsets.try_emplace({source.worker_id, stream},
                                               stream == v1::LOG_STREAM_STDOUT ? request->from_offset() : 0);
        v1::ReadWorkerLogRequest read;
        read.set_worker_id(source.worker_id);
        read.set_stream(stream);
        read.set_offset(it->second);
        absl::StatusOr<v1::ReadWorkerLogResponse> chunk = raylets_.ReadWorkerLog(address, read);
        if (!chunk.ok()) {
          all_exited = false;  // not started yet, or the raylet is busy
          continue;
        }
        if (!chunk->data().empty()) {
          v1::LogChunk out;
          out.set_rank(source.rank);
          out.set_stream(stream);
          out.set_offset(it->second);
          out.set_data(chunk->data());
          if (!writer->Write(out)) return grpc::Status::OK;  // the client went away
          it->second += chunk->data().size();
          wrote = true;
        }
        if (!chunk->exited() || chunk->size() > it->second) all_exited = false;
      }
    }
    if (wrote) continue;  // drain what is there before deciding anything
    if (!request->follow() || context->IsCancelled()) return grpc::Status::OK;
    v1::TrainJobInfo info;
    if (jobs_->Get(request->job_id(), &info).ok() && all_exited &&
        (info.state() == v1::TRAIN_JOB_STATE_SUCCEEDED || info.state() == v1::TRAIN_JOB_STATE_FAILED ||
         info.state() == v1::TRAIN_JOB_STATE_STOPPED)) {
      return grpc::Status::OK;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

grpc::Status HeadServer::ReportTrainProgress(grpc::ServerContext* context,
                                             const v1::ReportTrainProgressRequest* request,
                                             v1::ReportTrainProgressResponse*) {
  return ToGrpcStatus(jobs_->ReportProgress(*request));
}

// --- PlacementGroupHost ----------------------------------------------------

absl::StatusOr<std::string> HeadServer::CreateGroup(PlacementGroupSpec spec,
                                                    const v1::CreatePlacementGroupRequest& meta) {
  absl::StatusOr<std::string> id;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    id = groups_.CreateFromSpec(std::move(spec), meta, NewPlacementGroupId(), NowMs());
    if (!id.ok()) return id;
    kick_ = true;
    seq = PersistLocked();
  }
  if (absl::Status s = Durable(seq); !s.ok()) return s;
  return id;
}

absl::StatusOr<v1::PlacementGroupInfo> HeadServer::GetGroup(const std::string& id) {
  v1::GetPlacementGroupRequest request;
  request.set_placement_group_id(id);
  v1::PlacementGroupInfo info;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = groups_.Get(request, &info); !s.ok()) return s;
  return info;
}

void HeadServer::RemoveGroup(const std::string& id) {
  absl::StatusOr<std::vector<CancelTask>> cancels;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    cancels = groups_.Remove(id);
    kick_ = true;
    seq = PersistLocked();
  }
  Durable(seq).IgnoreError();  // logged; the writer retries it with the next batch
  if (cancels.ok()) SubmitCancels(*std::move(cancels));
}

std::string HeadServer::RayletAddress(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  std::optional<NodeIndex> index = table_.FindNode(node_id);
  return index ? nodes_.Address(*index) : "";
}

}  // namespace berth
