#include "scheduler/node_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "wire/drain_reasons.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// Why a node whose heartbeat says `health` is to drain; "" if it is not.
std::string HealthDrainReason(const v1::HeartbeatRequest& health, uint32_t max_unhealthy_gpus) {
  if (!health.health_check_failure().empty()) {
    return absl::StrCat(kHealthDrainPrefix,
                        " health check failed: ", health.health_check_failure());
  }
  const auto unhealthy = static_cast<uint32_t>(health.unhealthy_gpus_size());
  if (unhealthy <= max_unhealthy_gpus) return "";
  return absl::StrCat(kHealthDrainPrefix, " ", unhealthy, " GPUs unhealthy (more than ",
                      max_unhealthy_gpus, "); the first: GPU ", health.unhealthy_gpus(0).index(),
                      ": ", health.unhealthy_gpus(0).reason());
}

}  // namespace

NodeServiceImpl::NodeServiceImpl(HeadState* state, RayletClients* raylets)
    : Admitted<v1::NodeService::Service>(HeadAdmission(*state, /*node_methods=*/true)),
      state_(state),
      raylets_(raylets) {}

grpc::Status NodeServiceImpl::RegisterNode(grpc::ServerContext* context,
                                           const v1::RegisterNodeRequest* request,
                                           v1::RegisterNodeResponse* response) {
  // Before the node can receive new bundles, it drops any it holds that the
  // head does not know (left from before a head or raylet restart).
  std::vector<v1::HeldBundle> held;
  {
    absl::MutexLock lock(&state_->mu);
    held = state_->groups.BundlesOn(request->node_id());
  }
  absl::StatusOr<v1::ReleaseUnusedBundlesResponse> released =
      absl::FailedPreconditionError("no release sent");
  if (!request->address().empty() && request->node_id().size() <= 128) {
    const v1::ReleaseUnusedBundlesRequest release =
        ReleaseAllBut(held, absl::StrCat("register/", request->request_id()));
    released = raylets_->ReleaseUnused(request->address(), release);
    if (released.ok() && released->released_size() > 0) {
      LogInfo("node ", request->node_id(), " released ", released->released_size(),
              " stale bundle(s)");
    }
  }
  absl::ReleasableMutexLock lock(&state_->mu);
  // A bundle placed on the node after the snapshot may have gone with them;
  // the raylet restores what the books say now.
  HeadState::BundleLoss lost;
  if (released.ok()) lost = state_->LoseBundlesLocked(request->node_id(), released->released());
  held = state_->groups.BundlesOn(request->node_id());
  absl::StatusOr<NodeManager::Registration> reg = state_->nodes.Register(*request, HeadNowMs());
  if (!reg.ok()) return ToGrpcStatus(reg.status());
  LogInfo("node ", request->node_id(), " registered at ", request->address(), ": ",
          state_->table.node(reg->index).total.ToString());
  const uint64_t seq = std::max(lost.seq, state_->PersistNodeLocked(request->node_id()));
  state_->groups.OnNodesChanged(HeadNowMs());
  state_->kick = true;
  response->set_accepted(true);
  response->set_heartbeat_interval_ms(
      static_cast<uint32_t>(state_->heartbeats.config().heartbeat_period_ms));
  response->set_head_epoch(state_->epoch());
  for (v1::HeldBundle& h : held) *response->add_held_bundles() = std::move(h);
  lock.Release();
  state_->TellJobs(std::move(lost.told));
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status NodeServiceImpl::Heartbeat(grpc::ServerContext* context,
                                        const v1::HeartbeatRequest* request,
                                        v1::HeartbeatResponse* response) {
  if (request->node_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "node_id: required");
  }
  // Counted without the head's mutex: a heartbeat never waits for a pass.
  const HeartbeatBook::Standing standing =
      state_->heartbeats.Heartbeat(request->node_id(), request->sequence(), HeadNowMs());
  const bool known = standing != HeartbeatBook::Standing::kUnknown;
  response->set_ack(known);
  response->set_head_epoch(state_->epoch());
  response->set_reregister_required(!known);
  response->set_drain_requested(standing == HeartbeatBook::Standing::kDraining);
  if (!known) return grpc::Status::OK;
  v1::HeartbeatRequest health;
  *health.mutable_unhealthy_gpus() = request->unhealthy_gpus();
  health.set_health_check_failure(request->health_check_failure());
  if (state_->heartbeats.NoteHealth(request->node_id(), health.SerializeAsString())) {
    // A report the head cannot take must not cost the node its heartbeat.
    if (grpc::Status s = OnHealthReport(*request); !s.ok()) {
      LogWarning("node ", request->node_id(), ": its health report: ", s.error_message());
    }
  }
  if (request->unrestored_bundles().empty()) return grpc::Status::OK;
  // Bundles the raylet could not reserve again after registering: lost.
  HeadState::BundleLoss lost;
  {
    absl::MutexLock lock(&state_->mu);
    lost = state_->LoseBundlesLocked(request->node_id(), request->unrestored_bundles());
  }
  if (lost.groups.empty()) return grpc::Status::OK;
  LogWarning("node ", request->node_id(), " could not restore ", request->unrestored_bundles_size(),
             " bundle(s); ", lost.groups.size(), " group(s) place them again");
  state_->TellJobs(std::move(lost.told));
  return ToGrpcStatus(state_->Durable(lost.seq));
}

