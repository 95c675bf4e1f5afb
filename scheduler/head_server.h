// HeadServer: berth-head's gRPC services (NodeService, PlacementGroupService,
// ClusterService) around the pure state machines, plus the two loops that
// drive them.
//
// One mutex guards the node table, NodeManager and PlacementGroupManager;
// RPC handlers take it briefly and never call out while holding it. The
// scheduling loop places due groups and starts their two-phase commits
// (two_phase_commit.h), whose raylet calls go through a per-node batcher
// (bundle_op_batcher.h) run by a pool of committer threads, so many groups
// are in flight at once; it also declares nodes DEAD when their heartbeats
// stop.
#ifndef BERTH_SCHEDULER_HEAD_SERVER_H_
#define BERTH_SCHEDULER_HEAD_SERVER_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "berth/v1/head.grpc.pb.h"
#include "prometheus/collectable.h"
#include "scheduler/bundle_op_batcher.h"
#include "auth/admission.h"
#include "scheduler/head_metrics.h"
#include "scheduler/node_manager.h"
#include "scheduler/placement_group_manager.h"
#include "scheduler/state_store.h"
#include "scheduler/state_writer.h"
#include "scheduler/two_phase_commit.h"
#include "wire/raylet_clients.h"
#include "train/train_job_controller.h"

