#include "scheduler/head_metrics.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/metrics_server.h"
#include "placement/resource_set.h"
#include "queueing/queue_config.h"

namespace berth {
namespace {

constexpr char kNone[] = "none";

// Latency buckets, seconds: 100 us .. 60 s.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *buckets;
}

// Queue wait buckets, seconds: 100 ms .. a day.
const prometheus::Histogram::BucketBoundaries& WaitBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400};
  return *buckets;
}

// Decision buckets, seconds: 1 us .. 100 ms.
const prometheus::Histogram::BucketBoundaries& DecisionBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001,
      0.00025,  0.0005,    0.001,    0.0025,  0.005,    0.01,    0.1};
  return *buckets;
}

std::string StateName(const std::string& enum_name, absl::string_view prefix) {
  return std::string(absl::StripPrefix(enum_name, prefix));
}

double Amount(const v1::ResourceSet& set, absl::string_view name) {
  auto it = set.amounts().find(std::string(name));
  return it == set.amounts().end() ? 0 : it->second;
}

// resource -> (total, allocated) for one accelerator type.
using ResourceUse = std::map<std::string, std::pair<double, double>>;

void AddUse(const v1::ResourceSet& total, const v1::ResourceSet& available, double sign,
            ResourceUse* use) {
  for (const auto& [name, amount] : total.amounts()) {
    if (PinnedAcceleratorType(name)) continue;
    auto& [t, a] = (*use)[name];
    t += sign * amount;
    a += sign * (amount - Amount(available, name));
  }
}

// One series per state of the enum (zero when absent from `counts`), named
// without the enum's prefix; UNSPECIFIED is left out.
template <typename StateCount>
prometheus::MetricFamily StateCounts(std::string name, std::string help,
                                     const google::protobuf::RepeatedPtrField<StateCount>& counts,
                                     const google::protobuf::EnumDescriptor* states,
                                     absl::string_view prefix) {
  std::map<int, uint32_t> by_state;
  for (int i = 0; i < states->value_count(); ++i) {
    if (states->value(i)->number() != 0) by_state[states->value(i)->number()] = 0;
  }
  for (const StateCount& c : counts) by_state[c.state()] = c.count();
  GaugeFamily family(std::move(name), std::move(help));
  for (const auto& [state, count] : by_state) {
    family.Add({{"state", StateName(states->FindValueByNumber(state)->name(), prefix)}}, count);
  }
  return family.Take();
}

using Families = std::vector<prometheus::MetricFamily>;

// berth_nodes, by state.
void AddNodeCounts(const v1::GetClusterStatusResponse& status, Families* out) {
  GaugeFamily nodes("berth_nodes", "Nodes the head knows, by state.");
  nodes.Add({{"state", "ALIVE"}}, status.alive_nodes())
      .Add({{"state", "DRAINING"}}, status.draining_nodes())
      .Add({{"state", "DEAD"}}, status.dead_nodes());
  out->push_back(nodes.Take());
}

// The cluster's capacity and allocation per accelerator type; nodes without
// GPUs are what the per-type sums leave of the cluster's totals.
void AddResourceUse(const v1::GetClusterStatusResponse& status, Families* out) {
  std::map<std::string, ResourceUse> use;
  AddUse(status.total(), status.available(), 1, &use[kNone]);
  for (const v1::AcceleratorTypeCount& a : status.accelerators()) {
    AddUse(a.total(), a.available(), 1, &use[a.accelerator_type()]);
    AddUse(a.total(), a.available(), -1, &use[kNone]);
  }
  GaugeFamily total("berth_resource_capacity",
                    "Summed totals of ALIVE nodes (GPU in GPUs, CPU in cores, memory in bytes).");
  GaugeFamily allocated("berth_resource_allocated",
                        "Part of berth_resource_capacity reserved by placement group bundles.");
  for (const auto& [type, resources] : use) {
    for (const auto& [name, ta] : resources) {
      // The "none" remainder of a resource only GPU nodes have is 0: skip.
      if (type == kNone && ta.first < 1e-9 && status.accelerators_size() > 0) continue;
      total.Add({{"resource", name}, {"accelerator_type", type}}, ta.first);
      allocated.Add({{"resource", name}, {"accelerator_type", type}}, ta.second);
    }
  }
  out->push_back(total.Take());
  out->push_back(allocated.Take());
}

