#include "wire/head_client.h"

#include <cstdint>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "auth/cluster_token.h"
#include "common/backoff.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

absl::Status ValidateAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address: '", address, "' is not host:port (e.g. 127.0.0.1:6380)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const HeadClientOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout: ", absl::FormatDuration(options.timeout), " is not > 0"));
  }
  if (options.max_retries < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_retries: ", options.max_retries, " is not >= 0"));
  }
  if (options.initial_backoff < absl::ZeroDuration() || !(options.backoff_multiplier >= 1)) {
    return absl::InvalidArgumentError("backoff: want initial_backoff >= 0 and multiplier >= 1");
  }
  return absl::OkStatus();
}

}  // namespace

std::string NewRequestId() {
  // random_device reads the kernel's entropy source; one per call keeps
  // this thread-safe without a lock.
  std::random_device device;
  auto next64 = [&device] {
    return (static_cast<uint64_t>(device()) << 32) | static_cast<uint64_t>(device());
  };
  const uint64_t high = next64();
  const uint64_t low = next64();
  return absl::StrFormat("%016x%016x", high, low);
}

absl::StatusOr<std::unique_ptr<HeadClient>> HeadClient::Create(absl::string_view address,
                                                               HeadClientOptions options) {
  if (absl::Status s = ValidateAddress(address); !s.ok()) return s;
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::shared_ptr<grpc::Channel> channel =
      options.tls.MakeChannel(std::string(address), TlsRole::kHead);
  return std::unique_ptr<HeadClient>(new HeadClient(std::move(channel), std::move(options)));
}

HeadClient::HeadClient(std::shared_ptr<grpc::Channel> channel, HeadClientOptions options)
    : options_(std::move(options)),
      channel_(channel),
      nodes_(v1::NodeService::NewStub(channel)),
      placement_groups_(v1::PlacementGroupService::NewStub(channel)),
      cluster_(v1::ClusterService::NewStub(channel)),
      train_jobs_(v1::TrainJobService::NewStub(channel)),
      queues_(v1::QueueService::NewStub(channel)),
      packages_(v1::PackageService::NewStub(channel)) {}

template <typename Response, typename Rpc>
absl::StatusOr<Response> HeadClient::Call(absl::Duration timeout, Rpc rpc) {
  Backoff backoff({options_.initial_backoff, options_.backoff_multiplier});
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext context;
    AttachClusterToken(&context, options_.cluster_token);
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Response response;
    const grpc::Status status = rpc(&context, &response);
    if (status.ok()) return response;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || attempt >= options_.max_retries) {
      return FromGrpcStatus(status);
    }
    absl::SleepFor(backoff.Next());
  }
}

absl::StatusOr<v1::ListNodesResponse> HeadClient::ListNodes(const v1::ListNodesRequest& request) {
  return Call<v1::ListNodesResponse>(options_.timeout, [&](auto* context, auto* response) {
    return nodes_->ListNodes(context, request, response);
  });
}

absl::StatusOr<v1::DrainNodeResponse> HeadClient::DrainNode(v1::DrainNodeRequest request) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  return Call<v1::DrainNodeResponse>(options_.timeout, [&](auto* context, auto* response) {
    return nodes_->DrainNode(context, request, response);
  });
}

absl::Status HeadClient::UndrainNode(const std::string& node_id) {
  v1::UndrainNodeRequest request;
  request.set_node_id(node_id);
  return Call<v1::UndrainNodeResponse>(options_.timeout,
                                       [&](auto* context, auto* response) {
                                         return nodes_->UndrainNode(context, request, response);
                                       })
      .status();
}

absl::StatusOr<v1::MarkGpuHealthyResponse> HeadClient::MarkGpuHealthy(
    const v1::MarkGpuHealthyRequest& request) {
  return Call<v1::MarkGpuHealthyResponse>(options_.timeout, [&](auto* context, auto* response) {
    return nodes_->MarkGpuHealthy(context, request, response);
  });
}

absl::StatusOr<v1::ListWorkerExitsResponse> HeadClient::ListWorkerExits(
    const v1::ListWorkerExitsRequest& request) {
  return Call<v1::ListWorkerExitsResponse>(options_.timeout, [&](auto* context, auto* response) {
    return nodes_->ListWorkerExits(context, request, response);
  });
}

absl::StatusOr<v1::CreatePlacementGroupResponse> HeadClient::CreatePlacementGroup(
    v1::CreatePlacementGroupRequest request) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  return Call<v1::CreatePlacementGroupResponse>(
      options_.timeout, [&](auto* context, auto* response) {
        return placement_groups_->CreatePlacementGroup(context, request, response);
      });
}

