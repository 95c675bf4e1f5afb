// PlacementGroupServiceImpl: create, get, list, wait for and remove
// placement groups, one at a time or in batches (all or nothing). A change
// is answered once durable; a removal is durable before its raylets
// release.
#ifndef BERTH_SCHEDULER_PLACEMENT_GROUP_SERVICE_H_
#define BERTH_SCHEDULER_PLACEMENT_GROUP_SERVICE_H_

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"
#include "scheduler/scheduler.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class PlacementGroupServiceImpl final : public Admitted<v1::PlacementGroupService::Service> {
 public:
  // Not owned; they outlive the service.
  PlacementGroupServiceImpl(HeadState* state, Scheduler* scheduler);

  grpc::Status CreatePlacementGroup(grpc::ServerContext* context,
                                    const v1::CreatePlacementGroupRequest* request,
                                    v1::CreatePlacementGroupResponse* response) override;
  grpc::Status GetPlacementGroup(grpc::ServerContext* context,
                                 const v1::GetPlacementGroupRequest* request,
                                 v1::GetPlacementGroupResponse* response) override;
  grpc::Status ListPlacementGroups(grpc::ServerContext* context,
                                   const v1::ListPlacementGroupsRequest* request,
                                   v1::ListPlacementGroupsResponse* response) override;
  grpc::Status WaitPlacementGroupReady(grpc::ServerContext* context,
                                       const v1::WaitPlacementGroupReadyRequest* request,
                                       v1::WaitPlacementGroupReadyResponse* response) override;
  grpc::Status RemovePlacementGroup(grpc::ServerContext* context,
                                    const v1::RemovePlacementGroupRequest* request,
                                    v1::RemovePlacementGroupResponse* response) override;
  grpc::Status CreatePlacementGroups(grpc::ServerContext* context,
                                     const v1::CreatePlacementGroupsRequest* request,
                                     v1::CreatePlacementGroupsResponse* response) override;
  grpc::Status WaitPlacementGroupsReady(grpc::ServerContext* context,
                                        const v1::WaitPlacementGroupsReadyRequest* request,
                                        v1::WaitPlacementGroupsReadyResponse* response) override;
  grpc::Status RemovePlacementGroups(grpc::ServerContext* context,
                                     const v1::RemovePlacementGroupsRequest* request,
                                     v1::RemovePlacementGroupsResponse* response) override;

 private:
  // NOT_FOUND naming the first id (placement_group_ids[i]) no group has;
  // PERMISSION_DENIED naming the first a caller's `team` may not use.
  grpc::Status AllKnownLocked(const google::protobuf::RepeatedPtrField<std::string>& ids,
                              const std::optional<std::string>& team)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);

  HeadState* const state_;
  Scheduler* const scheduler_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_PLACEMENT_GROUP_SERVICE_H_
