#include "wire/raylet_clients.h"

#include "auth/cluster_token.h"
#include "auth/head_epoch.h"
#include "grpcpp/grpcpp.h"
#include "wire/proto_convert.h"

namespace berth {

v1::RayletService::Stub* RayletClients::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = v1::RayletService::NewStub(tls_.MakeChannel(address, TlsRole::kNode));
  }
  return stub.get();
}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> RayletClients::Call(const std::string& address, Method method,
                                             const Request& request, absl::Duration extra_time) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_ + extra_time));
  AttachClusterToken(&context, cluster_token_);
  AttachHeadEpoch(&context, head_epoch_.load());
  Response response;
  grpc::Status status = (Stub(address)->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::PrepareBundleResourcesResponse> RayletClients::Prepare(
    const std::string& address, const v1::PrepareBundleResourcesRequest& request) {
  return Call<v1::PrepareBundleResourcesRequest, v1::PrepareBundleResourcesResponse>(
      address, &v1::RayletService::Stub::PrepareBundleResources, request);
}

absl::Status RayletClients::Commit(const std::string& address,
                                   const v1::CommitBundleResourcesRequest& request) {
  return Call<v1::CommitBundleResourcesRequest, v1::CommitBundleResourcesResponse>(
             address, &v1::RayletService::Stub::CommitBundleResources, request)
      .status();
}

absl::Status RayletClients::Cancel(const std::string& address,
                                   const v1::CancelResourceReserveRequest& request) {
  return Call<v1::CancelResourceReserveRequest, v1::CancelResourceReserveResponse>(
             address, &v1::RayletService::Stub::CancelResourceReserve, request)
      .status();
}

absl::StatusOr<v1::ApplyBundleOpsResponse> RayletClients::ApplyBundleOps(
    const std::string& address, const v1::ApplyBundleOpsRequest& request) {
  return Call<v1::ApplyBundleOpsRequest, v1::ApplyBundleOpsResponse>(
      address, &v1::RayletService::Stub::ApplyBundleOps, request);
}

absl::StatusOr<v1::ReleaseUnusedBundlesResponse> RayletClients::ReleaseUnused(
    const std::string& address, const v1::ReleaseUnusedBundlesRequest& request) {
  return Call<v1::ReleaseUnusedBundlesRequest, v1::ReleaseUnusedBundlesResponse>(
      address, &v1::RayletService::Stub::ReleaseUnusedBundles, request);
}

absl::StatusOr<v1::StartWorkerResponse> RayletClients::StartWorker(
    const std::string& address, const v1::StartWorkerRequest& request) {
  return Call<v1::StartWorkerRequest, v1::StartWorkerResponse>(
      address, &v1::RayletService::Stub::StartWorker, request,
      request.spec().working_dir_package().empty() ? absl::ZeroDuration() : kPackageFetchTime);
}

absl::Status RayletClients::StopWorker(const std::string& address,
                                       const v1::StopWorkerRequest& request) {
  return Call<v1::StopWorkerRequest, v1::StopWorkerResponse>(
             address, &v1::RayletService::Stub::StopWorker, request)
      .status();
}

absl::StatusOr<v1::AllocatePortResponse> RayletClients::AllocatePort(const std::string& address) {
  return Call<v1::AllocatePortRequest, v1::AllocatePortResponse>(
      address, &v1::RayletService::Stub::AllocatePort, v1::AllocatePortRequest());
}

absl::StatusOr<v1::ListWorkersResponse> RayletClients::ListWorkers(
    const std::string& address, const v1::ListWorkersRequest& request) {
  return Call<v1::ListWorkersRequest, v1::ListWorkersResponse>(
      address, &v1::RayletService::Stub::ListWorkers, request);
}

absl::StatusOr<v1::ReadWorkerLogResponse> RayletClients::ReadWorkerLog(
    const std::string& address, const v1::ReadWorkerLogRequest& request) {
  return Call<v1::ReadWorkerLogRequest, v1::ReadWorkerLogResponse>(
      address, &v1::RayletService::Stub::ReadWorkerLog, request);
}

absl::StatusOr<v1::ReturnGpuResponse> RayletClients::ReturnGpu(
    const std::string& address, const v1::ReturnGpuRequest& request) {
  return Call<v1::ReturnGpuRequest, v1::ReturnGpuResponse>(
      address, &v1::RayletService::Stub::ReturnGpu, request);
}

}  // namespace berth