grpc::Status NodeServiceImpl::OnHealthReport(const v1::HeartbeatRequest& request) {
  const std::string& node_id = request.node_id();
  std::vector<GroupSnapshot> told;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    absl::StatusOr<bool> changed =
        state_->nodes.SetUnhealthyGpus(node_id, request.unhealthy_gpus());
    if (!changed.ok()) return ToGrpcStatus(changed.status());
    std::optional<NodeIndex> index = state_->table.FindNode(node_id);
    const bool alive = index && state_->table.node(*index).state == NodeState::kAlive;
    const std::string drain = HealthDrainReason(request, state_->config().max_unhealthy_gpus);
    if (!drain.empty() && alive) {
      v1::DrainNodeRequest drain_request;
      drain_request.set_node_id(node_id);
      drain_request.set_reason(drain);
      drain_request.set_request_id(absl::StrCat("health/", request.sequence()));
      if (absl::Status s = state_->nodes.Drain(drain_request); !s.ok()) return ToGrpcStatus(s);
      LogWarning("node ", node_id, " drains: ", drain);
    } else if (!*changed) {
      return grpc::Status::OK;
    }
    for (const v1::UnhealthyGpu& gpu : request.unhealthy_gpus()) {
      LogWarning("node ", node_id, ": GPU ", gpu.index(), " is unhealthy: ", gpu.reason());
    }
    seq = state_->PersistNodeLocked(node_id);
    state_->groups.OnNodesChanged(HeadNowMs());  // a GPU returned offers room again
    state_->kick = true;
    told = state_->JobSnapshotsLocked(state_->groups.GroupsOn(node_id));
  }
  state_->TellJobs(std::move(told));
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status NodeServiceImpl::ListNodes(grpc::ServerContext* context,
                                        const v1::ListNodesRequest* request,
                                        v1::ListNodesResponse* response) {
  absl::MutexLock lock(&state_->mu);
  return ToGrpcStatus(state_->nodes.ListNodes(*request, response));
}

grpc::Status NodeServiceImpl::DrainNode(grpc::ServerContext* context,
                                        const v1::DrainNodeRequest* request,
                                        v1::DrainNodeResponse* response) {
  grpc::Status s = ChangeDrain(request->node_id(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (absl::Status drained = state_->nodes.Drain(*request); !drained.ok()) return drained;
    response->set_accepted(true);
    response->set_bundles_to_move(
        static_cast<uint32_t>(state_->groups.BundlesOn(request->node_id()).size()));
    return absl::OkStatus();
  });
  if (s.ok()) {
    LogInfo("node ", request->node_id(), " drains (", request->reason(), "); ",
            response->bundles_to_move(), " bundle(s) to move");
  }
  return s;
}

grpc::Status NodeServiceImpl::UndrainNode(grpc::ServerContext* context,
                                          const v1::UndrainNodeRequest* request,
                                          v1::UndrainNodeResponse* response) {
  grpc::Status s = ChangeDrain(request->node_id(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (absl::Status undrained = state_->nodes.Undrain(request->node_id()); !undrained.ok())
      return undrained;
    state_->groups.OnNodesChanged(HeadNowMs());  // it takes bundles again
    state_->kick = true;
    return absl::OkStatus();
  });
  if (s.ok()) LogInfo("node ", request->node_id(), " no longer drains");
  return s;
}