// The GPUs of each ALIVE or DRAINING node, and how many are reserved.
void AddNodeGpus(const v1::ListNodesResponse& nodes, Families* out) {
  GaugeFamily node_gpus("berth_node_gpus", "GPU instances of each ALIVE or DRAINING node.");
  GaugeFamily node_gpus_allocated(
      "berth_node_gpus_allocated",
      "GPUs of the node reserved by bundles (fractional shares summed).");
  for (const v1::NodeInfo& node : nodes.nodes()) {
    if (node.state() != v1::NODE_STATE_ALIVE && node.state() != v1::NODE_STATE_DRAINING) continue;
    if (node.gpus_size() == 0) continue;
    auto type = node.labels().find(std::string(kAcceleratorTypeLabel));
    const MetricLabels labels = {
        {"node", node.node_id()},
        {"accelerator_type", type == node.labels().end() ? kNone : type->second}};
    node_gpus.Add(labels, node.gpus_size());
    node_gpus_allocated.Add(labels, Amount(node.total(), kGpu) - Amount(node.available(), kGpu));
  }
  out->push_back(node_gpus.Take());
  out->push_back(node_gpus_allocated.Take());
}

// Unplaced bundles and their GPUs by (accelerator type, shape, strategy).
using DemandKey = std::tuple<std::string, std::string, std::string>;
using DemandByShape = std::map<DemandKey, std::pair<double, double>>;  // bundles, GPUs

// The strategy label of a pending gang: PACK when it names none.
std::string StrategyName(v1::PlacementStrategy strategy) {
  return StateName(v1::PlacementStrategy_Name(strategy == v1::PLACEMENT_STRATEGY_UNSPECIFIED
                                                  ? v1::PLACEMENT_STRATEGY_PACK
                                                  : strategy),
                   "PLACEMENT_STRATEGY_");
}

DemandByShape PendingDemandByShape(const v1::GetClusterStatusResponse& status) {
  DemandByShape demand;
  for (const v1::PendingDemand& d : status.pending_demand()) {
    const std::string strategy = StrategyName(d.strategy());
    for (const v1::Bundle& b : d.shape()) {
      auto& [bundles, gpus] = demand[{BundleAcceleratorType(b), BundleShape(b), strategy}];
      bundles += d.count();
      gpus += d.count() * Amount(b.resources(), kGpu);
    }
  }
  return demand;
}

// Groups by state, the infeasible ones, the pending demand per bundle shape
// and the age of the oldest waiting group.
void AddPlacementGroups(const HeadSnapshot& snapshot, Families* out) {
  const v1::GetClusterStatusResponse& status = snapshot.status;
  out->push_back(StateCounts("berth_placement_groups", "Placement groups by state.",
                             status.placement_groups(), v1::PlacementGroupState_descriptor(),
                             "PLACEMENT_GROUP_STATE_"));
  uint32_t infeasible = 0;
  for (const v1::PendingDemand& d : status.pending_demand()) {
    if (d.infeasible()) infeasible += d.count();
  }
  GaugeFamily infeasible_family(
      "berth_placement_groups_infeasible",
      "PENDING/RESCHEDULING groups that no set of alive nodes could hold.");
  infeasible_family.Add({}, infeasible);
  out->push_back(infeasible_family.Take());
  GaugeFamily pending_bundles("berth_pending_bundles",
                              "Unplaced bundles of PENDING/RESCHEDULING groups, by bundle shape.");
  GaugeFamily pending_gpus("berth_pending_gpus",
                           "GPUs asked for by unplaced bundles, by bundle shape.");
  for (const auto& [key, value] : PendingDemandByShape(status)) {
    const MetricLabels labels = {{"accelerator_type", std::get<0>(key)},
                                 {"shape", std::get<1>(key)},
                                 {"strategy", std::get<2>(key)}};
    pending_bundles.Add(labels, value.first);
    pending_gpus.Add(labels, value.second);
  }
  out->push_back(pending_bundles.Take());
  out->push_back(pending_gpus.Take());
  GaugeFamily age("berth_pending_gang_age_seconds",
                  "How long the oldest PENDING/RESCHEDULING group has waited (0 when none waits).");
  const int64_t since = status.oldest_pending_since_unix_ms();
  age.Add({}, since == 0 ? 0.0 : std::max<int64_t>(0, snapshot.now_ms - since) / 1000.0);
  out->push_back(age.Take());
}

