#include "scheduler/placement_group_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// The most groups one batch call names (CreatePlacementGroups and friends).
constexpr int kMaxBatch = 10000;

grpc::Status CheckBatchSize(int size, const char* field) {
  if (size == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat(field, ": at least one is required"));
  }
  if (size > kMaxBatch) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(field, ": ", size, " entries; at most ", kMaxBatch, " per call"));
  }
  return grpc::Status::OK;
}

bool Settled(std::optional<v1::PlacementGroupState> state) {
  return !state || *state == v1::PLACEMENT_GROUP_STATE_CREATED ||
         *state == v1::PLACEMENT_GROUP_STATE_REMOVED;
}

}  // namespace

PlacementGroupServiceImpl::PlacementGroupServiceImpl(HeadState* state, Scheduler* scheduler)
    : Admitted<v1::PlacementGroupService::Service>(HeadAdmission(*state, /*node_methods=*/false)),
      state_(state),
      scheduler_(scheduler) {}

grpc::Status PlacementGroupServiceImpl::CreatePlacementGroup(
    grpc::ServerContext* context, const v1::CreatePlacementGroupRequest* request,
    v1::CreatePlacementGroupResponse* response) {
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (team) {
      if (absl::Status s = state_->groups.queue_config().MayUse(request->queue(), *team, "queue");
          !s.ok())
        return ToGrpcStatus(s);
    }
    absl::StatusOr<std::string> id =
        state_->groups.Create(*request, HeadState::NewPlacementGroupId(), HeadNowMs());
    if (!id.ok()) return ToGrpcStatus(id.status());
    seq = state_->PersistLocked();
    response->set_placement_group_id(*id);
    state_->kick = true;
  }
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::GetPlacementGroup(
    grpc::ServerContext* context, const v1::GetPlacementGroupRequest* request,
    v1::GetPlacementGroupResponse* response) {
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status s = state_->groups.Get(*request, response->mutable_placement_group()); !s.ok())
      return ToGrpcStatus(s);
    if (team) {
      absl::Status s = state_->groups.queue_config().MayUse(response->placement_group().queue(),
                                                            *team, "placement_group_id");
      if (!s.ok()) {
        response->Clear();
        return ToGrpcStatus(s);
      }
    }
    seq = state_->StagedLocked();
  }
  // Show only what a restarted head would show too.
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::ListPlacementGroups(
    grpc::ServerContext* context, const v1::ListPlacementGroupsRequest* request,
    v1::ListPlacementGroupsResponse* response) {
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    state_->groups.List(*request, response);
    if (team) {  // a team sees the groups of the queues granted to it
      auto* groups = response->mutable_placement_groups();
      groups->erase(
          std::remove_if(
              groups->begin(), groups->end(),
              [&](const v1::PlacementGroupInfo& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
                return !state_->groups.queue_config().MayUse(g.queue(), *team, "").ok();
              }),
          groups->end());
    }
    seq = state_->StagedLocked();
  }
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::WaitPlacementGroupReady(
    grpc::ServerContext* context, const v1::WaitPlacementGroupReadyRequest* request,
    v1::WaitPlacementGroupReadyResponse* response) {
  absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  const std::string& id = request->placement_group_id();
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  absl::ReleasableMutexLock lock(&state_->mu);
  if (!state_->groups.State(id)) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("placement_group_id: no placement group '", id, "'"));
  }
  if (team) {
    if (absl::Status s = state_->groups.MayUse(id, *team, "placement_group_id"); !s.ok())
      return ToGrpcStatus(s);
  }
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    std::optional<v1::PlacementGroupState> s = state_->groups.State(id);
    return !s || *s == v1::PLACEMENT_GROUP_STATE_CREATED ||
           *s == v1::PLACEMENT_GROUP_STATE_REMOVED || state_->stopping;
  };
  state_->mu.AwaitWithDeadline(absl::Condition(&settled), deadline);
  response->set_ready(state_->groups.State(id) == v1::PLACEMENT_GROUP_STATE_CREATED);
  if (absl::StatusOr<v1::PlacementGroupInfo> info = state_->groups.Info(id); info.ok()) {
    *response->mutable_placement_group() = *std::move(info);
  }
  const uint64_t seq = state_->StagedLocked();
  lock.Release();
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::RemovePlacementGroup(
    grpc::ServerContext* context, const v1::RemovePlacementGroupRequest* request,
    v1::RemovePlacementGroupResponse*) {
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  absl::StatusOr<std::vector<CancelTask>> cancels;
  std::vector<GroupSnapshot> told;  // a job's group removed under it
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (team) {
      absl::Status s =
          state_->groups.MayUse(request->placement_group_id(), *team, "placement_group_id");
      if (!s.ok()) return ToGrpcStatus(s);
    }
    cancels = state_->groups.Remove(request->placement_group_id());
    if (!cancels.ok()) return ToGrpcStatus(cancels.status());
    told = state_->JobSnapshotsLocked({request->placement_group_id()});
    state_->kick = true;
    seq = state_->PersistLocked();
    // Sent once durably removed: a head restarted in between must not
    // restore a group whose bundles are gone.
    scheduler_->SubmitCancels(*std::move(cancels), seq);
  }
  const absl::Status durable = state_->Durable(seq);
  state_->TellJobs(std::move(told));
  return ToGrpcStatus(durable);
}