grpc::Status NodeServiceImpl::ChangeDrain(const std::string& node_id,
                                          const std::function<absl::Status()>& change) {
  std::vector<GroupSnapshot> told;  // the jobs on the node: they move, or stay
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status s = change(); !s.ok()) return ToGrpcStatus(s);
    seq = state_->PersistNodeLocked(node_id);
    told = state_->JobSnapshotsLocked(state_->groups.GroupsOn(node_id));
  }
  state_->TellJobs(std::move(told));
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status NodeServiceImpl::MarkGpuHealthy(grpc::ServerContext* context,
                                             const v1::MarkGpuHealthyRequest* request,
                                             v1::MarkGpuHealthyResponse* response) {
  const std::string& node_id = request->node_id();
  if (absl::Status s = ValidateString(node_id, "node_id", 128, true); !s.ok())
    return ToGrpcStatus(s);
  std::string address;
  {
    absl::MutexLock lock(&state_->mu);
    std::optional<NodeIndex> index = state_->table.FindNode(node_id);
    if (!index) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("node_id: no node '", node_id, "'"));
    }
    const NodeResourceTable::Node& node = state_->table.node(*index);
    if (request->gpu_index() >= node.gpus.count()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("gpu_index: node ", node_id, " has ", node.gpus.count(),
                                       " GPU(s); no GPU ", request->gpu_index()));
    }
    if (state_->nodes.UnhealthyGpus(node_id).count(request->gpu_index()) == 0) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("gpu_index: GPU ", request->gpu_index(), " of ", node_id, " is healthy"));
    }
    address = state_->nodes.Address(*index);
    if (address.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("node_id: node ", node_id, " is DEAD"));
    }
  }
  // The node forgets the fault first: otherwise its next heartbeat would
  // report the GPU unhealthy again.
  v1::ReturnGpuRequest returned;
  returned.set_gpu_index(request->gpu_index());
  absl::StatusOr<v1::ReturnGpuResponse> answer = raylets_->ReturnGpu(address, returned);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  response->set_was_unhealthy_reason(answer->was_unhealthy_reason());
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    google::protobuf::RepeatedPtrField<v1::UnhealthyGpu> still;
    for (const auto& [gpu, unhealthy] : state_->nodes.UnhealthyGpus(node_id)) {
      if (gpu != request->gpu_index()) *still.Add() = unhealthy;
    }
    absl::StatusOr<bool> changed = state_->nodes.SetUnhealthyGpus(node_id, still);
    if (!changed.ok()) return ToGrpcStatus(changed.status());
    seq = state_->PersistNodeLocked(node_id);
    state_->groups.OnNodesChanged(HeadNowMs());
    state_->kick = true;
  }
  LogInfo("node ", node_id, ": GPU ", request->gpu_index(),
          " returned to service (was: ", answer->was_unhealthy_reason(), ")");
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status NodeServiceImpl::ReportWorkerExit(grpc::ServerContext* context,
                                               const v1::ReportWorkerExitRequest* request,
                                               v1::ReportWorkerExitResponse*) {
  // The controller is told after mu is released: it calls back into the head.
  if (absl::Status s = ValidateString(request->node_id(), "node_id", 128, true); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = ValidateString(request->status().worker_id(), "status.worker_id", 256, true);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::ReleasableMutexLock lock(&state_->mu);
  if (!state_->table.FindNode(request->node_id())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("node_id: no node '", request->node_id(), "'"));
  }
  for (const v1::ReportWorkerExitRequest& seen : state_->worker_exits) {
    if (seen.node_id() == request->node_id() &&
        seen.status().worker_id() == request->status().worker_id()) {
      return grpc::Status::OK;  // a retried report
    }
  }
  state_->worker_exits.push_back(*request);
  while (state_->worker_exits.size() > state_->config().max_worker_exits_kept)
    state_->worker_exits.pop_front();
  lock.Release();
  if (TrainJobController* jobs = state_->jobs())
    jobs->OnWorkerExit(request->node_id(), request->status());
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::ListWorkerExits(grpc::ServerContext* context,
                                              const v1::ListWorkerExitsRequest* request,
                                              v1::ListWorkerExitsResponse* response) {
  absl::MutexLock lock(&state_->mu);
  for (const v1::ReportWorkerExitRequest& exit : state_->worker_exits) {
    if (!request->job_id().empty() && exit.status().job_id() != request->job_id()) continue;
    if (!request->placement_group_id().empty() &&
        exit.status().placement_group_id() != request->placement_group_id()) {
      continue;
    }
    *response->add_exits() = exit;
  }
  return grpc::Status::OK;
}

}  // namespace berth