// Each queue's quota, usage and borrowing per resource, its gangs and its
// fair share.
void AddQueues(const v1::GetClusterStatusResponse& status, Families* out) {
  GaugeFamily quota("berth_queue_quota", "Nominal quota of each queue, per resource.");
  GaugeFamily usage("berth_queue_usage", "What each queue's admitted gangs are charged.");
  GaugeFamily borrowed("berth_queue_borrowed",
                       "Of berth_queue_usage, what is above the queue's nominal quota.");
  GaugeFamily queue_pending("berth_queue_pending_gangs",
                            "Gangs waiting in each queue (or claiming preempted room).");
  GaugeFamily queue_running("berth_queue_running_gangs", "Admitted gangs of each queue.");
  GaugeFamily share("berth_queue_fair_share",
                    "Weighted dominant resource share of each queue (DRF: lowest goes next).");
  for (const v1::QueueStatus& q : status.queues()) {
    for (const auto& [resource, amount] : q.nominal_quota())
      quota.Add({{"queue", q.name()}, {"resource", resource}}, amount);
    for (const auto& [resource, amount] : q.usage())
      usage.Add({{"queue", q.name()}, {"resource", resource}}, amount);
    for (const auto& [resource, amount] : q.borrowed())
      borrowed.Add({{"queue", q.name()}, {"resource", resource}}, amount);
    queue_pending.Add({{"queue", q.name()}}, q.pending());
    queue_running.Add({{"queue", q.name()}}, q.running());
    share.Add({{"queue", q.name()}}, q.fair_share());
  }
  for (GaugeFamily* family : {&quota, &usage, &borrowed, &queue_pending, &queue_running, &share})
    out->push_back(family->Take());
}

// berth_train_jobs, by state.
void AddTrainJobs(const v1::GetClusterStatusResponse& status, Families* out) {
  out->push_back(StateCounts("berth_train_jobs", "Train jobs by state.", status.train_jobs(),
                             v1::TrainJobState_descriptor(), "TRAIN_JOB_STATE_"));
}

// The pools as berth-autoscaler last reported them, and the gangs no pool
// could hold.
void AddAutoscaler(const v1::AutoscalerStatus& autoscaler, Families* out) {
  GaugeFamily pool_nodes("berth_autoscaler_pool_nodes",
                         "Nodes of each pool, as last reported by berth-autoscaler.");
  GaugeFamily pool_target("berth_autoscaler_pool_target_nodes",
                          "Size the autoscaler last asked for, per pool.");
  for (const v1::NodePoolStatus& pool : autoscaler.pools()) {
    pool_nodes.Add({{"pool", pool.name()}}, pool.nodes());
    pool_target.Add({{"pool", pool.name()}}, pool.target_nodes());
  }
  out->push_back(pool_nodes.Take());
  out->push_back(pool_target.Take());
  GaugeFamily unsatisfiable("berth_autoscaler_infeasible_gangs",
                            "Pending gangs that no configured pool could ever hold.");
  unsatisfiable.Add({}, autoscaler.unsatisfiable_size());
  out->push_back(unsatisfiable.Take());
}

}  // namespace

std::string BundleAcceleratorType(const v1::Bundle& bundle) {
  for (const auto& [name, amount] : bundle.resources().amounts()) {
    std::optional<absl::string_view> type = PinnedAcceleratorType(name);
    if (type && amount > 0) return std::string(*type);
  }
  for (const v1::LabelSelectorRequirement& r : bundle.selector().requirements()) {
    if (r.key() == kAcceleratorTypeLabel && r.op() == v1::LABEL_OPERATOR_IN &&
        r.values_size() == 1) {
      return r.values(0);
    }
  }
  return "any";
}

std::string BundleShape(const v1::Bundle& bundle) {
  std::map<std::string, double> amounts;
  for (const auto& [name, amount] : bundle.resources().amounts()) {
    if (!PinnedAcceleratorType(name) && amount != 0) amounts[name] = amount;
  }
  absl::StatusOr<ResourceSet> set = ResourceSet::FromDoubles(amounts, "shape");
  if (!set.ok()) return "invalid";
  return std::string(absl::StripSuffix(absl::StripPrefix(set->ToString(), "{"), "}"));
}

std::vector<prometheus::MetricFamily> HeadStateFamilies(const HeadSnapshot& snapshot) {
  Families out;
  AddNodeCounts(snapshot.status, &out);
  AddResourceUse(snapshot.status, &out);
  AddNodeGpus(snapshot.nodes, &out);
  AddPlacementGroups(snapshot, &out);
  AddQueues(snapshot.status, &out);
  AddTrainJobs(snapshot.status, &out);
  AddAutoscaler(snapshot.status.autoscaler(), &out);
  return out;
}

