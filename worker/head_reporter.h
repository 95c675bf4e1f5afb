// HeadReporter: the trainer's one line to the head. Sends
// ReportTrainProgress (2 s deadline, waiting for a restarting head within
// it, the cluster token from BERTH_CLUSTER_TOKEN, TLS from BERTH_TLS_CA_PEM)
// and reconnects within a second of a restarted head (gRPC's default
// backoff grows to two minutes, and the reports of a job would stop
// meanwhile). Failures are logged once per distinct error and never stop
// the job. Torch-free.
#ifndef BERTH_WORKER_HEAD_REPORTER_H_
#define BERTH_WORKER_HEAD_REPORTER_H_

#include <memory>
#include <string>

#include "berth/v1/head.grpc.pb.h"

namespace berth {

class HeadReporter {
 public:
  HeadReporter(const std::string& head, std::string job_id);
  // Sends `request` with the job id filled in.
  void Report(v1::ReportTrainProgressRequest request);

 private:
  std::unique_ptr<v1::TrainJobService::Stub> stub_;
  std::string job_id_;
  std::string last_error_;
};

}  // namespace berth

#endif  // BERTH_WORKER_HEAD_REPORTER_H_
