#include "bench/loadgen/simulated_raylets.h"

#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "auth/cluster_token.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace berth {

// Accepts every reservation; the head is what is being measured.
class SimulatedRaylets::Service final : public v1::RayletService::Service {
 public:
  explicit Service(std::atomic<uint64_t>* calls) : calls_(calls) {}

  grpc::Status PrepareBundleResources(grpc::ServerContext*,
                                      const v1::PrepareBundleResourcesRequest*,
                                      v1::PrepareBundleResourcesResponse* response) override {
    ++*calls_;
    response->set_prepared(true);
    return grpc::Status::OK;
  }
  grpc::Status CommitBundleResources(grpc::ServerContext*, const v1::CommitBundleResourcesRequest*,
                                     v1::CommitBundleResourcesResponse*) override {
    ++*calls_;
    return grpc::Status::OK;
  }
  grpc::Status ApplyBundleOps(grpc::ServerContext*, const v1::ApplyBundleOpsRequest* request,
                              v1::ApplyBundleOpsResponse* response) override {
    ++*calls_;
    for (const v1::BundleOp& op : request->ops()) {
      v1::BundleOpResult* result = response->add_results();
      if (op.has_prepare()) result->mutable_prepare()->set_prepared(true);
    }
    return grpc::Status::OK;
  }
  grpc::Status CancelResourceReserve(grpc::ServerContext*, const v1::CancelResourceReserveRequest*,
                                     v1::CancelResourceReserveResponse*) override {
    ++*calls_;
    return grpc::Status::OK;
  }
  grpc::Status ReleaseUnusedBundles(grpc::ServerContext*, const v1::ReleaseUnusedBundlesRequest*,
                                    v1::ReleaseUnusedBundlesResponse*) override {
    ++*calls_;
    return grpc::Status::OK;
  }

 private:
  std::atomic<uint64_t>* calls_;
};

SimulatedRaylets::SimulatedRaylets() = default;
SimulatedRaylets::~SimulatedRaylets() { Stop(); }

absl::Status SimulatedRaylets::Start(const std::string& head_address, const std::string& token,
                                     int count, const SimulatedNodeShape& shape, bool heartbeats) {
  service_ = std::make_unique<Service>(&calls_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0)
    return absl::UnavailableError("simulated raylets: cannot listen");
  const std::string address = absl::StrCat("127.0.0.1:", port);
  head_ = v1::NodeService::NewStub(
      grpc::CreateChannel(head_address, grpc::InsecureChannelCredentials()));
  token_ = token;
  // Registered from a few threads: one at a time, 50k nodes take minutes.
  std::atomic<int> next{0};
  std::atomic<int> period_ms{1000};
  std::mutex mu;
  absl::Status failure;
  std::vector<std::thread> registrars;
  for (int t = 0; t < 8; ++t) {
    registrars.emplace_back([&] {
      for (int i; (i = next++) < count;) {
        v1::RegisterNodeRequest request;
        request.set_node_id(absl::StrCat("sim-", i));
        request.set_address(address);
        request.set_request_id(absl::StrCat("register-sim-", i));
        auto& total = *request.mutable_total()->mutable_amounts();
        total["CPU"] = shape.cpus;
        total["memory"] = shape.memory_bytes;
        total["GPU"] = shape.gpus;
        for (int g = 0; g < shape.gpus; ++g) {
          v1::GpuInstance* gpu = request.add_gpus();
          gpu->set_index(g);
          gpu->set_accelerator_type(shape.accelerator_type);
        }
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        AttachClusterToken(&context, token_);
        v1::RegisterNodeResponse response;
        grpc::Status s = head_->RegisterNode(&context, request, &response);
        std::lock_guard<std::mutex> lock(mu);
        if (!s.ok()) {
          failure =
              absl::UnavailableError(absl::StrCat("registering sim-", i, ": ", s.error_message()));
          return;
        }
        period_ms = static_cast<int>(response.heartbeat_interval_ms());
        node_ids_.push_back(request.node_id());
      }
    });
  }
  for (std::thread& t : registrars) t.join();
  if (!failure.ok()) return failure;
  if (heartbeats)
    heartbeats_ = std::thread([this, period = period_ms.load()] { HeartbeatLoop(period); });
  return absl::OkStatus();
}

void SimulatedRaylets::HeartbeatLoop(int period_ms) {
  uint64_t sequence = 0;
  while (!stopping_) {
    const auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(period_ms);
    ++sequence;
    for (const std::string& id : node_ids_) {
      if (stopping_) return;
      v1::HeartbeatRequest request;
      request.set_node_id(id);
      request.set_sequence(sequence);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      AttachClusterToken(&context, token_);
      v1::HeartbeatResponse response;
      head_->Heartbeat(&context, request, &response);
    }
    while (!stopping_ && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void SimulatedRaylets::Stop() {
  stopping_ = true;
  if (heartbeats_.joinable()) heartbeats_.join();
  if (server_ != nullptr)
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

}  // namespace berth
