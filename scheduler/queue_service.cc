#include "scheduler/queue_service.h"

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"
#include "wire/queue_convert.h"

namespace berth {
namespace {

absl::Status CheckCohort(const QueueConfig& config, const QueueSpec& queue) {
  if (queue.cohort.empty() || config.HasCohort(queue.cohort)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("queue.cohort: no cohort '", queue.cohort,
                                          "' (create it first: berth queue cohort create ",
                                          queue.cohort, ")"));
}

}  // namespace

QueueServiceImpl::QueueServiceImpl(HeadState* state)
    : Admitted<v1::QueueService::Service>(HeadAdmission(state->config(), /*node_methods=*/false)),
      state_(state) {}

grpc::Status QueueServiceImpl::Change(
    const std::function<absl::StatusOr<QueueConfig>(const QueueConfig&)>& change) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    absl::StatusOr<QueueConfig> next = change(state_->groups.queue_config());
    if (!next.ok()) return ToGrpcStatus(next.status());
    // Refused (and nothing changed) when it deletes a queue still named.
    if (absl::Status s = state_->groups.Reconfigure(*std::move(next)); !s.ok())
      return ToGrpcStatus(s);
    state_->kick = true;
    seq = state_->PersistQueuesLocked();
  }
  return ToGrpcStatus(state_->Durable(seq));
}

grpc::Status QueueServiceImpl::CreateQueue(grpc::ServerContext*,
                                           const v1::CreateQueueRequest* request,
                                           v1::CreateQueueResponse* response) {
  absl::StatusOr<QueueSpec> queue = QueueFromProto(request->queue(), "queue");
  if (!queue.ok()) return ToGrpcStatus(queue.status());
  QueueToProto(*queue, response->mutable_queue());
  return Change([&](const QueueConfig& config) -> absl::StatusOr<QueueConfig> {
    if (config.FindQueue(queue->name) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("queue.name: queue '", queue->name, "' exists (update it instead)"));
    }
    if (absl::Status s = CheckCohort(config, *queue); !s.ok()) return s;
    return config.WithQueue(*queue);
  });
}

grpc::Status QueueServiceImpl::UpdateQueue(grpc::ServerContext*,
                                           const v1::UpdateQueueRequest* request,
                                           v1::UpdateQueueResponse* response) {
  absl::StatusOr<QueueSpec> queue = QueueFromProto(request->queue(), "queue");
  if (!queue.ok()) return ToGrpcStatus(queue.status());
  QueueToProto(*queue, response->mutable_queue());
  return Change([&](const QueueConfig& config) -> absl::StatusOr<QueueConfig> {
    if (config.FindQueue(queue->name) == nullptr) {
      return absl::NotFoundError(absl::StrCat("queue.name: no queue '", queue->name, "'"));
    }
    if (absl::Status s = CheckCohort(config, *queue); !s.ok()) return s;
    return config.WithQueue(*queue);
  });
}

grpc::Status QueueServiceImpl::DeleteQueue(grpc::ServerContext*,
                                           const v1::DeleteQueueRequest* request,
                                           v1::DeleteQueueResponse*) {
  return Change([&](const QueueConfig& config) { return config.WithoutQueue(request->name()); });
}

grpc::Status QueueServiceImpl::GetQueue(grpc::ServerContext*, const v1::GetQueueRequest* request,
                                        v1::GetQueueResponse* response) {
  absl::MutexLock lock(&state_->mu);
  const QueueSpec* queue = state_->groups.queue_config().FindQueue(request->name());
  if (queue == nullptr) {
    return ToGrpcStatus(
        absl::NotFoundError(absl::StrCat("name: no queue '", request->name(), "'")));
  }
  QueueToProto(*queue, response->mutable_queue());
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*,
                                          v1::ListQueuesResponse* response) {
  absl::MutexLock lock(&state_->mu);
  for (const auto& [name, queue] : state_->groups.queue_config().queues()) {
    QueueToProto(queue, response->add_queues());
  }
  for (const std::string& cohort : state_->groups.queue_config().cohorts()) response->add_cohorts(cohort);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::CreateCohort(grpc::ServerContext*,
                                            const v1::CreateCohortRequest* request,
                                            v1::CreateCohortResponse*) {
  return Change([&](const QueueConfig& config) { return config.WithCohort(request->name()); });
}

grpc::Status QueueServiceImpl::DeleteCohort(grpc::ServerContext*,
                                            const v1::DeleteCohortRequest* request,
                                            v1::DeleteCohortResponse*) {
  return Change([&](const QueueConfig& config) { return config.WithoutCohort(request->name()); });
}

}  // namespace berth
