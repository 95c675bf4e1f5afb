// NodeServiceImpl: the raylets' side of berth-head: registration (a node
// first drops bundles the head does not know), heartbeats, drains, and
// worker exits, which it hands to the train job controller. Node RPCs
// need a berth-node certificate when the cluster speaks TLS.
#ifndef BERTH_SCHEDULER_NODE_SERVICE_H_
#define BERTH_SCHEDULER_NODE_SERVICE_H_

#include <functional>
#include <string>

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"
#include "wire/raylet_clients.h"

namespace berth {

// A node's unhealthy GPUs (HeartbeatRequest.unhealthy_gpus) are withheld
// from placement; the groups holding them move (placement_group_manager.h).
// A node drains, with the reason, when its health check fails or more than
// HeadConfig::max_unhealthy_gpus of its GPUs are unhealthy; an operator
// undrains it, and returns a GPU with MarkGpuHealthy, which asks the node
// to forget the fault first.
//
// Who may call is decided before any handler runs (auth/admission.h).
class NodeServiceImpl final : public Admitted<v1::NodeService::Service> {
 public:
  // Not owned; they outlive the service.
  NodeServiceImpl(HeadState* state, RayletClients* raylets);

  grpc::Status RegisterNode(grpc::ServerContext* context, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status DrainNode(grpc::ServerContext* context, const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override;
  grpc::Status UndrainNode(grpc::ServerContext* context, const v1::UndrainNodeRequest* request,
                           v1::UndrainNodeResponse* response) override;
  grpc::Status MarkGpuHealthy(grpc::ServerContext* context,
                              const v1::MarkGpuHealthyRequest* request,
                              v1::MarkGpuHealthyResponse* response) override;
  grpc::Status ReportWorkerExit(grpc::ServerContext* context,
                                const v1::ReportWorkerExitRequest* request,
                                v1::ReportWorkerExitResponse* response) override;
  grpc::Status ListWorkerExits(grpc::ServerContext* context,
                               const v1::ListWorkerExitsRequest* request,
                               v1::ListWorkerExitsResponse* response) override;

 private:
  // Applies `change` (a drain or its end) under the head's mutex, writes
  // node `node_id` and tells the jobs of its groups (they move, or stay).
  grpc::Status ChangeDrain(const std::string& node_id, const std::function<absl::Status()>& change);
  // A heartbeat says something new of the node's health: its unhealthy GPUs
  // are withheld (or offered again), the node drains when its health check
  // fails or too many GPUs are unhealthy, and the jobs of its groups are told.
  grpc::Status OnHealthReport(const v1::HeartbeatRequest& request);
  HeadState* const state_;
  RayletClients* const raylets_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_NODE_SERVICE_H_
