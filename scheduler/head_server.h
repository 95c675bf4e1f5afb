// HeadServer: berth-head. Its state (head_state.h) is shared by one class
// per gRPC service (NodeService, PlacementGroupService, ClusterService,
// TrainJobService; each admits its callers in auth/admission.h before a
// handler runs), the Scheduler that owns the scheduling loop and the
// committers (scheduler.h), and the train job controller. This class only
// builds them, restores the state, and starts and stops them in order.
#ifndef BERTH_SCHEDULER_HEAD_SERVER_H_
#define BERTH_SCHEDULER_HEAD_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "berth/v1/state.pb.h"
#include "grpcpp/impl/service_type.h"
#include "prometheus/collectable.h"
#include "scheduler/cluster_service.h"
#include "scheduler/head_state.h"
#include "scheduler/node_service.h"
#include "scheduler/placement_group_service.h"
#include "scheduler/queue_service.h"
#include "scheduler/scheduler.h"
#include "scheduler/state_store.h"
#include "scheduler/train_job_service.h"
#include "train/train_job_controller.h"
#include "wire/raylet_clients.h"

namespace berth {

class HeadServer {
 public:
  // `store` keeps nodes, placement groups and train jobs across restarts;
  // nullptr = in memory only.
  explicit HeadServer(HeadConfig config, std::unique_ptr<StateStore> store = nullptr);
  ~HeadServer();  // Stop()
  HeadServer(const HeadServer&) = delete;
  HeadServer& operator=(const HeadServer&) = delete;

  // Loads what the store holds (before serving): nodes come back with a
  // fresh liveness period, placement groups with their exact reservations;
  // raylets are then told to release what the restored state does not hold.
  absl::Status Restore();
  // The services to register with the gRPC server.
  std::vector<grpc::Service*> services();
  // Starts the scheduler and the train job controller (with the jobs
  // restored). `head_address` is where raylets and trainers reach the head.
  void Start(const std::string& head_address);
  // Stops the jobs, then the loops (in-flight commits finish first).
  void Stop();

  // What /metrics serves (docs/metrics.md): the event counters and the
  // state gauges computed at scrape time. They refer to this server: stop
  // serving them before destroying it.
  std::vector<std::shared_ptr<prometheus::Collectable>> MetricsCollectables();
  // Where /metrics is served (host:port), for cluster status.
  void SetMetricsAddress(const std::string& address);

 private:
  HeadState state_;
  RayletClients raylets_;
  Scheduler scheduler_;
  NodeServiceImpl node_service_;
  PlacementGroupServiceImpl placement_group_service_;
  ClusterServiceImpl cluster_service_;
  TrainJobServiceImpl train_job_service_;
  QueueServiceImpl queue_service_;
  std::vector<v1::TrainJobRecord> restored_jobs_;  // from Restore() to Start()
  // Created by Start(); its jobs end first in Stop(), it is destroyed last.
  std::unique_ptr<TrainJobController> jobs_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEAD_SERVER_H_
