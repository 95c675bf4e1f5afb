// SimulatedRaylets: many nodes behind one in-process RayletService, for
// loading a real berth-head with thousands of nodes on one small machine.
// The head talks to them over real gRPC (one server, one address shared by
// every simulated node); each node registers and heartbeats like a raylet.
//
// Promises: every reservation call succeeds at once (the head keeps the
// books; a simulated node has no processes and never refuses), so what is
// measured is the head and the RPCs, not a raylet. Heartbeats keep every
// node ALIVE until Stop(). Not a raylet: StartWorker is UNIMPLEMENTED.
#ifndef BERTH_BENCH_LOADGEN_SIMULATED_RAYLETS_H_
#define BERTH_BENCH_LOADGEN_SIMULATED_RAYLETS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "berth/v1/head.grpc.pb.h"
#include "berth/v1/raylet.grpc.pb.h"
#include "grpcpp/server.h"

namespace berth {

struct SimulatedNodeShape {
  int gpus = 8;
  std::string accelerator_type = "A10G";
  int cpus = 64;
  double memory_bytes = 512.0 * (1ull << 30);
};

class SimulatedRaylets {
 public:
  SimulatedRaylets();
  ~SimulatedRaylets();
  SimulatedRaylets(const SimulatedRaylets&) = delete;
  SimulatedRaylets& operator=(const SimulatedRaylets&) = delete;

  // Serves on 127.0.0.1, registers `count` nodes ("sim-0" ...) with the head
  // at `head_address` (with `token`, if not empty) and, if `heartbeats`,
  // heartbeats them (a run shorter than the head's liveness timeout may do
  // without: 50k nodes' heartbeats would be the load).
  absl::Status Start(const std::string& head_address, const std::string& token, int count,
                     const SimulatedNodeShape& shape, bool heartbeats = true);
  void Stop();

  // Reservation RPCs served so far (prepare, commit, cancel, release).
  uint64_t calls() const { return calls_.load(); }

 private:
  class Service;
  void HeartbeatLoop(int period_ms);

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::NodeService::Stub> head_;
  std::string token_;
  std::vector<std::string> node_ids_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<bool> stopping_{false};
  std::thread heartbeats_;
};

}  // namespace berth

#endif  // BERTH_BENCH_LOADGEN_SIMULATED_RAYLETS_H_
