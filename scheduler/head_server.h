// HeadServer: berth-head. Its state (head_state.h) is shared by one class
// per gRPC service (NodeService, PlacementGroupService, ClusterService,
// TrainJobService, QueueService, PackageService; each admits its callers in auth/admission.h before
// a handler runs), the Scheduler that owns the scheduling loop and the committers (scheduler.h),
// and the train job controller. This class only builds them, restores the state, and starts and
// stops them in order.
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
#include "scheduler/package_service.h"
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

  // Until Start(), every call is answered UNAVAILABLE with `why` (a head
  // restoring its state, or a standby naming the active head).
  void StandBy(std::string why) { state_.StandBy(std::move(why)); }
  // Loads what the store holds (the caller holds the store: StateStore::
  // Claim): nodes come back with a fresh liveness period, placement groups
  // with their exact reservations; raylets are then told to release what
  // the restored state does not hold. Writes the head's epoch, one past
  // the last active head's.
  absl::Status Restore();
  // The services to register with the gRPC server.
  std::vector<grpc::Service*> services();
  // Starts the scheduler and the train job controller (with the jobs
  // restored) and serves calls. `address` is where raylets and clients
  // reach this head; `heads` every head of the cluster (this one, then its
  // standbys), which trainers get to follow the active one; empty = only
  // this one.
  void Start(const std::string& address, const std::string& heads = "");
  // Stops serving: the train jobs keep running (as written in the store, for
  // the next active head), then the loops stop (in-flight commits finish
  // first).
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
  PackageServiceImpl package_service_;
  std::vector<v1::TrainJobRecord> restored_jobs_;  // from Restore() to Start()
  uint64_t epoch_ = 0;                             // written by Restore()
  // Created by Start(); its jobs end first in Stop(), it is destroyed last.
  std::unique_ptr<TrainJobController> jobs_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEAD_SERVER_H_