HeadMetrics::HeadMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  placement_latency_ =
      &prometheus::BuildHistogram()
           .Name("berth_placement_latency_seconds")
           .Help("From CreatePlacementGroup (or a loss to RESCHEDULING) to CREATED.")
           .Register(*registry_)
           .Add({}, LatencyBuckets());
  decision_latency_ = &prometheus::BuildHistogram()
                           .Name("berth_placement_decision_seconds")
                           .Help("One placement decision in the core for one group.")
                           .Register(*registry_)
                           .Add({}, DecisionBuckets());
  auto& failures = prometheus::BuildCounter()
                       .Name("berth_two_phase_commit_failures_total")
                       .Help("Two-phase commits that failed and were cancelled, by failing phase.")
                       .Register(*registry_);
  prepare_failures_ = &failures.Add({{"phase", "prepare"}});
  commit_failures_ = &failures.Add({{"phase", "commit"}});
  auto& rejections =
      prometheus::BuildCounter()
          .Name("berth_placement_node_rejections_total")
          .Help("Nodes a placement decision's feasibility filters ruled out, by filter.")
          .Register(*registry_);
  for (const NodeFilter* filter : NodeFilters()) {
    node_rejections_[filter->name()] = &rejections.Add({{"filter", std::string(filter->name())}});
  }
  node_deaths_ = &prometheus::BuildCounter()
                      .Name("berth_node_deaths_total")
                      .Help("Nodes declared DEAD after missing their heartbeats.")
                      .Register(*registry_)
                      .Add({});
  head_stall_seconds_ =
      &prometheus::BuildCounter()
           .Name("berth_head_stall_seconds_total")
           .Help(
               "Time the head's liveness check ran late (the head paused, swapped or starved), "
               "not counted against any node's heartbeats.")
           .Register(*registry_)
           .Add({});
  job_restarts_ = &prometheus::BuildCounter()
                       .Name("berth_train_job_restarts_total")
                       .Help("Worker-group restarts of train jobs after a failure.")
                       .Register(*registry_)
                       .Add({});
  admitted_ = &prometheus::BuildCounter()
                   .Name("berth_queue_admitted_total")
                   .Help("Gangs admitted (quota and placement) by each queue.")
                   .Register(*registry_);
  preempted_ = &prometheus::BuildCounter()
                    .Name("berth_queue_preempted_total")
                    .Help("Gangs of each queue chosen as preemption victims.")
                    .Register(*registry_);
  queue_wait_ = &prometheus::BuildHistogram()
                     .Name("berth_queue_wait_seconds")
                     .Help("From a gang's arrival (or its preemption) to its admission.")
                     .Register(*registry_);
  const std::string default_queue(kDefaultQueue);
  admitted_->Add({{"queue", default_queue}});
  preempted_->Add({{"queue", default_queue}});
  queue_wait_->Add({{"queue", default_queue}}, WaitBuckets());
}

void HeadMetrics::OnAdmitted(const std::string& queue, int64_t waited_ms) {
  admitted_->Add({{"queue", queue}}).Increment();
  queue_wait_->Add({{"queue", queue}}, WaitBuckets()).Observe(waited_ms / 1000.0);
}

void HeadMetrics::OnPreempted(const std::string& queue) {
  preempted_->Add({{"queue", queue}}).Increment();
}

void HeadMetrics::BeforeDecision() { decision_start_ = std::chrono::steady_clock::now(); }

void HeadMetrics::AfterDecision(const PlacementDecision& decision) {
  decision_latency_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - decision_start_).count());
  for (const auto& [filter, count] : decision.rejected_by) {
    node_rejections_.at(filter)->Increment(static_cast<double>(count));
  }
}

void HeadMetrics::OnCreated(int64_t latency_ms) {
  placement_latency_->Observe(latency_ms / 1000.0);
}

void HeadMetrics::OnCommitFailed(bool prepared) {
  (prepared ? commit_failures_ : prepare_failures_)->Increment();
}

void HeadMetrics::OnNodeDead() { node_deaths_->Increment(); }

void HeadMetrics::OnHeadStall(int64_t stall_ms) {
  head_stall_seconds_->Increment(static_cast<double>(stall_ms) / 1000);
}

void HeadMetrics::OnJobRestart() { job_restarts_->Increment(); }

}  // namespace berth
