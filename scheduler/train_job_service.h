// TrainJobServiceImpl: train jobs over the train job controller (submit,
// get, list, stop, progress reports from trainers) and their ranks' logs
// streamed from the raylets. UNAVAILABLE until the head has started the
// controller.
#ifndef BERTH_SCHEDULER_TRAIN_JOB_SERVICE_H_
#define BERTH_SCHEDULER_TRAIN_JOB_SERVICE_H_

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"
#include "scheduler/scheduler.h"
#include "wire/raylet_clients.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class TrainJobServiceImpl final : public Admitted<v1::TrainJobService::Service> {
 public:
  // Not owned; they outlive the service.
  TrainJobServiceImpl(HeadState* state, Scheduler* scheduler, RayletClients* raylets);

  grpc::Status SubmitTrainJob(grpc::ServerContext* context,
                              const v1::SubmitTrainJobRequest* request,
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

 private:
  // OK for the admin; for a team, whether the queue of job `job_id` is
  // granted to it (PERMISSION_DENIED naming job_id and the queue). An
  // unknown job is OK here: the call itself says NOT_FOUND.
  grpc::Status MayUseJob(const grpc::ServerContext* context, const std::string& job_id);
  HeadState* const state_;
  Scheduler* const scheduler_;
  RayletClients* const raylets_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_TRAIN_JOB_SERVICE_H_
