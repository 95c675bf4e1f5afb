// RayletClients: the head's gRPC stubs to the raylets (placement and the
// train job controller), one channel per
// address, created on first use. Every call carries a deadline.
#ifndef BERTH_WIRE_RAYLET_CLIENTS_H_
#define BERTH_WIRE_RAYLET_CLIENTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "auth/cluster_tls.h"
#include "berth/v1/raylet.grpc.pb.h"

namespace berth {

class RayletClients {
 public:
  // Calls carry `cluster_token` (auth/cluster_token.h) when not empty,
  // over TLS with the head's certificate when `tls` is on.
  explicit RayletClients(absl::Duration timeout, std::string cluster_token = "", TlsConfig tls = {})
      : timeout_(timeout), cluster_token_(std::move(cluster_token)), tls_(std::move(tls)) {}

  absl::StatusOr<v1::PrepareBundleResourcesResponse> Prepare(
      const std::string& address, const v1::PrepareBundleResourcesRequest& request);
  absl::Status Commit(const std::string& address, const v1::CommitBundleResourcesRequest& request);
  absl::Status Cancel(const std::string& address, const v1::CancelResourceReserveRequest& request);
  absl::StatusOr<v1::ApplyBundleOpsResponse> ApplyBundleOps(
      const std::string& address, const v1::ApplyBundleOpsRequest& request);
  absl::StatusOr<v1::ReleaseUnusedBundlesResponse> ReleaseUnused(
      const std::string& address, const v1::ReleaseUnusedBundlesRequest& request);
  // A start that names a working-directory package gets kPackageFetchTime
  // more than the other calls: the node's raylet may download and unpack it
  // first (once per node).
  static constexpr absl::Duration kPackageFetchTime = absl::Seconds(60);
  absl::StatusOr<v1::StartWorkerResponse> StartWorker(const std::string& address,
                                                      const v1::StartWorkerRequest& request);
  absl::Status StopWorker(const std::string& address, const v1::StopWorkerRequest& request);
  absl::StatusOr<v1::AllocatePortResponse> AllocatePort(const std::string& address);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const std::string& address,
                                                      const v1::ListWorkersRequest& request);
  absl::StatusOr<v1::ReadWorkerLogResponse> ReadWorkerLog(const std::string& address,
                                                          const v1::ReadWorkerLogRequest& request);
  absl::StatusOr<v1::ReturnGpuResponse> ReturnGpu(const std::string& address,
                                                  const v1::ReturnGpuRequest& request);
  // Every call from now on carries the head's epoch (auth/head_epoch.h).
  void set_head_epoch(uint64_t epoch) { head_epoch_.store(epoch); }

 private:
  v1::RayletService::Stub* Stub(const std::string& address);
  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Call(const std::string& address, Method method, const Request& request,
                                absl::Duration extra_time = absl::ZeroDuration());

  const absl::Duration timeout_;
  const std::string cluster_token_;
  const TlsConfig tls_;
  std::atomic<uint64_t> head_epoch_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::RayletService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_WIRE_RAYLET_CLIENTS_H_
