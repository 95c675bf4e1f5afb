// HeadClient: a blocking client of berth-head's services (nodes, placement
// groups, cluster status, train jobs).
//
// Promises: every call has a deadline (options.timeout, plus the wait for
// WaitPlacementGroupReady); calls that fail with UNAVAILABLE are retried
// with exponential backoff, which is safe because reads have no effects and
// every mutating request carries a request_id (filled in here when empty
// and reused by the retries), so the head applies it once. Errors are the
// head's status, code and message unchanged. Thread-safe.
#ifndef BERTH_WIRE_HEAD_CLIENT_H_
#define BERTH_WIRE_HEAD_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "auth/cluster_tls.h"
#include "berth/v1/head.grpc.pb.h"

namespace berth {

struct HeadClientOptions {
  // Attached to every call (auth/cluster_token.h); empty = none.
  std::string cluster_token;
  // TLS to the head (auth/cluster_tls.h); off = plaintext.
  TlsConfig tls;
  // Deadline of each attempt of each call.
  absl::Duration timeout = absl::Seconds(10);
  // Attempts after the first one, on UNAVAILABLE only.
  int max_retries = 3;
  // Wait before the first retry; each later one waits `backoff_multiplier`
  // times longer.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  double backoff_multiplier = 2;
};

// A random 128-bit idempotency key, as 32 lowercase hex digits.
std::string NewRequestId();

class HeadClient {
 public:
  // `address` is "host:port" (IPv6 hosts in brackets: "[::1]:6380"). Errors
  // name the field ("address: ...", "timeout: ..."). Connects lazily: an
  // unreachable head shows up as UNAVAILABLE on the first call.
  static absl::StatusOr<std::unique_ptr<HeadClient>> Create(absl::string_view address,
                                                            HeadClientOptions options = {});

  // The token this client attaches (for calls made outside it, e.g. streams).
  const std::string& cluster_token() const { return options_.cluster_token; }
  // The channel to the head (for calls made outside it, e.g. streams).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  absl::StatusOr<v1::ListNodesResponse> ListNodes(const v1::ListNodesRequest& request = {});
  absl::StatusOr<v1::DrainNodeResponse> DrainNode(v1::DrainNodeRequest request);
  absl::Status UndrainNode(const std::string& node_id);
  absl::StatusOr<v1::MarkGpuHealthyResponse> MarkGpuHealthy(
      const v1::MarkGpuHealthyRequest& request);
  absl::StatusOr<v1::ListWorkerExitsResponse> ListWorkerExits(
      const v1::ListWorkerExitsRequest& request = {});

  absl::StatusOr<v1::CreatePlacementGroupResponse> CreatePlacementGroup(
      v1::CreatePlacementGroupRequest request);
  absl::StatusOr<v1::GetPlacementGroupResponse> GetPlacementGroup(
      const v1::GetPlacementGroupRequest& request);
  // By id, or by name when no group has that id.
  absl::StatusOr<v1::GetPlacementGroupResponse> FindPlacementGroup(absl::string_view id_or_name);
  absl::StatusOr<v1::ListPlacementGroupsResponse> ListPlacementGroups(
      const v1::ListPlacementGroupsRequest& request = {});
  // The deadline is request.timeout_ms plus options.timeout, so that the
  // head's "not ready yet" answer arrives before the call expires.
  absl::StatusOr<v1::WaitPlacementGroupReadyResponse> WaitPlacementGroupReady(
      const v1::WaitPlacementGroupReadyRequest& request);
  absl::StatusOr<v1::RemovePlacementGroupResponse> RemovePlacementGroup(
      v1::RemovePlacementGroupRequest request);

  absl::StatusOr<v1::GetClusterStatusResponse> GetClusterStatus();
  absl::Status ReportAutoscalerStatus(const v1::AutoscalerStatus& status);

  absl::StatusOr<v1::SubmitTrainJobResponse> SubmitTrainJob(v1::SubmitTrainJobRequest request);
  absl::StatusOr<v1::GetTrainJobResponse> GetTrainJob(const v1::GetTrainJobRequest& request);
  absl::StatusOr<v1::ListTrainJobsResponse> ListTrainJobs(
      const v1::ListTrainJobsRequest& request = {});
  absl::StatusOr<v1::StopTrainJobResponse> StopTrainJob(v1::StopTrainJobRequest request);

  // PackageService: stores `bytes` (a working-directory package,
  // common/working_dir_package.h) as `digest` unless the head holds it
  // already (asked first). Each attempt's deadline grows with the size.
  absl::StatusOr<v1::UploadPackageResponse> UploadPackage(const std::string& digest,
                                                          absl::string_view bytes);

  // QueueService.
  absl::StatusOr<v1::CreateQueueResponse> CreateQueue(const v1::CreateQueueRequest& request);
  absl::StatusOr<v1::UpdateQueueResponse> UpdateQueue(const v1::UpdateQueueRequest& request);
  absl::StatusOr<v1::DeleteQueueResponse> DeleteQueue(const v1::DeleteQueueRequest& request);
  absl::StatusOr<v1::GetQueueResponse> GetQueue(const v1::GetQueueRequest& request);
  absl::StatusOr<v1::ListQueuesResponse> ListQueues(const v1::ListQueuesRequest& request = {});
  absl::StatusOr<v1::CreateCohortResponse> CreateCohort(const v1::CreateCohortRequest& request);
  absl::StatusOr<v1::DeleteCohortResponse> DeleteCohort(const v1::DeleteCohortRequest& request);
  absl::StatusOr<v1::IssueTeamTokenResponse> IssueTeamToken(
      const v1::IssueTeamTokenRequest& request);
  absl::StatusOr<v1::RevokeTeamTokensResponse> RevokeTeamTokens(
      const v1::RevokeTeamTokensRequest& request);
  absl::StatusOr<v1::CreatePriorityClassResponse> CreatePriorityClass(
      const v1::CreatePriorityClassRequest& request);
  absl::StatusOr<v1::DeletePriorityClassResponse> DeletePriorityClass(
      const v1::DeletePriorityClassRequest& request);
  absl::StatusOr<v1::ApplyQueuesResponse> ApplyQueues(const v1::ApplyQueuesRequest& request);

 private:
  HeadClient(std::shared_ptr<grpc::Channel> channel, HeadClientOptions options);

  // Runs `rpc(context, response)` with a fresh context and deadline
  // `timeout` per attempt, retrying UNAVAILABLE as the options say.
  template <typename Response, typename Rpc>
  absl::StatusOr<Response> Call(absl::Duration timeout, Rpc rpc);

  const HeadClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::NodeService::Stub> nodes_;
  const std::unique_ptr<v1::PlacementGroupService::Stub> placement_groups_;
  const std::unique_ptr<v1::ClusterService::Stub> cluster_;
  const std::unique_ptr<v1::TrainJobService::Stub> train_jobs_;
  const std::unique_ptr<v1::QueueService::Stub> queues_;
  const std::unique_ptr<v1::PackageService::Stub> packages_;
};

}  // namespace berth

#endif  // BERTH_WIRE_HEAD_CLIENT_H_
