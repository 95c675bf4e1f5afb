#include "scheduler/bundle_op_batcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {

BundleOpBatcher::BundleOpBatcher(RayletClients* raylets, Executor executor,
                                 std::function<void(uint64_t)> durable, size_t max_ops_per_call)
    : raylets_(raylets),
      executor_(std::move(executor)),
      durable_(std::move(durable)),
      max_ops_per_call_(std::max<size_t>(max_ops_per_call, 1)) {}

void BundleOpBatcher::Enqueue(const std::string& address, v1::BundleOp op, Done done,
                              uint64_t durable_first) {
  {
    absl::MutexLock lock(&mu_);
    NodeQueue& queue = queues_[address];
    queue.ops.push_back({std::move(op), std::move(done), durable_first});
    if (queue.in_flight) return;  // the call in flight sends it next
    queue.in_flight = true;
  }
  executor_([this, address] { Drain(address); });
}

void BundleOpBatcher::Drain(const std::string& address) {
  while (true) {
    std::vector<Pending> batch;
    {
      absl::MutexLock lock(&mu_);
      auto it = queues_.find(address);
      std::vector<Pending>& ops = it->second.ops;
      if (ops.empty()) {
        queues_.erase(it);
        return;
      }
      if (ops.size() <= max_ops_per_call_) {
        batch.swap(ops);
      } else {
        batch.assign(std::make_move_iterator(ops.begin()),
                     std::make_move_iterator(ops.begin() + max_ops_per_call_));
        ops.erase(ops.begin(), ops.begin() + max_ops_per_call_);
      }
    }
    v1::ApplyBundleOpsRequest request;
    request.mutable_ops()->Reserve(static_cast<int>(batch.size()));
    uint64_t durable_first = 0;
    for (Pending& p : batch) {
      *request.add_ops() = std::move(p.op);
      durable_first = std::max(durable_first, p.durable_first);
    }
    if (durable_first != 0 && durable_) durable_(durable_first);
    absl::StatusOr<v1::ApplyBundleOpsResponse> response =
        raylets_->ApplyBundleOps(address, request);
    if (!response.ok()) response = raylets_->ApplyBundleOps(address, request);
    if (response.ok() && response->results_size() != request.ops_size()) {
      response = absl::InternalError(absl::StrCat("raylet ", address, " answered ",
                                                  response->results_size(), " results for ",
                                                  request.ops_size(), " ops"));
    }
    uint64_t ticket = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].done) continue;
      Result result;
      if (!response.ok()) {
        result.status = response.status();
      } else {
        v1::BundleOpResult& r = *response->mutable_results(static_cast<int>(i));
        result.status = absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
        result.prepare = std::move(*r.mutable_prepare());
      }
      ticket = std::max(ticket, batch[i].done(result));
    }
    if (ticket != 0 && durable_) durable_(ticket);
  }
}

}  // namespace berth
