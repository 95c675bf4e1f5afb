#include "scheduler/cluster_service.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "wire/proto_convert.h"

namespace berth {

ClusterServiceImpl::ClusterServiceImpl(HeadState* state)
    : Admitted<v1::ClusterService::Service>(HeadAdmission(*state, /*node_methods=*/false)),
      state_(state) {}

grpc::Status ClusterServiceImpl::GetClusterStatus(grpc::ServerContext* context,
                                                  const v1::GetClusterStatusRequest*,
                                                  v1::GetClusterStatusResponse* response) {
  {
    absl::MutexLock lock(&state_->mu);
    state_->groups.ClusterStatus(response);
    response->set_as_of_unix_ms(HeadNowMs());
    if (state_->autoscaler.reported_unix_ms() != 0)
      *response->mutable_autoscaler() = state_->autoscaler;
    response->set_metrics_address(state_->metrics_address);
  }
  *response->mutable_head() = state_->head();
  v1::ListTrainJobsResponse jobs;
  if (TrainJobController* controller = state_->jobs()) controller->List({}, &jobs);
  std::map<v1::TrainJobState, uint32_t> by_state;
  for (const v1::TrainJobInfo& job : jobs.jobs()) ++by_state[job.state()];
  for (const auto& [state, count] : by_state) {
    v1::TrainJobStateCount* c = response->add_train_jobs();
    c->set_state(state);
    c->set_count(count);
  }
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ReportAutoscalerStatus(
    grpc::ServerContext* context, const v1::ReportAutoscalerStatusRequest* request,
    v1::ReportAutoscalerStatusResponse*) {
  for (int i = 0; i < request->status().pools_size(); ++i) {
    if (request->status().pools(i).name().empty()) {
      return ToGrpcStatus(
          absl::InvalidArgumentError(absl::StrCat("status.pools[", i, "].name: required")));
    }
  }
  absl::MutexLock lock(&state_->mu);
  state_->autoscaler = request->status();
  state_->autoscaler.set_reported_unix_ms(HeadNowMs());
  return grpc::Status::OK;
}

}  // namespace berth
