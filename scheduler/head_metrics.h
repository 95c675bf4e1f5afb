// HeadMetrics: berth-head's Prometheus metrics (the contract is
// docs/metrics.md).
//
// State gauges (nodes, resources, groups, pending demand, jobs, autoscaler)
// are rendered at scrape time by HeadStateFamilies, a pure function of the
// same snapshots `berth status` and `berth nodes` read, so the two always
// agree. Event counters and latency histograms live in a prometheus-cpp
// registry fed by the PlacementObserver hooks and the head's loops.
#ifndef BERTH_SCHEDULER_HEAD_METRICS_H_
#define BERTH_SCHEDULER_HEAD_METRICS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "berth/v1/head.pb.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "scheduler/placement_group_manager.h"

namespace berth {

// What the head's state gauges are computed from.
struct HeadSnapshot {
  v1::GetClusterStatusResponse status;
  v1::ListNodesResponse nodes;
  int64_t now_ms = 0;
};

// The state gauges of docs/metrics.md, from one snapshot.
std::vector<prometheus::MetricFamily> HeadStateFamilies(const HeadSnapshot& snapshot);

// The accelerator model a pending bundle asks for (its accelerator_type:
// resource or a single-valued selector on berth.io/accelerator-type), or
// "any".
std::string BundleAcceleratorType(const v1::Bundle& bundle);
// A bundle's resources as "CPU: 8, GPU: 1, memory: 32Gi" (without the
// internal accelerator_type: entry).
std::string BundleShape(const v1::Bundle& bundle);

class HeadMetrics final : public PlacementObserver {
 public:
  HeadMetrics();

  // The counters and histograms, to register with a MetricsServer.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // PlacementObserver; called under the head's lock by the scheduling loop.
  void BeforeDecision() override;
  void AfterDecision(const PlacementDecision& decision) override;
  void OnCreated(int64_t latency_ms) override;
  void OnAdmitted(const std::string& queue, int64_t waited_ms) override;
  void OnPreempted(const std::string& queue) override;

  // A two-phase commit failed; `prepared` tells whether every prepare had
  // succeeded (so the commit phase failed).
  void OnCommitFailed(bool prepared);
  void OnNodeDead();
  // The head did not run for `stall_ms` (node_liveness.h).
  void OnHeadStall(int64_t stall_ms);
  void OnJobRestart();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* placement_latency_;
  prometheus::Histogram* decision_latency_;
  prometheus::Counter* prepare_failures_;
  prometheus::Counter* commit_failures_;
  // By filter name (NodeFilters()); names outlive the map (static).
  std::map<absl::string_view, prometheus::Counter*> node_rejections_;
  prometheus::Counter* node_deaths_;
  prometheus::Counter* head_stall_seconds_;
  prometheus::Counter* job_restarts_;
  // By queue; a queue's series appear with its first event (`default`'s at once).
  prometheus::Family<prometheus::Counter>* admitted_;
  prometheus::Family<prometheus::Counter>* preempted_;
  prometheus::Family<prometheus::Histogram>* queue_wait_;
  std::chrono::steady_clock::time_point decision_start_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEAD_METRICS_H_