grpc::Status PlacementGroupServiceImpl::AllKnownLocked(
    const google::protobuf::RepeatedPtrField<std::string>& ids,
    const std::optional<std::string>& team) {
  for (int i = 0; i < ids.size(); ++i) {
    const std::string field = absl::StrCat("placement_group_ids[", i, "]");
    if (!state_->groups.State(ids[i])) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat(field, ": no placement group '", ids[i], "'"));
    }
    if (team) {
      if (absl::Status s = state_->groups.MayUse(ids[i], *team, field); !s.ok())
        return ToGrpcStatus(s);
    }
  }
  return grpc::Status::OK;
}

grpc::Status PlacementGroupServiceImpl::CreatePlacementGroups(
    grpc::ServerContext* context, const v1::CreatePlacementGroupsRequest* request,
    v1::CreatePlacementGroupsResponse* response) {
  if (grpc::Status s = CheckBatchSize(request->requests_size(), "requests"); !s.ok()) return s;
  std::vector<std::string> new_ids;
  new_ids.reserve(request->requests_size());
  for (int i = 0; i < request->requests_size(); ++i)
    new_ids.push_back(HeadState::NewPlacementGroupId());
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    for (int i = 0; team && i < request->requests_size(); ++i) {
      absl::Status s = state_->groups.queue_config().MayUse(
          request->requests(i).queue(), *team, absl::StrCat("requests[", i, "].queue"));
      if (!s.ok()) return ToGrpcStatus(s);
    }
    absl::StatusOr<std::vector<std::string>> ids =
        state_->groups.CreateBatch(request->requests(), new_ids, HeadNowMs());
    if (!ids.ok()) return ToGrpcStatus(ids.status());
    seq = state_->PersistLocked();
    for (std::string& id : *ids) response->add_placement_group_ids(std::move(id));
    state_->kick = true;
  }
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::WaitPlacementGroupsReady(
    grpc::ServerContext* context, const v1::WaitPlacementGroupsReadyRequest* request,
    v1::WaitPlacementGroupsReadyResponse* response) {
  const auto& ids = request->placement_group_ids();
  if (grpc::Status s = CheckBatchSize(ids.size(), "placement_group_ids"); !s.ok()) return s;
  absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  absl::ReleasableMutexLock lock(&state_->mu);
  if (grpc::Status s = AllKnownLocked(ids, team); !s.ok()) return s;
  // Groups settle roughly in order: each check resumes where the last one
  // stopped instead of looking at every group on every wake-up.
  int settled = 0;
  auto all_settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    while (settled < ids.size() && Settled(state_->groups.State(ids[settled]))) ++settled;
    return settled == ids.size() || state_->stopping;
  };
  state_->mu.AwaitWithDeadline(absl::Condition(&all_settled), deadline);
  bool ready = true;
  for (const std::string& id : ids) {
    const v1::PlacementGroupState state =
        state_->groups.State(id).value_or(v1::PLACEMENT_GROUP_STATE_REMOVED);
    ready = ready && state == v1::PLACEMENT_GROUP_STATE_CREATED;
    response->add_states(state);
  }
  response->set_ready(ready);
  const uint64_t seq = state_->StagedLocked();
  lock.Release();
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status PlacementGroupServiceImpl::RemovePlacementGroups(
    grpc::ServerContext* context, const v1::RemovePlacementGroupsRequest* request,
    v1::RemovePlacementGroupsResponse*) {
  const auto& ids = request->placement_group_ids();
  if (grpc::Status s = CheckBatchSize(ids.size(), "placement_group_ids"); !s.ok()) return s;
  if (absl::Status s = ValidateString(request->request_id(), "request_id", 128, true); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  std::vector<CancelTask> cancels;
  std::vector<GroupSnapshot> told;  // jobs' groups removed under them
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (grpc::Status s = AllKnownLocked(ids, team); !s.ok()) return s;
    for (const std::string& id : ids) {
      absl::StatusOr<std::vector<CancelTask>> released = state_->groups.Remove(id);
      if (!released.ok()) continue;  // removed twice in this batch: the first removal answered
      cancels.insert(cancels.end(), std::make_move_iterator(released->begin()),
                     std::make_move_iterator(released->end()));
    }
    told = state_->JobSnapshotsLocked({ids.begin(), ids.end()});
    state_->kick = true;
    seq = state_->PersistLocked();
    scheduler_->SubmitCancels(std::move(cancels), seq);  // as RemovePlacementGroup
  }
  const absl::Status durable = state_->Durable(seq);
  state_->TellJobs(std::move(told));
  return ToGrpcStatus(durable);
}

}  // namespace berth