namespace berth {

struct HeadConfig {
  LivenessConfig liveness;
  TrainControllerConfig train;
  SchedulerConfig scheduler;
  absl::Duration raylet_rpc_timeout = absl::Seconds(2);
  int committer_threads = 8;
  size_t max_worker_exits_kept = 10000;
  int max_message_bytes = 4 << 20;  // largest request accepted (--max-message-bytes)
  // Every RPC must carry it (auth/cluster_token.h); empty = no check.
  // Also used on the head's calls to raylets.
  std::string cluster_token;
  // TLS (auth/cluster_tls.h): the head's certificate, on its endpoint and
  // its calls to raylets; node RPCs then need a berth-node certificate.
  TlsConfig tls;
};

// Who may call is decided before any handler runs (auth/admission.h).
class HeadServer final : public Admitted<v1::NodeService::Service>,
                         public Admitted<v1::PlacementGroupService::Service>,
                         public Admitted<v1::ClusterService::Service>,
                         public Admitted<v1::TrainJobService::Service>,
                         public PlacementGroupHost {
 public:
  // `store` keeps nodes and placement groups across restarts; nullptr = in
  // memory only.
  explicit HeadServer(HeadConfig config, std::unique_ptr<StateStore> store = nullptr);
  ~HeadServer() override;
  HeadServer(const HeadServer&) = delete;
  HeadServer& operator=(const HeadServer&) = delete;

  // Loads what the store holds (before serving): nodes come back with a
  // fresh liveness period, placement groups with their exact reservations;
  // raylets are then told to release what the restored state does not hold.
  absl::Status Restore();

  // Starts the scheduling loop, the committer threads and the train job
  // controller. `head_address` is where raylets and trainers reach the head.
  void Start(const std::string& head_address);
  // Stops running jobs, then the loops; in-flight commits finish first.
  void Stop();

  // NodeService
  grpc::Status RegisterNode(grpc::ServerContext* context, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status DrainNode(grpc::ServerContext* context, const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override;
  grpc::Status ReportWorkerExit(grpc::ServerContext* context,
                                const v1::ReportWorkerExitRequest* request,
                                v1::ReportWorkerExitResponse* response) override;
  grpc::Status ListWorkerExits(grpc::ServerContext* context,
                               const v1::ListWorkerExitsRequest* request,
                               v1::ListWorkerExitsResponse* response) override;

  // PlacementGroupService
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

  // ClusterService
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest* request,
                                v1::GetClusterStatusResponse* response) override;
  grpc::Status ReportAutoscalerStatus(grpc::ServerContext* context,
                                      const v1::ReportAutoscalerStatusRequest* request,
                                      v1::ReportAutoscalerStatusResponse* response) override;

  // What /metrics serves (docs/metrics.md): the event counters and the
  // state gauges computed at scrape time. They refer to this server: stop
  // serving them before destroying it.
  std::vector<std::shared_ptr<prometheus::Collectable>> MetricsCollectables();
  // Where /metrics is served (host:port), for cluster status.
  void SetMetricsAddress(const std::string& address);

  // TrainJobService
  grpc::Status SubmitTrainJob(grpc::ServerContext* context, const v1::SubmitTrainJobRequest* request,
                              v1::SubmitTrainJobResponse* response) override;
  grpc::Status GetTrainJob(grpc::ServerContext* context, const v1::GetTrainJobRequest* request,
                           v1::GetTrainJobResponse* response) override;
  grpc::Status ListTrainJobs(grpc::ServerContext* context, const v1::ListTrainJobsRequest* request,
                             v1::ListTrainJobsResponse* response) override;
  grpc::Status StopTrainJob(grpc::ServerContext* context, const v1::StopTrainJobRequest* request,
                            v1::StopTrainJobResponse* response) override;
  grpc::Status StreamTrainJobLogs(grpc::ServerContext* context,
                                  const v1::StreamTrainJobLogsRequest* request,
                                  grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status ReportTrainProgress(grpc::ServerContext* context,
                                   const v1::ReportTrainProgressRequest* request,
                                   v1::ReportTrainProgressResponse* response) override;

  // PlacementGroupHost, for the train job controller.
  absl::StatusOr<std::string> CreateGroup(PlacementGroupSpec spec,
                                          const v1::CreatePlacementGroupRequest& meta) override;
  absl::StatusOr<v1::PlacementGroupInfo> GetGroup(const std::string& id) override;
  void RemoveGroup(const std::string& id) override;
  std::string RayletAddress(const std::string& node_id) override;

 private:
  void SchedulingLoop();
  void CommitterLoop();
  // Queues raylet work for the committer threads.
  void Submit(std::function<void()> work);
  // Releases through the batcher (one call per node for many groups).
  void SubmitCancels(std::vector<CancelTask> cancels);
  // Sends a group's two-phase commit through the batcher; the answers
  // advance it (AfterPrepares, then FinishCommit or FailCommit). Each
  // returns the state sequence the batcher makes durable for its call.
  void StartCommit(CommitTask task);
  uint64_t AfterPrepares(const std::shared_ptr<TwoPhaseCommit>& commit) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels every node of a failed commit, then finishes it.
  uint64_t FailCommit(const TwoPhaseCommit& commit, bool prepared) ABSL_LOCKS_EXCLUDED(mu_);
  // The end of a commit in the group's books; releases what a group removed
  // meanwhile held.
  uint64_t FinishCommit(const CommitTask& task, const absl::Status& result, bool prepared)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string NewPlacementGroupId();
  // NOT_FOUND naming the first id (placement_group_ids[i]) no group has.
  grpc::Status AllKnownLocked(const google::protobuf::RepeatedPtrField<std::string>& ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stage changed records for the store; return the sequence number to
  // pass to Durable() once mu_ is released. A change is acknowledged (or
  // shown) only after it is durable.
  uint64_t PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t PersistNodeLocked(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (without mu_) until `seq` is durable; logs a failure.
  absl::Status Durable(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr char kNodesTable[] = "nodes";
  static constexpr char kGroupsTable[] = "groups";
  static constexpr char kJobsTable[] = "jobs";

  const HeadConfig config_;
  RayletClients raylets_;
  BundleOpBatcher batcher_;
  HeadMetrics metrics_;  // before groups_, which reports to it
  // Read by Restore() alone; written through writer_ (group commit) by the
  // head's threads and the job controller.
  std::unique_ptr<StateStore> store_;
  StateWriter writer_;
  std::vector<v1::TrainJobRecord> restored_jobs_;  // from Restore() to Start()

  absl::Mutex mu_;
  NodeResourceTable table_ ABSL_GUARDED_BY(mu_);
  NodeManager nodes_ ABSL_GUARDED_BY(mu_);
  PlacementGroupManager groups_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ReportWorkerExitRequest> worker_exits_ ABSL_GUARDED_BY(mu_);
  bool kick_ ABSL_GUARDED_BY(mu_) = false;  // wake the scheduling loop
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  v1::AutoscalerStatus autoscaler_ ABSL_GUARDED_BY(mu_);
  std::string metrics_address_ ABSL_GUARDED_BY(mu_);

  absl::Mutex work_mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(work_mu_);
  bool work_stopping_ ABSL_GUARDED_BY(work_mu_) = false;

  std::thread scheduling_thread_;
  std::vector<std::thread> committer_threads_;
  // Created by Start(), destroyed first by Stop(): its jobs use the rest.
  std::unique_ptr<TrainJobController> jobs_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEAD_SERVER_H_
