#include "worker/head_reporter.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "auth/cluster_tls.h"
#include "grpcpp/create_channel.h"

namespace berth {
namespace {

constexpr absl::Duration kHeadDeadline = absl::Seconds(2);
constexpr absl::Duration kRetryEvery = absl::Seconds(1);

std::shared_ptr<grpc::Channel> HeadChannel(const std::string& head) {
  TlsConfig tls;
  if (const char* ca = std::getenv("BERTH_TLS_CA_PEM"); ca != nullptr && *ca != '\0') {
    tls.enabled = true;
    tls.ca_pem = ca;
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return tls.MakeChannel(head, TlsRole::kHead, args);
}

}  // namespace

HeadReporter::HeadReporter(const std::string& head, std::string job_id)
    : stub_(v1::TrainJobService::NewStub(HeadChannel(head))), job_id_(std::move(job_id)) {}

void HeadReporter::Report(v1::ReportTrainProgressRequest request) {
  request.set_job_id(job_id_);
  kept_.reset();
  if (!Send(request)) kept_ = std::move(request);
}

bool HeadReporter::Retry() {
  if (!kept_.has_value()) return true;
  if (absl::Now() - last_try_ < kRetryEvery) return false;
  if (Send(*kept_)) kept_.reset();
  return !kept_.has_value();
}

bool HeadReporter::Flush(absl::Duration limit, const volatile std::sig_atomic_t& stop) {
  const absl::Time deadline = absl::Now() + limit;
  while (!Retry() && stop == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  return !kept_.has_value();
}

bool HeadReporter::Send(const v1::ReportTrainProgressRequest& request) {
  last_try_ = absl::Now();
  v1::ReportTrainProgressResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kHeadDeadline));
  context.set_wait_for_ready(true);  // ride out a head restart within the deadline
  // The head gives the trainer the cluster token when the cluster has one.
  if (const char* token = std::getenv("BERTH_CLUSTER_TOKEN"); token != nullptr && *token != '\0') {
    context.AddMetadata("authorization", std::string("Bearer ") + token);
  }
  const grpc::Status status = stub_->ReportTrainProgress(&context, request, &response);
  const std::string error =
      status.ok() ? "" : absl::StrCat("code ", status.error_code(), ": ", status.error_message());
  if (error != last_error_) {
    const std::string line = absl::StrCat(
        "berth-worker trainer: ",
        error.empty() ? "reporting to the head again"
                      : "reporting to the head failed (kept, sent again): " + error,
        "\n");
    std::fputs(line.c_str(), stderr);
    last_error_ = error;
  }
  // A report the head refuses for what it says would be refused again.
  return status.ok() || status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
         status.error_code() == grpc::StatusCode::NOT_FOUND;
}

}  // namespace berth
