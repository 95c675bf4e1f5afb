#include "raylet/head_connection.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "auth/cluster_token.h"
#include "common/backoff.h"
#include "common/log.h"
#include "grpcpp/client_context.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

constexpr absl::Duration kDefaultHeartbeatInterval = absl::Seconds(1);

// An exit report the head could not take now (it is away, restarting or
// failing over) is sent again until it does; one it refused for what it
// says is not.
bool WorthRetrying(grpc::StatusCode code) {
  return code != grpc::StatusCode::INVALID_ARGUMENT &&
         code != grpc::StatusCode::PERMISSION_DENIED && code != grpc::StatusCode::UNAUTHENTICATED;
}

std::string RandomToken() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

}  // namespace

HeadConnection::HeadConnection(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(std::move(options)),
      stub_(v1::NodeService::NewStub(std::move(channel))),
      process_token_(RandomToken()),
      // Starts at the clock, not at 1, so that a restarted raylet's
      // heartbeats are never taken for stale repeats of the previous ones.
      heartbeat_sequence_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()))) {}

HeadConnection::~HeadConnection() { Shutdown(absl::ZeroDuration()); }

void HeadConnection::Start(Callbacks callbacks) {
  callbacks_ = std::move(callbacks);
  session_ = std::thread([this] { SessionLoop(); });
  reporter_ = std::thread([this] { ReportLoop(); });
}

void HeadConnection::ReportWorkerExit(const v1::WorkerStatus& status) {
  absl::MutexLock lock(&mu_);
  if (!stopping_ || absl::Now() < flush_deadline_) exits_.push_back(status);
}

void HeadConnection::Shutdown(absl::Duration flush_timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      flush_deadline_ = absl::Now() + flush_timeout;
    }
  }
  if (session_.joinable()) session_.join();
  if (reporter_.joinable()) reporter_.join();
}

bool HeadConnection::registered() const {
  absl::MutexLock lock(&mu_);
  return registered_;
}

bool HeadConnection::SleepWhileFlushing(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = std::min(absl::Now() + d, flush_deadline_);
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](HeadConnection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                              return c->stopping_ && absl::Now() >= c->flush_deadline_;
                            },
                            this),
                        until);
  return !stopping_ || absl::Now() < flush_deadline_;
}

bool HeadConnection::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

bool HeadConnection::SleepUntilHeartbeat(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](HeadConnection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                             return c->stopping_ || c->heartbeat_now_;
                           },
                           this),
                       d);
  heartbeat_now_ = false;
  return !stopping_;
}

void HeadConnection::HeartbeatNow() {
  absl::MutexLock lock(&mu_);
  heartbeat_now_ = true;
}

void HeadConnection::SessionLoop() {
  while (true) {
    Backoff backoff({options_.initial_backoff, 2, options_.max_backoff});
    absl::Duration heartbeat_interval;
    while (!Register(&heartbeat_interval)) {
      if (!SleepUnlessStopping(backoff.Next())) return;
    }
    while (SleepUntilHeartbeat(heartbeat_interval)) {
      if (!Heartbeat()) break;
    }
    absl::MutexLock lock(&mu_);
    registered_ = false;
    if (stopping_) return;
  }
}

