// HeadReporter: the trainer's one line to the head. Sends
// ReportTrainProgress (2 s deadline, waiting for a restarting head within
// it, the cluster token from BERTH_CLUSTER_TOKEN, TLS from BERTH_TLS_CA_PEM)
// and reconnects within a second of a restarted head (gRPC's default
// backoff grows to two minutes, and the reports of a job would stop
// meanwhile). Failures are logged once per distinct error and never stop
// the job. A report the head did not take is kept and sent again (each
// report says all there is: the latest step, loss, checkpoint and metrics,
// so the newest replaces a kept one), and the trainer flushes it before it
// exits: a job that ends while its head is away still shows its last step
// and checkpoint once a head answers. Torch-free.
#ifndef BERTH_WORKER_HEAD_REPORTER_H_
#define BERTH_WORKER_HEAD_REPORTER_H_

#include <csignal>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"

#include "berth/v1/head.grpc.pb.h"

namespace berth {

class HeadReporter {
 public:
  HeadReporter(const std::string& head, std::string job_id);
  // Sends `request` with the job id filled in; keeps it if the head does
  // not take it.
  void Report(v1::ReportTrainProgressRequest request);
  // Sends the kept report again, at most once a second. True when no
  // report is kept.
  bool Retry();
  // Retries until the head takes the kept report, `stop` is set or `limit`
  // passes; true when no report is left.
  bool Flush(absl::Duration limit, const volatile std::sig_atomic_t& stop);

 private:
  bool Send(const v1::ReportTrainProgressRequest& request);

  std::unique_ptr<v1::TrainJobService::Stub> stub_;
  std::string job_id_;
  std::string last_error_;
  std::optional<v1::ReportTrainProgressRequest> kept_;
  absl::Time last_try_ = absl::InfinitePast();
};

}  // namespace berth

#endif  // BERTH_WORKER_HEAD_REPORTER_H_
