#include "scheduler/queue_service.h"

#include "absl/strings/str_cat.h"
#include "placement/label_selector.h"
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
    : Admitted<v1::QueueService::Service>(HeadAdmission(*state, /*node_methods=*/false)),
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
  for (v1::QueueStatus& status : state_->groups.QueueStatuses(queue->name))
    *response->mutable_queue()->mutable_status() = std::move(status);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*,
                                          v1::ListQueuesResponse* response) {
  absl::MutexLock lock(&state_->mu);
  ListLocked(response);
  return grpc::Status::OK;
}

void QueueServiceImpl::ListLocked(v1::ListQueuesResponse* response) {
  // Both by name: each queue beside its status.
  std::vector<v1::QueueStatus> statuses = state_->groups.QueueStatuses();
  size_t i = 0;
  for (const auto& [name, queue] : state_->groups.queue_config().queues()) {
    v1::Queue* out = response->add_queues();
    QueueToProto(queue, out);
    *out->mutable_status() = std::move(statuses[i++]);
  }
  for (const std::string& cohort : state_->groups.queue_config().cohorts())
    response->add_cohorts(cohort);
  for (const auto& [name, c] : state_->groups.queue_config().priority_classes()) {
    v1::PriorityClass* out = response->add_priority_classes();
    out->set_name(c.name);
    out->set_value(c.value);
  }
}

grpc::Status QueueServiceImpl::CreatePriorityClass(grpc::ServerContext*,
                                                   const v1::CreatePriorityClassRequest* request,
                                                   v1::CreatePriorityClassResponse*) {
  return Change([&](const QueueConfig& config) -> absl::StatusOr<QueueConfig> {
    absl::StatusOr<QueueConfig> next = config.WithPriorityClass(
        {request->priority_class().name(), request->priority_class().value()});
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          absl::StrCat("priority_class.", next.status().message()));
    }
    return next;
  });
}

grpc::Status QueueServiceImpl::DeletePriorityClass(grpc::ServerContext*,
                                                   const v1::DeletePriorityClassRequest* request,
                                                   v1::DeletePriorityClassResponse*) {
  return Change(
      [&](const QueueConfig& config) { return config.WithoutPriorityClass(request->name()); });
}

grpc::Status QueueServiceImpl::ApplyQueues(grpc::ServerContext*,
                                           const v1::ApplyQueuesRequest* request,
                                           v1::ApplyQueuesResponse* response) {
  grpc::Status s = Change([&](const QueueConfig& config) {
    return QueueConfigWith(config, request->cohorts(), request->queues(),
                           request->priority_classes());
  });
  if (!s.ok()) return s;
  absl::MutexLock lock(&state_->mu);
  ListLocked(response->mutable_config());
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::IssueTeamToken(grpc::ServerContext*,
                                              const v1::IssueTeamTokenRequest* request,
                                              v1::IssueTeamTokenResponse* response) {
  if (request->team().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("team: name the team the token is for"));
  }
  if (absl::Status s = ValidateLabelValue(request->team(), "team"); !s.ok()) return ToGrpcStatus(s);
  const TeamCredentials::Issued issued = TeamCredentials::Mint();
  // Durable before it works and is shown: a head restarted later knows it.
  if (absl::Status s = state_->PersistCredential(issued.digest, request->team()); !s.ok())
    return ToGrpcStatus(s);
  state_->teams.Add(issued.digest, request->team());
  response->set_token(issued.token);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::RevokeTeamTokens(grpc::ServerContext*,
                                                const v1::RevokeTeamTokensRequest* request,
                                                v1::RevokeTeamTokensResponse* response) {
  const std::vector<std::string> revoked = state_->teams.Revoke(request->team());
  for (const std::string& digest : revoked) {
    if (absl::Status s = state_->PersistCredential(digest, std::nullopt); !s.ok())
      return ToGrpcStatus(s);
  }
  response->set_revoked(static_cast<uint32_t>(revoked.size()));
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