absl::StatusOr<v1::GetPlacementGroupResponse> HeadClient::GetPlacementGroup(
    const v1::GetPlacementGroupRequest& request) {
  return Call<v1::GetPlacementGroupResponse>(options_.timeout, [&](auto* context, auto* response) {
    return placement_groups_->GetPlacementGroup(context, request, response);
  });
}

absl::StatusOr<v1::GetPlacementGroupResponse> HeadClient::FindPlacementGroup(
    absl::string_view id_or_name) {
  v1::GetPlacementGroupRequest by_id;
  by_id.set_placement_group_id(std::string(id_or_name));
  absl::StatusOr<v1::GetPlacementGroupResponse> found = GetPlacementGroup(by_id);
  if (!absl::IsNotFound(found.status())) return found;
  v1::GetPlacementGroupRequest by_name;
  by_name.set_name(std::string(id_or_name));
  found = GetPlacementGroup(by_name);
  if (absl::IsNotFound(found.status())) {
    return absl::NotFoundError(
        absl::StrCat("no placement group has the id or name '", id_or_name, "'"));
  }
  return found;
}

absl::StatusOr<v1::ListPlacementGroupsResponse> HeadClient::ListPlacementGroups(
    const v1::ListPlacementGroupsRequest& request) {
  return Call<v1::ListPlacementGroupsResponse>(
      options_.timeout, [&](auto* context, auto* response) {
        return placement_groups_->ListPlacementGroups(context, request, response);
      });
}

absl::StatusOr<v1::WaitPlacementGroupReadyResponse> HeadClient::WaitPlacementGroupReady(
    const v1::WaitPlacementGroupReadyRequest& request) {
  return Call<v1::WaitPlacementGroupReadyResponse>(
      absl::Milliseconds(request.timeout_ms()) + options_.timeout,
      [&](auto* context, auto* response) {
        return placement_groups_->WaitPlacementGroupReady(context, request, response);
      });
}

absl::StatusOr<v1::RemovePlacementGroupResponse> HeadClient::RemovePlacementGroup(
    v1::RemovePlacementGroupRequest request) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  return Call<v1::RemovePlacementGroupResponse>(
      options_.timeout, [&](auto* context, auto* response) {
        return placement_groups_->RemovePlacementGroup(context, request, response);
      });
}

absl::StatusOr<v1::GetClusterStatusResponse> HeadClient::GetClusterStatus() {
  const v1::GetClusterStatusRequest request;
  return Call<v1::GetClusterStatusResponse>(options_.timeout, [&](auto* context, auto* response) {
    return cluster_->GetClusterStatus(context, request, response);
  });
}

absl::Status HeadClient::ReportAutoscalerStatus(const v1::AutoscalerStatus& status) {
  v1::ReportAutoscalerStatusRequest request;
  *request.mutable_status() = status;
  return Call<v1::ReportAutoscalerStatusResponse>(options_.timeout,
                                                  [&](auto* context, auto* response) {
                                                    return cluster_->ReportAutoscalerStatus(
                                                        context, request, response);
                                                  })
      .status();
}

absl::StatusOr<v1::SubmitTrainJobResponse> HeadClient::SubmitTrainJob(
    v1::SubmitTrainJobRequest request) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  return Call<v1::SubmitTrainJobResponse>(options_.timeout, [&](auto* context, auto* response) {
    return train_jobs_->SubmitTrainJob(context, request, response);
  });
}

absl::StatusOr<v1::UploadPackageResponse> HeadClient::UploadPackage(const std::string& digest,
                                                                    absl::string_view bytes) {
  v1::StatPackageRequest stat;
  stat.set_digest(digest);
  absl::StatusOr<v1::StatPackageResponse> stored =
      Call<v1::StatPackageResponse>(options_.timeout, [&](auto* context, auto* response) {
        return packages_->StatPackage(context, stat, response);
      });
  if (!stored.ok()) return stored.status();
  if (stored->stored()) {
    v1::UploadPackageResponse response;
    response.set_digest(digest);
    response.set_already_stored(true);
    return response;
  }
  constexpr size_t kChunk = 1 << 20;
  // At least 1 MiB/s, beside the usual deadline.
  const absl::Duration timeout = options_.timeout + absl::Seconds(bytes.size() / kChunk);
  return Call<v1::UploadPackageResponse>(timeout, [&](auto* context, auto* response) {
    std::unique_ptr<grpc::ClientWriter<v1::UploadPackageRequest>> writer =
        packages_->UploadPackage(context, response);
    v1::UploadPackageRequest message;
    message.mutable_header()->set_digest(digest);
    message.mutable_header()->set_size_bytes(bytes.size());
    bool open = writer->Write(message);
    for (size_t offset = 0; open && offset < bytes.size(); offset += kChunk) {
      message.set_data(std::string(bytes.substr(offset, kChunk)));
      open = writer->Write(message);
    }
    writer->WritesDone();
    return writer->Finish();  // the head's answer, also when it stopped reading early
  });
}

