// NodeHealthWatch: the raylet's watch over its node's health.
//
// Every `every` it takes the GPU faults an external checker appended to the
// health file (health_file.h) and those a fault source reports (NVML's:
// nvml_health.h), books them (gpu_health.h: the XID policy) and keeps the
// book in the state file, so that a GPU stays unhealthy across the
// raylet's restarts (and a line of the health file counts once) until an
// operator returns it (ReturnGpu). Every `health_check_every`, and once
// at start, it runs the node's health check command (Slurm's
// HealthCheckProgram, e.g. NHC or `dcgmi diag`) under /bin/sh: a non-zero
// exit, or no answer within the timeout, makes the node unhealthy with its
// output as the reason, until a run passes. The head hears both through
// the heartbeats. Thread-safe; its threads stop when it is destroyed.
#ifndef BERTH_RAYLET_NODE_HEALTH_WATCH_H_
#define BERTH_RAYLET_NODE_HEALTH_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/v1/common.pb.h"
#include "berth/v1/raylet.pb.h"
#include "common/periodic_thread.h"
#include "raylet/gpu_health.h"
#include "raylet/health_file.h"

namespace berth {

class NodeHealthWatch {
 public:
  struct Options {
    uint32_t gpu_count = 0;
    std::string health_file;  // "" = none
    std::string state_file;   // where the book is kept; "" = nowhere
    absl::Duration every = absl::Seconds(1);
    // Faults found since the last call (NVML's); null = none.
    std::function<std::vector<GpuFault>()> fault_source;
    std::string health_check_command;  // "" = none
    absl::Duration health_check_every = absl::Seconds(60);
    absl::Duration health_check_timeout = absl::Seconds(60);
    // Told of every fault seen, ignored ones included (the metrics); may be null.
    std::function<void(const GpuFault&)> on_fault;
    // Told when the unhealthy GPUs or the health check's verdict changed
    // (the raylet heartbeats at once), on the watch's threads; may be null.
    std::function<void()> on_change;
  };

  // Reads the state file (a missing one is an empty book) and starts the
  // threads. INVALID_ARGUMENT naming the file if it cannot be read.
  static absl::StatusOr<std::unique_ptr<NodeHealthWatch>> Start(Options options);
  NodeHealthWatch(const NodeHealthWatch&) = delete;
  NodeHealthWatch& operator=(const NodeHealthWatch&) = delete;

  // One look at the health file and the fault source (the thread's, and tests').
  void LookOnce();
  // One run of the health check command.
  void CheckOnce();

  // The unhealthy GPUs, by index.
  std::vector<v1::UnhealthyGpu> UnhealthyGpus() const;
  // The health check's failure (its output); "" while it passes.
  std::string HealthCheckFailure() const;
  // An operator returned the GPU: why it had been unhealthy (GpuHealthBook::Return).
  absl::StatusOr<std::string> ReturnGpu(uint32_t gpu_index);

 private:
  NodeHealthWatch(Options options, const v1::GpuHealthState& kept);
  // Writes the book and the health file's offset to the state file.
  void KeepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  HealthFile file_ ABSL_GUARDED_BY(mu_);
  GpuHealthBook book_ ABSL_GUARDED_BY(mu_);
  std::string health_check_failure_ ABSL_GUARDED_BY(mu_);
  // Last: they stop first.
  std::unique_ptr<PeriodicThread> look_thread_;
  std::unique_ptr<PeriodicThread> check_thread_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_NODE_HEALTH_WATCH_H_