bool HeadConnection::Register(absl::Duration* heartbeat_interval) {
  v1::RegisterNodeRequest request = callbacks_.registration();
  // A fresh id per attempt: a refused registration must be reconsidered,
  // not answered from the head's retry cache. Registration is idempotent by
  // node id anyway.
  request.set_request_id(
      absl::StrCat(options_.node_id, "-register-", process_token_, "-", ++registration_attempt_));
  v1::RegisterNodeResponse response;
  grpc::ClientContext context;
  AttachClusterToken(&context, options_.cluster_token);
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  const grpc::Status status = stub_->RegisterNode(&context, request, &response);
  if (!status.ok() || !response.accepted()) {
    std::string failure = status.ok() ? absl::StrCat("refused: ", response.reason())
                                      : absl::StrCat("failed: ", status.error_message());
    if (failure != last_failure_) {
      LogWarning("registration with the head ", failure, " (retrying)");
      last_failure_ = std::move(failure);
    }
    return false;
  }
  last_failure_.clear();
  if (options_.fence != nullptr) options_.fence->Saw(response.head_epoch());
  *heartbeat_interval = response.heartbeat_interval_ms() > 0
                            ? absl::Milliseconds(response.heartbeat_interval_ms())
                            : kDefaultHeartbeatInterval;
  LogInfo("registered as node ", options_.node_id, " at ", request.address(), ": ",
          request.gpus_size(), " GPUs, heartbeat every ", absl::FormatDuration(*heartbeat_interval),
          ", ", response.held_bundles_size(), " held bundles");
  if (callbacks_.on_registered) callbacks_.on_registered(response);
  absl::MutexLock lock(&mu_);
  registered_ = true;
  return true;
}

bool HeadConnection::Heartbeat() {
  v1::HeartbeatRequest request;
  request.set_node_id(options_.node_id);
  // The head derives the accelerator_type:<T> resource from the node's GPUs
  // and rejects it from raylets, so it is neither registered nor reported.
  const ResourceSet free = callbacks_.available();
  ResourceSetToProto(WithoutAcceleratorTypes(free), request.mutable_available());
  request.set_running_worker_count(callbacks_.running_workers());
  request.set_sequence(++heartbeat_sequence_);
  const std::vector<v1::BundleKey> unrestored =
      callbacks_.unrestored ? callbacks_.unrestored() : std::vector<v1::BundleKey>{};
  for (const v1::BundleKey& key : unrestored) *request.add_unrestored_bundles() = key;
  if (callbacks_.health) callbacks_.health(&request);
  v1::HeartbeatResponse response;
  grpc::ClientContext context;
  AttachClusterToken(&context, options_.cluster_token);
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  const grpc::Status status = stub_->Heartbeat(&context, request, &response);
  if (!status.ok()) {
    std::string failure = absl::StrCat("heartbeat failed: ", status.error_message());
    if (failure != last_failure_) {
      LogWarning(failure, " (will keep trying)");
      last_failure_ = std::move(failure);
    }
    return true;
  }
  if (!last_failure_.empty()) {
    LogInfo("heartbeats reach the head again");
    last_failure_.clear();
  }
  if (options_.fence != nullptr) options_.fence->Saw(response.head_epoch());
  if (response.reregister_required()) {
    LogInfo("the head asks this node to register again");
    return false;
  }
  if (response.ack() && !unrestored.empty() && callbacks_.unrestored_acknowledged) {
    callbacks_.unrestored_acknowledged(unrestored);
  }
  return true;
}

void HeadConnection::ReportLoop() {
  absl::MutexLock lock(&mu_);
  auto has_work = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !exits_.empty() || stopping_; };
  while (true) {
    mu_.Await(absl::Condition(&has_work));
    if (exits_.empty() || (stopping_ && absl::Now() >= flush_deadline_)) return;
    v1::ReportWorkerExitRequest request;
    request.set_node_id(options_.node_id);
    *request.mutable_status() = exits_.front();
    mu_.Unlock();
    grpc::Status status;
    Backoff backoff({options_.initial_backoff, 2, options_.max_backoff});
    while (true) {
      v1::ReportWorkerExitResponse response;
      grpc::ClientContext context;
      AttachClusterToken(&context, options_.cluster_token);
      context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
      status = stub_->ReportWorkerExit(&context, request, &response);
      if (status.ok() || !WorthRetrying(status.error_code()) || !SleepWhileFlushing(backoff.Next()))
        break;
    }
    if (!status.ok()) {
      LogWarning("could not report the exit of worker ", request.status().worker_id(),
                 " to the head: ", status.error_message());
    }
    mu_.Lock();
    exits_.pop_front();
  }
}

}  // namespace berth
