#include "scheduler/head_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/metric_samples.h"

namespace berth {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::Optional;
using testing::Sample;
using testing::SeriesCount;

void Set(v1::ResourceSet* set, const std::string& name, double value) {
  (*set->mutable_amounts())[name] = value;
}

v1::Bundle MakeBundle(std::map<std::string, double> amounts) {
  v1::Bundle b;
  for (const auto& [name, value] : amounts) Set(b.mutable_resources(), name, value);
  return b;
}

// Two A10G nodes (8 GPUs, 3.5 reserved), one CPU-only node; a pending
// STRICT_SPREAD gang of 2 x {A10G GPU: 2}; one job running, one done.
HeadSnapshot Snapshot() {
  HeadSnapshot s;
  s.now_ms = 70'000;
  v1::GetClusterStatusResponse& status = s.status;
  status.set_alive_nodes(3);
  status.set_draining_nodes(1);
  Set(status.mutable_total(), "GPU", 8);
  Set(status.mutable_total(), "CPU", 40);
  Set(status.mutable_total(), "memory", 96.0 * (1 << 30));
  Set(status.mutable_total(), "accelerator_type:A10G", 2);
  Set(status.mutable_available(), "GPU", 4.5);
  Set(status.mutable_available(), "CPU", 30);
  Set(status.mutable_available(), "memory", 96.0 * (1 << 30));
  Set(status.mutable_available(), "accelerator_type:A10G", 2);
  v1::AcceleratorTypeCount* a10g = status.add_accelerators();
  a10g->set_accelerator_type("A10G");
  Set(a10g->mutable_total(), "GPU", 8);
  Set(a10g->mutable_total(), "CPU", 32);
  Set(a10g->mutable_total(), "memory", 64.0 * (1 << 30));
  Set(a10g->mutable_available(), "GPU", 4.5);
  Set(a10g->mutable_available(), "CPU", 24);
  Set(a10g->mutable_available(), "memory", 64.0 * (1 << 30));
  v1::PendingDemand* d = status.add_pending_demand();
  *d->add_shape() = MakeBundle({{"GPU", 2}, {"accelerator_type:A10G", 0.001}});
  *d->add_shape() = MakeBundle({{"GPU", 2}, {"accelerator_type:A10G", 0.001}});
  d->set_strategy(v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  d->set_count(3);
  status.set_oldest_pending_since_unix_ms(10'000);
  v1::PlacementGroupStateCount* created = status.add_placement_groups();
  created->set_state(v1::PLACEMENT_GROUP_STATE_CREATED);
  created->set_count(2);
  v1::TrainJobStateCount* running = status.add_train_jobs();
  running->set_state(v1::TRAIN_JOB_STATE_RUNNING);
  running->set_count(1);

  v1::NodeInfo* n1 = s.nodes.add_nodes();
  n1->set_node_id("a10g-1");
  n1->set_state(v1::NODE_STATE_ALIVE);
  (*n1->mutable_labels())["berth.io/accelerator-type"] = "A10G";
  for (int i = 0; i < 4; ++i) n1->add_gpus()->set_index(i);
  Set(n1->mutable_total(), "GPU", 4);
  Set(n1->mutable_available(), "GPU", 0.5);
  v1::NodeInfo* dead = s.nodes.add_nodes();
  dead->set_node_id("gone");
  dead->set_state(v1::NODE_STATE_DEAD);
  dead->add_gpus()->set_index(0);
  v1::NodeInfo* cpu = s.nodes.add_nodes();
  cpu->set_node_id("cpu-1");
  cpu->set_state(v1::NODE_STATE_ALIVE);
  return s;
}

TEST(HeadMetricsTest, StateGaugesFollowTheSnapshot) {
  const std::vector<prometheus::MetricFamily> f = HeadStateFamilies(Snapshot());
  EXPECT_THAT(Sample(f, "berth_nodes", {{"state", "ALIVE"}}), Optional(3.0));
  EXPECT_THAT(Sample(f, "berth_nodes", {{"state", "DRAINING"}}), Optional(1.0));
  EXPECT_THAT(Sample(f, "berth_nodes", {{"state", "DEAD"}}), Optional(0.0));
  // Per accelerator type; CPU-only nodes are "none".
  EXPECT_THAT(
      Sample(f, "berth_resource_capacity", {{"resource", "GPU"}, {"accelerator_type", "A10G"}}),
      Optional(8.0));
  EXPECT_THAT(
      Sample(f, "berth_resource_allocated", {{"resource", "GPU"}, {"accelerator_type", "A10G"}}),
      Optional(3.5));
  EXPECT_THAT(
      Sample(f, "berth_resource_capacity", {{"resource", "CPU"}, {"accelerator_type", "none"}}),
      Optional(8.0));
  EXPECT_THAT(
      Sample(f, "berth_resource_allocated", {{"resource", "CPU"}, {"accelerator_type", "none"}}),
      Optional(2.0));
  EXPECT_THAT(
      Sample(f, "berth_resource_capacity", {{"resource", "memory"}, {"accelerator_type", "none"}}),
      Optional(DoubleEq(32.0 * (1 << 30))));
  // GPU resources of CPU-only nodes are not invented, internal keys never shown.
  EXPECT_EQ(
      Sample(f, "berth_resource_capacity", {{"resource", "GPU"}, {"accelerator_type", "none"}}),
      std::nullopt);
  for (const auto& family : f) {
    for (const auto& m : family.metric) {
      for (const auto& l : m.label)
        EXPECT_EQ(l.value.find("accelerator_type:"), std::string::npos) << family.name;
    }
  }
  // Per node: only ALIVE/DRAINING nodes with GPUs.
  EXPECT_THAT(Sample(f, "berth_node_gpus", {{"node", "a10g-1"}, {"accelerator_type", "A10G"}}),
              Optional(4.0));
  EXPECT_THAT(
      Sample(f, "berth_node_gpus_allocated", {{"node", "a10g-1"}, {"accelerator_type", "A10G"}}),
      Optional(3.5));
  EXPECT_EQ(SeriesCount(f, "berth_node_gpus"), 1u);
  // Every state has a series, zero when empty.
  EXPECT_THAT(Sample(f, "berth_placement_groups", {{"state", "CREATED"}}), Optional(2.0));
  EXPECT_THAT(Sample(f, "berth_placement_groups", {{"state", "PENDING"}}), Optional(0.0));
  EXPECT_EQ(SeriesCount(f, "berth_placement_groups"), 5u);
  EXPECT_THAT(Sample(f, "berth_train_jobs", {{"state", "RUNNING"}}), Optional(1.0));
  EXPECT_THAT(Sample(f, "berth_train_jobs", {{"state", "TIMED_OUT"}}), Optional(0.0));
  EXPECT_EQ(SeriesCount(f, "berth_train_jobs"), 8u);
  // 3 gangs x 2 bundles of {GPU: 2} on A10G.
  const std::map<std::string, std::string> shape = {
      {"accelerator_type", "A10G"}, {"shape", "GPU: 2"}, {"strategy", "STRICT_SPREAD"}};
  EXPECT_THAT(Sample(f, "berth_pending_bundles", shape), Optional(6.0));
  EXPECT_THAT(Sample(f, "berth_pending_gpus", shape), Optional(12.0));
  EXPECT_THAT(Sample(f, "berth_pending_gang_age_seconds", {}), Optional(60.0));
  EXPECT_THAT(Sample(f, "berth_autoscaler_infeasible_gangs", {}), Optional(0.0));
}

// Every state gauge of docs/metrics.md, each family once, in the order a
// scrape lists them.
TEST(HeadMetricsTest, StateFamiliesComeOnceInScrapeOrder) {
  std::vector<std::string> names;
  for (const prometheus::MetricFamily& family : HeadStateFamilies(Snapshot())) {
    EXPECT_EQ(family.type, prometheus::MetricType::Gauge) << family.name;
    names.push_back(family.name);
  }
  EXPECT_THAT(
      names, ElementsAre(
                 "berth_nodes", "berth_resource_capacity", "berth_resource_allocated",
                 "berth_node_gpus", "berth_node_gpus_allocated", "berth_placement_groups",
                 "berth_placement_groups_infeasible", "berth_pending_bundles", "berth_pending_gpus",
                 "berth_pending_gang_age_seconds", "berth_queue_quota", "berth_queue_usage",
                 "berth_queue_borrowed", "berth_queue_pending_gangs", "berth_queue_running_gangs",
                 "berth_queue_fair_share", "berth_train_jobs", "berth_autoscaler_pool_nodes",
                 "berth_autoscaler_pool_target_nodes", "berth_autoscaler_infeasible_gangs"));
}

TEST(HeadMetricsTest, QueueAndAutoscalerGaugesFollowTheSnapshot) {
  HeadSnapshot s = Snapshot();
  v1::GetClusterStatusResponse& status = s.status;
  status.mutable_pending_demand(0)->set_infeasible(true);
  status.set_oldest_pending_since_unix_ms(0);
  v1::QueueStatus* q = status.add_queues();
  q->set_name("research");
  (*q->mutable_nominal_quota())["GPU"] = 8;
  (*q->mutable_usage())["GPU"] = 10;
  (*q->mutable_borrowed())["GPU"] = 2;
  q->set_pending(4);
  q->set_running(3);
  q->set_fair_share(0.625);
  v1::NodePoolStatus* pool = status.mutable_autoscaler()->add_pools();
  pool->set_name("a10g");
  pool->set_nodes(2);
  pool->set_target_nodes(5);
  status.mutable_autoscaler()->add_unsatisfiable();
  const std::vector<prometheus::MetricFamily> f = HeadStateFamilies(s);
  EXPECT_THAT(Sample(f, "berth_placement_groups_infeasible", {}), Optional(3.0));
  EXPECT_THAT(Sample(f, "berth_pending_gang_age_seconds", {}), Optional(0.0));
  const std::map<std::string, std::string> gpu = {{"queue", "research"}, {"resource", "GPU"}};
  EXPECT_THAT(Sample(f, "berth_queue_quota", gpu), Optional(8.0));
  EXPECT_THAT(Sample(f, "berth_queue_usage", gpu), Optional(10.0));
  EXPECT_THAT(Sample(f, "berth_queue_borrowed", gpu), Optional(2.0));
  EXPECT_THAT(Sample(f, "berth_queue_pending_gangs", {{"queue", "research"}}), Optional(4.0));
  EXPECT_THAT(Sample(f, "berth_queue_running_gangs", {{"queue", "research"}}), Optional(3.0));
  EXPECT_THAT(Sample(f, "berth_queue_fair_share", {{"queue", "research"}}), Optional(0.625));
  EXPECT_THAT(Sample(f, "berth_autoscaler_pool_nodes", {{"pool", "a10g"}}), Optional(2.0));
  EXPECT_THAT(Sample(f, "berth_autoscaler_pool_target_nodes", {{"pool", "a10g"}}), Optional(5.0));
  EXPECT_THAT(Sample(f, "berth_autoscaler_infeasible_gangs", {}), Optional(1.0));
}

TEST(HeadMetricsTest, BundleShapeAndAcceleratorType) {
  v1::Bundle b = MakeBundle({{"CPU", 8}, {"GPU", 1}, {"memory", 32.0 * (1 << 30)}});
  EXPECT_EQ(BundleShape(b), "CPU: 8, GPU: 1, memory: 32Gi");
  EXPECT_EQ(BundleAcceleratorType(b), "any");
  v1::LabelSelectorRequirement* r = b.mutable_selector()->add_requirements();
  r->set_key("berth.io/accelerator-type");
  r->set_op(v1::LABEL_OPERATOR_IN);
  r->add_values("H100");
  EXPECT_EQ(BundleAcceleratorType(b), "H100");
  r->add_values("A100");  // either model: not one type
  EXPECT_EQ(BundleAcceleratorType(b), "any");
  EXPECT_EQ(BundleAcceleratorType(MakeBundle({{"GPU", 1}, {"accelerator_type:T4", 0.001}})), "T4");
}

TEST(HeadMetricsTest, EventsFeedCountersAndHistograms) {
  HeadMetrics metrics;
  metrics.BeforeDecision();
  PlacementDecision decision;
  decision.outcome = PlacementOutcome::kRetryLater;
  decision.rejected_by = {{"label_selector", 3}, {"resources", 2}};
  metrics.AfterDecision(decision);
  metrics.OnCreated(1500);
  metrics.OnCommitFailed(false);
  metrics.OnCommitFailed(true);
  metrics.OnCommitFailed(true);
  metrics.OnNodeDead();
  metrics.OnJobRestart();
  std::map<std::string, double> counters;
  std::map<std::string, uint64_t> histogram_counts;
  for (const prometheus::MetricFamily& family : metrics.registry()->Collect()) {
    for (const prometheus::ClientMetric& m : family.metric) {
      std::string key = family.name;
      for (const auto& l : m.label) key += "," + l.value;
      counters[key] = m.counter.value;
      histogram_counts[key] = m.histogram.sample_count;
      if (family.name == "berth_placement_latency_seconds") {
        EXPECT_DOUBLE_EQ(m.histogram.sample_sum, 1.5);
      }
    }
  }
  EXPECT_EQ(counters["berth_two_phase_commit_failures_total,prepare"], 1);
  EXPECT_EQ(counters["berth_two_phase_commit_failures_total,commit"], 2);
  EXPECT_EQ(counters["berth_node_deaths_total"], 1);
  EXPECT_EQ(counters["berth_placement_node_rejections_total,label_selector"], 3);
  EXPECT_EQ(counters["berth_placement_node_rejections_total,resources"], 2);
  EXPECT_EQ(counters.count("berth_placement_node_rejections_total,gpu_instances"),
            1u);  // exported at 0
  EXPECT_EQ(counters["berth_train_job_restarts_total"], 1);
  EXPECT_EQ(histogram_counts["berth_placement_latency_seconds"], 1u);
  EXPECT_EQ(histogram_counts["berth_placement_decision_seconds"], 1u);
}

}  // namespace
}  // namespace berth
