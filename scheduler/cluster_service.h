// ClusterServiceImpl: the cluster's status (resources, groups by state,
// train jobs by state, the autoscaler's last report, where /metrics is) and
// the autoscaler's reports.
#ifndef BERTH_SCHEDULER_CLUSTER_SERVICE_H_
#define BERTH_SCHEDULER_CLUSTER_SERVICE_H_

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class ClusterServiceImpl final : public Admitted<v1::ClusterService::Service> {
 public:
  // Not owned; they outlive the service.
  explicit ClusterServiceImpl(HeadState* state);

  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest* request,
                                v1::GetClusterStatusResponse* response) override;
  grpc::Status ReportAutoscalerStatus(grpc::ServerContext* context,
                                      const v1::ReportAutoscalerStatusRequest* request,
                                      v1::ReportAutoscalerStatusResponse* response) override;

 private:
  HeadState* const state_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_CLUSTER_SERVICE_H_
