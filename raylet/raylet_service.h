// RayletService: the node agent's gRPC service (proto/berth/v1/raylet.proto),
// called by the head.
//
// A thin adapter over BundleReservations and WorkerProcessManager: it checks
// and converts wire input (INVALID_ARGUMENT naming the field), applies it,
// and answers. Mutating RPCs are idempotent by request_id: a retry returns
// the first call's answer and applies nothing twice; an id reused with
// different arguments is INVALID_ARGUMENT. Mutations are serialized, so each
// one sees and leaves a consistent node. Thread-safe.
#ifndef BERTH_RAYLET_RAYLET_SERVICE_H_
#define BERTH_RAYLET_RAYLET_SERVICE_H_

#include <chrono>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "auth/admission.h"
#include "auth/cluster_tls.h"
#include "auth/head_epoch.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/raylet.grpc.pb.h"
#include "placement/resource_set.h"
#include "raylet/bundle_reservations.h"
#include "raylet/package_cache.h"
#include "raylet/raylet_convert.h"
#include "raylet/worker_processes.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class RayletService final : public Admitted<v1::RayletService::Service> {
 public:
  struct Options {
    // Host other nodes reach this one at (AllocatePort answers with it).
    std::string advertise_host = "127.0.0.1";
    // Test hook: while this file exists, every prepare is refused.
    std::string refuse_prepare_file;
    // Test hook: while this file exists, StartWorker waits (until its
    // deadline, then UNAVAILABLE), so faults can hit a job that is STARTING.
    std::string hold_starts_file;
    // Test hook: while this file exists (30 s at most), a commit waits, then
    // applies: a head can die with a two-phase commit half done.
    std::string hold_commits_file;
    // berth's worker-side Python package (berth.train): appended to every
    // worker's PYTHONPATH, so a rank's Python needs no berth installed.
    std::string worker_pythonpath;
    // SIGTERM -> SIGKILL grace for workers of cancelled or released bundles.
    absl::Duration bundle_release_grace = absl::Seconds(2);
    // Every RPC must carry it (auth/cluster_token.h); empty = no check.
    std::string cluster_token;
    // With TLS on, every RPC needs the head's certificate (auth/cluster_tls.h).
    TlsConfig tls;
    // Refuses calls of a head older than the newest seen (not owned; null:
    // none).
    HeadEpochFence* fence = nullptr;
    // Where workers' working-directory packages come from (not owned; null:
    // a spec naming one is refused).
    PackageCache* packages = nullptr;
    // Returns an unhealthy GPU to service (NodeHealthWatch::ReturnGpu):
    // why it had been unhealthy. Null: ReturnGpu is FAILED_PRECONDITION.
    std::function<absl::StatusOr<std::string>(uint32_t gpu_index)> return_gpu;
  };

  RayletService(Options options, BundleReservations reservations, WorkerProcessManager* workers);

  grpc::Status PrepareBundleResources(grpc::ServerContext* context,
                                      const v1::PrepareBundleResourcesRequest* request,
                                      v1::PrepareBundleResourcesResponse* response) override;
  grpc::Status CommitBundleResources(grpc::ServerContext* context,
                                     const v1::CommitBundleResourcesRequest* request,
                                     v1::CommitBundleResourcesResponse* response) override;
  grpc::Status CancelResourceReserve(grpc::ServerContext* context,
                                     const v1::CancelResourceReserveRequest* request,
                                     v1::CancelResourceReserveResponse* response) override;
  grpc::Status ApplyBundleOps(grpc::ServerContext* context,
                              const v1::ApplyBundleOpsRequest* request,
                              v1::ApplyBundleOpsResponse* response) override;
  grpc::Status ReleaseUnusedBundles(grpc::ServerContext* context,
                                    const v1::ReleaseUnusedBundlesRequest* request,
                                    v1::ReleaseUnusedBundlesResponse* response) override;
  grpc::Status StartWorker(grpc::ServerContext* context, const v1::StartWorkerRequest* request,
                           v1::StartWorkerResponse* response) override;
  grpc::Status StopWorker(grpc::ServerContext* context, const v1::StopWorkerRequest* request,
                          v1::StopWorkerResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  grpc::Status AllocatePort(grpc::ServerContext* context, const v1::AllocatePortRequest* request,
                            v1::AllocatePortResponse* response) override;
  grpc::Status ReadWorkerLog(grpc::ServerContext* context, const v1::ReadWorkerLogRequest* request,
                             v1::ReadWorkerLogResponse* response) override;
  grpc::Status ReturnGpu(grpc::ServerContext* context, const v1::ReturnGpuRequest* request,
                         v1::ReturnGpuResponse* response) override;

  // Resources no bundle holds.
  ResourceSet Available() const;
  // Every reserved bundle (prepared or committed), for metrics.
  std::vector<ReservedBundle> Bundles() const;
  // Called as a registration request is built: bundles prepared from now on
  // are the head's newer decisions, which the registration's answer cannot
  // list yet. Until the answer is synced, StartWorker for a bundle this node
  // does not hold is UNAVAILABLE (it may be restored); after, NOT_FOUND.
  void BeginRegistration();
  // After (re)registration: keeps the bundles the head says this node holds,
  // restoring missing ones (committed if the head says so), and those
  // prepared since BeginRegistration(); releases all others with their
  // workers. Returns the first bundle that could not be restored, if any;
  // the others are still applied, and those it could not are Unrestored().
  absl::Status SyncHeldBundles(const google::protobuf::RepeatedPtrField<v1::HeldBundle>& held);
  // The bundles the last sync could not restore, for the head (heartbeats)
  // until it acknowledges them.
  std::vector<v1::BundleKey> Unrestored() const;
  void AcknowledgeUnrestored(const std::vector<v1::BundleKey>& keys);

 private:
  struct CachedResult {
    std::string request_fingerprint;
    grpc::Status status;
    std::string response;
  };

  // Runs `apply` once per (method, request_id) under mu_, caching its result.
  grpc::Status Idempotent(absl::string_view method, const std::string& request_id,
                          const google::protobuf::Message& request,
                          google::protobuf::Message* response,
                          const std::function<absl::Status()>& apply);
  // The reservation calls, after Admit (the RPCs and ApplyBundleOps share them).
  grpc::Status Prepare(const v1::PrepareBundleResourcesRequest* request,
                       v1::PrepareBundleResourcesResponse* response);
  grpc::Status Commit(const v1::CommitBundleResourcesRequest* request,
                      v1::CommitBundleResourcesResponse* response);
  grpc::Status Cancel(const v1::CancelResourceReserveRequest* request,
                      v1::CancelResourceReserveResponse* response);
  void StopWorkersOf(const std::vector<BundleKey>& bundles);
  // The folder of the spec's working-directory package, fetched if needed;
  // empty when it names none.
  absl::StatusOr<std::string> PackageFolder(const v1::WorkerSpec& spec,
                                            std::chrono::system_clock::time_point deadline);
  absl::Status StartWorkerLocked(const v1::WorkerSpec& spec, const std::string& package_folder,
                                 v1::StartWorkerResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  WorkerProcessManager* const workers_;
  mutable absl::Mutex mu_;
  BundleReservations reservations_ ABSL_GUARDED_BY(mu_);
  std::set<BundleKey> prepared_since_registration_ ABSL_GUARDED_BY(mu_);
  std::set<BundleKey> unrestored_ ABSL_GUARDED_BY(mu_);
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;  // BeginRegistration until SyncHeldBundles
  absl::flat_hash_map<std::string, CachedResult> results_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> result_order_ ABSL_GUARDED_BY(mu_);  // oldest first, for eviction
};

}  // namespace berth

#endif  // BERTH_RAYLET_RAYLET_SERVICE_H_
