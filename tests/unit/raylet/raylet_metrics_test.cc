#include "raylet/raylet_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/metric_samples.h"

namespace berth {
namespace {

using ::testing::Optional;
using testing::Sample;
using testing::SeriesCount;

ReservedBundle Bundle(const std::string& pg, uint32_t index, std::vector<GpuShare> gpus,
                      BundleState state) {
  ReservedBundle b;
  b.key = {pg, index};
  b.gpus = std::move(gpus);
  b.state = state;
  return b;
}

WorkerRecord Worker(const std::string& id, const std::string& pg, uint32_t bundle,
                    const std::string& rank, WorkerState state = WorkerState::kRunning) {
  WorkerRecord w;
  w.worker_id = id;
  w.job_id = "job-1";
  w.placement_group_id = pg;
  w.bundle_index = bundle;
  w.rank = rank;
  w.state = state;
  return w;
}

TEST(RayletMetricsTest, EachGpuNamesItsBundleJobAndRank) {
  RayletSnapshot s;
  s.node_id = "n1";
  s.accelerator_type = "A10G";
  s.gpu_count = 4;
  const Quantity one = Quantity::Whole(1);
  const Quantity half = Quantity::FromUnits(Quantity::kUnitsPerWhole / 2);
  s.bundles = {Bundle("pg-a", 0, {{0, one}}, BundleState::kCommitted),
               Bundle("pg-a", 1, {{1, one}}, BundleState::kCommitted),
               Bundle("pg-b", 0, {{2, half}}, BundleState::kCommitted),
               Bundle("pg-c", 0, {{3, one}}, BundleState::kPrepared)};
  // Rank 0 and the trainer share bundle 0; rank 1 has ended (its GPU idles).
  s.workers = {Worker("job-1-a0-trainer", "pg-a", 0, ""), Worker("job-1-a0-r0", "pg-a", 0, "0"),
               Worker("job-1-a0-r1", "pg-a", 1, "1", WorkerState::kFailed)};
  const std::vector<prometheus::MetricFamily> f = RayletStateFamilies(s);

  auto info = [](std::string gpu, std::string pg, std::string bundle, std::string job,
                 std::string rank, std::string worker) {
    return std::map<std::string, std::string>{{"node", "n1"},
                                              {"gpu_index", gpu},
                                              {"accelerator_type", "A10G"},
                                              {"placement_group_id", pg},
                                              {"bundle_index", bundle},
                                              {"job_id", job},
                                              {"rank", rank},
                                              {"worker_id", worker}};
  };
  EXPECT_THAT(
      Sample(f, "berth_gpu_instance_info", info("0", "pg-a", "0", "job-1", "0", "job-1-a0-r0")),
      Optional(1.0));
  // The trainer is not listed as the GPU's user when a rank is.
  EXPECT_EQ(
      Sample(f, "berth_gpu_instance_info", info("0", "pg-a", "0", "job-1", "", "job-1-a0-trainer")),
      std::nullopt);
  // Bundle 1's worker ended: the GPU is still reserved, for the job, unused.
  EXPECT_THAT(Sample(f, "berth_gpu_instance_info", info("1", "pg-a", "1", "job-1", "", "")),
              Optional(1.0));
  EXPECT_THAT(Sample(f, "berth_gpu_instance_info", info("2", "pg-b", "0", "", "", "")),
              Optional(1.0));
  EXPECT_EQ(SeriesCount(f, "berth_gpu_instance_info"), 4u);  // incl. the prepared bundle's GPU

  EXPECT_THAT(Sample(f, "berth_gpu_instance_allocated",
                     {{"node", "n1"}, {"gpu_index", "2"}, {"accelerator_type", "A10G"}}),
              Optional(0.5));
  EXPECT_EQ(SeriesCount(f, "berth_gpu_instance_allocated"), 4u);
  EXPECT_THAT(Sample(f, "berth_raylet_bundles", {{"node", "n1"}, {"state", "committed"}}),
              Optional(3.0));
  EXPECT_THAT(Sample(f, "berth_raylet_bundles", {{"node", "n1"}, {"state", "prepared"}}),
              Optional(1.0));
  EXPECT_THAT(Sample(f, "berth_raylet_workers_running", {{"node", "n1"}}), Optional(2.0));
  // GPU 1 (no worker) and GPU 2's half share (no worker); not the prepared one.
  EXPECT_THAT(Sample(f, "berth_raylet_idle_reserved_gpus", {{"node", "n1"}}), Optional(1.5));
}

TEST(RayletMetricsTest, NodeWithoutGpusHasNoGpuSeries) {
  RayletSnapshot s;
  s.node_id = "cpu";
  const std::vector<prometheus::MetricFamily> f = RayletStateFamilies(s);
  EXPECT_EQ(SeriesCount(f, "berth_gpu_instance_allocated"), 0u);
  EXPECT_THAT(Sample(f, "berth_raylet_idle_reserved_gpus", {{"node", "cpu"}}), Optional(0.0));
}

TEST(RayletMetricsTest, ConfinedRunningWorkersShowWhatTheyUseOfTheirBundles) {
  RayletSnapshot s;
  s.node_id = "n1";
  s.workers = {Worker("w0", "pg", 0, "0"), Worker("w1", "pg", 1, "1"),
               Worker("old", "pg", 2, "2", WorkerState::kExited)};
  s.usage = {{"w0", {100 << 20, 512 << 20, 12.5}}, {"w1", {1 << 20, 0, 0.25}}};
  const std::vector<prometheus::MetricFamily> f = RayletStateFamilies(s);
  const std::map<std::string, std::string> w0 = {
      {"node", "n1"}, {"job_id", "job-1"}, {"worker_id", "w0"}, {"rank", "0"}};
  EXPECT_THAT(Sample(f, "berth_worker_memory_bytes", w0), Optional(100.0 * (1 << 20)));
  EXPECT_THAT(Sample(f, "berth_worker_memory_limit_bytes", w0), Optional(512.0 * (1 << 20)));
  EXPECT_EQ(SeriesCount(f, "berth_worker_memory_bytes"), 2u);
  // w1's bundle has no memory: no limit series.
  EXPECT_EQ(SeriesCount(f, "berth_worker_memory_limit_bytes"), 1u);
  for (const prometheus::MetricFamily& family : f) {
    if (family.name != "berth_worker_cpu_seconds_total") continue;
    EXPECT_EQ(family.type, prometheus::MetricType::Counter);
    ASSERT_EQ(family.metric.size(), 2u);
    EXPECT_EQ(family.metric[0].counter.value, 12.5);
  }
}

TEST(RayletMetricsTest, ExitsCountedByOutcome) {
  RayletMetrics metrics("n1");
  metrics.OnWorkerExit(Worker("a", "pg", 0, "0", WorkerState::kExited));
  metrics.OnWorkerExit(Worker("b", "pg", 0, "0", WorkerState::kFailed));
  metrics.OnWorkerExit(Worker("c", "pg", 0, "0", WorkerState::kFailed));
  metrics.OnWorkerExit(Worker("d", "pg", 0, "0", WorkerState::kKilled));
  std::map<std::string, double> by_outcome;
  for (const auto& family : metrics.registry()->Collect()) {
    for (const auto& m : family.metric) {
      for (const auto& l : m.label) {
        if (l.name == "outcome") by_outcome[l.value] = m.counter.value;
      }
    }
  }
  EXPECT_EQ(by_outcome,
            (std::map<std::string, double>{{"failed", 2}, {"killed", 1}, {"succeeded", 1}}));
}

}  // namespace
}  // namespace berth
