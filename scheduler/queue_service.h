// QueueServiceImpl: the cluster's queues and cohorts (queueing/queue_config.h),
// kept in HeadState and its store. A change is checked whole, staged and
// durable before it is answered; a refused change changes nothing.
#ifndef BERTH_SCHEDULER_QUEUE_SERVICE_H_
#define BERTH_SCHEDULER_QUEUE_SERVICE_H_

#include <functional>

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class QueueServiceImpl final : public Admitted<v1::QueueService::Service> {
 public:
  // Not owned; it outlives the service.
  explicit QueueServiceImpl(HeadState* state);

  grpc::Status CreateQueue(grpc::ServerContext* context, const v1::CreateQueueRequest* request,
                           v1::CreateQueueResponse* response) override;
  grpc::Status UpdateQueue(grpc::ServerContext* context, const v1::UpdateQueueRequest* request,
                           v1::UpdateQueueResponse* response) override;
  grpc::Status DeleteQueue(grpc::ServerContext* context, const v1::DeleteQueueRequest* request,
                           v1::DeleteQueueResponse* response) override;
  grpc::Status GetQueue(grpc::ServerContext* context, const v1::GetQueueRequest* request,
                        v1::GetQueueResponse* response) override;
  grpc::Status ListQueues(grpc::ServerContext* context, const v1::ListQueuesRequest* request,
                          v1::ListQueuesResponse* response) override;
  grpc::Status CreateCohort(grpc::ServerContext* context, const v1::CreateCohortRequest* request,
                            v1::CreateCohortResponse* response) override;
  grpc::Status DeleteCohort(grpc::ServerContext* context, const v1::DeleteCohortRequest* request,
                            v1::DeleteCohortResponse* response) override;
  grpc::Status IssueTeamToken(grpc::ServerContext* context,
                              const v1::IssueTeamTokenRequest* request,
                              v1::IssueTeamTokenResponse* response) override;
  grpc::Status RevokeTeamTokens(grpc::ServerContext* context,
                                const v1::RevokeTeamTokensRequest* request,
                                v1::RevokeTeamTokensResponse* response) override;
  grpc::Status CreatePriorityClass(grpc::ServerContext* context,
                                   const v1::CreatePriorityClassRequest* request,
                                   v1::CreatePriorityClassResponse* response) override;
  grpc::Status DeletePriorityClass(grpc::ServerContext* context,
                                   const v1::DeletePriorityClassRequest* request,
                                   v1::DeletePriorityClassResponse* response) override;
  grpc::Status ApplyQueues(grpc::ServerContext* context, const v1::ApplyQueuesRequest* request,
                           v1::ApplyQueuesResponse* response) override;

 private:
  // Applies `change` to the config under the head's lock; on success makes
  // the new config durable before returning.
  grpc::Status Change(const std::function<absl::StatusOr<QueueConfig>(const QueueConfig&)>& change);
  // The configuration and every queue's status (ListQueues).
  void ListLocked(v1::ListQueuesResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);

  HeadState* const state_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_QUEUE_SERVICE_H_