absl::StatusOr<v1::GetTrainJobResponse> HeadClient::GetTrainJob(
    const v1::GetTrainJobRequest& request) {
  return Call<v1::GetTrainJobResponse>(options_.timeout, [&](auto* context, auto* response) {
    return train_jobs_->GetTrainJob(context, request, response);
  });
}

absl::StatusOr<v1::ListTrainJobsResponse> HeadClient::ListTrainJobs(
    const v1::ListTrainJobsRequest& request) {
  return Call<v1::ListTrainJobsResponse>(options_.timeout, [&](auto* context, auto* response) {
    return train_jobs_->ListTrainJobs(context, request, response);
  });
}

absl::StatusOr<v1::StopTrainJobResponse> HeadClient::StopTrainJob(v1::StopTrainJobRequest request) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  return Call<v1::StopTrainJobResponse>(options_.timeout, [&](auto* context, auto* response) {
    return train_jobs_->StopTrainJob(context, request, response);
  });
}

absl::StatusOr<v1::CreateQueueResponse> HeadClient::CreateQueue(
    const v1::CreateQueueRequest& request) {
  return Call<v1::CreateQueueResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->CreateQueue(context, request, response);
  });
}

absl::StatusOr<v1::UpdateQueueResponse> HeadClient::UpdateQueue(
    const v1::UpdateQueueRequest& request) {
  return Call<v1::UpdateQueueResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->UpdateQueue(context, request, response);
  });
}

absl::StatusOr<v1::DeleteQueueResponse> HeadClient::DeleteQueue(
    const v1::DeleteQueueRequest& request) {
  return Call<v1::DeleteQueueResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->DeleteQueue(context, request, response);
  });
}

absl::StatusOr<v1::GetQueueResponse> HeadClient::GetQueue(const v1::GetQueueRequest& request) {
  return Call<v1::GetQueueResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->GetQueue(context, request, response);
  });
}

absl::StatusOr<v1::ListQueuesResponse> HeadClient::ListQueues(
    const v1::ListQueuesRequest& request) {
  return Call<v1::ListQueuesResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->ListQueues(context, request, response);
  });
}

absl::StatusOr<v1::CreateCohortResponse> HeadClient::CreateCohort(
    const v1::CreateCohortRequest& request) {
  return Call<v1::CreateCohortResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->CreateCohort(context, request, response);
  });
}

absl::StatusOr<v1::DeleteCohortResponse> HeadClient::DeleteCohort(
    const v1::DeleteCohortRequest& request) {
  return Call<v1::DeleteCohortResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->DeleteCohort(context, request, response);
  });
}

absl::StatusOr<v1::IssueTeamTokenResponse> HeadClient::IssueTeamToken(
    const v1::IssueTeamTokenRequest& request) {
  return Call<v1::IssueTeamTokenResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->IssueTeamToken(context, request, response);
  });
}

absl::StatusOr<v1::RevokeTeamTokensResponse> HeadClient::RevokeTeamTokens(
    const v1::RevokeTeamTokensRequest& request) {
  return Call<v1::RevokeTeamTokensResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->RevokeTeamTokens(context, request, response);
  });
}

absl::StatusOr<v1::CreatePriorityClassResponse> HeadClient::CreatePriorityClass(
    const v1::CreatePriorityClassRequest& request) {
  return Call<v1::CreatePriorityClassResponse>(
      options_.timeout, [&](auto* context, auto* response) {
        return queues_->CreatePriorityClass(context, request, response);
      });
}

absl::StatusOr<v1::DeletePriorityClassResponse> HeadClient::DeletePriorityClass(
    const v1::DeletePriorityClassRequest& request) {
  return Call<v1::DeletePriorityClassResponse>(
      options_.timeout, [&](auto* context, auto* response) {
        return queues_->DeletePriorityClass(context, request, response);
      });
}

absl::StatusOr<v1::ApplyQueuesResponse> HeadClient::ApplyQueues(
    const v1::ApplyQueuesRequest& request) {
  return Call<v1::ApplyQueuesResponse>(options_.timeout, [&](auto* context, auto* response) {
    return queues_->ApplyQueues(context, request, response);
  });
}

}  // namespace berth
