// RayletMetrics: berth-raylet's Prometheus metrics (the contract is
// docs/metrics.md): which bundle, job and rank holds each GPU instance,
// bundles by state, running workers, idle reserved GPUs, worker exits, and
// what each confined worker uses of its bundle (from its cgroups).
//
// The state gauges are rendered at scrape time from a snapshot of the
// reservations and the worker table (RayletStateFamilies, pure), so a GPU
// that changes hands never leaves a stale series; exits are counted as they
// are reaped.
#ifndef BERTH_RAYLET_RAYLET_METRICS_H_
#define BERTH_RAYLET_RAYLET_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "raylet/bundle_reservations.h"
#include "raylet/gpu_health.h"
#include "raylet/worker_processes.h"

namespace berth {

struct RayletSnapshot {
  std::string node_id;
  std::string accelerator_type;  // empty without GPUs
  uint32_t gpu_count = 0;
  std::vector<ReservedBundle> bundles;
  std::vector<WorkerRecord> workers;         // running and ended
  std::set<uint32_t> unhealthy_gpus;         // by index
  std::map<std::string, CgroupUsage> usage;  // of running workers, by worker id
};

std::vector<prometheus::MetricFamily> RayletStateFamilies(const RayletSnapshot& snapshot);

class RayletMetrics {
 public:
  explicit RayletMetrics(const std::string& node_id);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Counts an ended worker by outcome (succeeded, failed, killed).
  void OnWorkerExit(const WorkerRecord& record);
  // Counts a GPU fault the health watch saw, by kind (ignored ones too).
  void OnGpuFault(const GpuFault& fault);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* succeeded_;
  prometheus::Counter* failed_;
  prometheus::Counter* killed_;
  std::string node_id_;
  prometheus::Family<prometheus::Counter>* gpu_faults_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_RAYLET_METRICS_H_
