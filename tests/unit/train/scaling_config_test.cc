#include "train/scaling_config.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/bundle_placer.h"
#include "tests/unit/placement_test_util.h"
#include "train/attempt_plan.h"
#include "train/train_job_spec.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

using ::berth::testing::MakeNode;
using ::testing::HasSubstr;

constexpr double kGi = 1024.0 * 1024 * 1024;

TEST(ScalingConfigTest, RayDefaults) {
  ScalingConfig cpu;
  cpu.num_workers = 3;
  auto spec = BuildTrainPlacementGroup(cpu).value();
  ASSERT_EQ(spec.bundles().size(), 3u);
  EXPECT_EQ(spec.bundles()[0].resources, ResourceSet::Of({{kCpu, 2}}));  // trainer + worker
  EXPECT_EQ(spec.bundles()[1].resources, ResourceSet::Of({{kCpu, 1}}));
  EXPECT_EQ(spec.strategy(), PlacementStrategy::kPack);

  ScalingConfig gpu;
  gpu.num_workers = 2;
  gpu.use_gpu = true;
  gpu.accelerator_type = "A10G";
  gpu.placement_strategy = "SPREAD";
  auto g = BuildTrainPlacementGroup(gpu).value();
  EXPECT_EQ(g.bundles()[0].resources,
            ResourceSet::Of({{kCpu, 1}, {kGpu, 1}, {"accelerator_type:A10G", 0.001}}));
  EXPECT_EQ(g.bundles()[1].resources,
            ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A10G", 0.001}}));
  EXPECT_EQ(g.strategy(), PlacementStrategy::kSpread);
}

TEST(ScalingConfigTest, ZeroEntriesDroppedAndGpuDefaulted) {
  ScalingConfig c;
  c.use_gpu = true;
  c.resources_per_worker = {{{"CPU", 4}, {"custom", 0}}};
  c.trainer_resources = {{{"CPU", 0}}};
  auto spec = BuildTrainPlacementGroup(c).value();
  EXPECT_EQ(spec.bundles()[0].resources, ResourceSet::Of({{kCpu, 4}, {kGpu, 1}}));
}

TEST(ScalingConfigTest, BadConfigsNameTheField) {
  auto expect_error = [](ScalingConfig c, const std::string& field) {
    auto r = BuildTrainPlacementGroup(c);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(field));
  };
  ScalingConfig zero;
  zero.num_workers = 0;
  expect_error(zero, "scaling_config.num_workers");
  ScalingConfig gpu_without_use;
  gpu_without_use.resources_per_worker = {{{"GPU", 1}}};
  expect_error(gpu_without_use, "scaling_config.resources_per_worker[\"GPU\"]");
  ScalingConfig internal;
  internal.use_gpu = true;
  internal.trainer_resources = {{{"accelerator_type:A10G", 0.001}}};
  expect_error(internal, "scaling_config.trainer_resources[\"accelerator_type:A10G\"]");
  ScalingConfig strategy;
  strategy.placement_strategy = "BALANCED";
  expect_error(strategy, "scaling_config.placement_strategy");
  ScalingConfig frac;
  frac.use_gpu = true;
  frac.resources_per_worker = {{{"GPU", 1.5}}};
  expect_error(frac, "scaling_config.resources_per_worker[\"GPU\"]");
  ScalingConfig accel_cpu;
  accel_cpu.accelerator_type = "A10G";
  expect_error(accel_cpu, "scaling_config.accelerator_type");
  ScalingConfig nan;
  nan.trainer_resources = {{{"memory", std::nan("")}}};
  expect_error(nan, "scaling_config.trainer_resources[\"memory\"]");
}

// Found by scaling_config_fuzzer: an accelerator type of 112+ characters made
// an `accelerator_type:<T>` resource name over 128 characters, which the head
// could not read back when reporting the job's bundles.
TEST(ScalingConfigTest, AcceleratorTypeKeepsResourceNamesValid) {
  ScalingConfig c;
  c.use_gpu = true;
  c.accelerator_type = std::string(111, 'A');
  auto spec = BuildTrainPlacementGroup(c).value();
  google::protobuf::RepeatedPtrField<v1::Bundle> wire;
  BundleToProto(spec.bundles()[0], wire.Add());
  EXPECT_TRUE(
      PlacementGroupSpecFromProto(wire, v1::PLACEMENT_STRATEGY_PACK, /*allow_internal=*/true).ok());
  c.accelerator_type = std::string(112, 'A');
  auto r = BuildTrainPlacementGroup(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "scaling_config.accelerator_type: longer than 111 characters");
}

LabelSelector Selector(const std::string& text) { return LabelSelector::Parse(text, "t").value(); }

// Rank i is bundle i: rank_resources merge into their rank's bundle, a list
// gives each rank its own, selectors go to every bundle or to their rank's.
TEST(ScalingConfigTest, PerRankResourcesAndSelectorsLandInThatRanksBundle) {
  ScalingConfig c;
  c.num_workers = 3;
  c.use_gpu = true;
  c.accelerator_type = "A10G";
  c.trainer_resources = ResourceAmounts{};  // no trainer: rank 0's bundle is its own
  c.rank_resources = {{0, {{"memory", 200 * kGi}}}, {2, {{"CPU", 8}}}};
  c.label_selector = {Selector("zone=a")};
  auto spec = BuildTrainPlacementGroup(c).value();
  const ResourceSet gpu = ResourceSet::Of({{kGpu, 1}, {"accelerator_type:A10G", 0.001}});
  ResourceSet rank0 = gpu;
  rank0.Set(kMemory, Quantity::FromDouble(200 * kGi, "m").value());
  ResourceSet rank2 = gpu;
  rank2.Set(kCpu, Quantity::Whole(8));
  EXPECT_EQ(spec.bundles()[0].resources, rank0);
  EXPECT_EQ(spec.bundles()[1].resources, gpu);
  EXPECT_EQ(spec.bundles()[2].resources, rank2);
  for (const Bundle& b : spec.bundles()) EXPECT_EQ(b.selector, Selector("zone=a"));
  EXPECT_FALSE(WorkerBundlesAlike(spec));
  c.rank_resources = {{0, {{"memory", 200 * kGi}}}};
  EXPECT_TRUE(WorkerBundlesAlike(BuildTrainPlacementGroup(c).value()));  // only rank 0 differs

  ScalingConfig list;
  list.num_workers = 2;
  list.use_gpu = true;
  list.resources_per_worker_list = {{{"GPU", 2}, {"CPU", 4}}, {{"CPU", 2}}};
  list.label_selector = {Selector("nvlink"), Selector("!spot")};
  auto l = BuildTrainPlacementGroup(list).value();
  EXPECT_EQ(l.bundles()[0].resources, ResourceSet::Of({{kGpu, 2}, {kCpu, 5}}));  // + trainer
  EXPECT_EQ(l.bundles()[1].resources, ResourceSet::Of({{kGpu, 1}, {kCpu, 2}}));  // GPU defaulted
  EXPECT_EQ(l.bundles()[0].selector, Selector("nvlink"));
  EXPECT_EQ(l.bundles()[1].selector, Selector("!spot"));
}

TEST(ScalingConfigTest, BadPerRankConfigsNameTheField) {
  auto expect_error = [](const ScalingConfig& c, const std::string& field) {
    auto r = BuildTrainPlacementGroup(c);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(field));
  };
  ScalingConfig c;
  c.num_workers = 4;
  c.use_gpu = true;
  ScalingConfig rank = c;
  rank.rank_resources = {{4, {{"memory", kGi}}}};
  expect_error(rank, "scaling_config.rank_resources[4]: no such rank; ranks are 0..3");
  ScalingConfig negative = c;
  negative.rank_resources = {{-1, {{"memory", kGi}}}};
  expect_error(negative, "scaling_config.rank_resources[-1]");
  ScalingConfig frac = c;
  frac.rank_resources = {{1, {{"GPU", 0.5}}}};  // 1 + 0.5 GPUs is not a valid request
  expect_error(frac, "scaling_config.rank_resources[1][\"GPU\"]");
  ScalingConfig internal = c;
  internal.rank_resources = {{1, {{"accelerator_type:A10G", 1}}}};
  expect_error(internal, "scaling_config.rank_resources[1][\"accelerator_type:A10G\"]");
  ScalingConfig cpu_gpu;
  cpu_gpu.num_workers = 2;
  cpu_gpu.rank_resources = {{1, {{"GPU", 1}}}};
  expect_error(cpu_gpu,
               "scaling_config.rank_resources[1][\"GPU\"]: GPUs requested with use_gpu false");
  ScalingConfig short_list = c;
  short_list.resources_per_worker_list = {{{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}};
  expect_error(short_list, "scaling_config.resources_per_worker_list: 3 entries for num_workers 4");
  ScalingConfig both = c;
  both.resources_per_worker = {{{"GPU", 1}}};
  both.resources_per_worker_list = {{{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}};
  expect_error(both, "scaling_config.resources_per_worker_list: give either");
  ScalingConfig bad_entry = c;
  bad_entry.resources_per_worker_list = {{{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1.5}}, {{"GPU", 1}}};
  expect_error(bad_entry, "scaling_config.resources_per_worker_list[2][\"GPU\"]");
  ScalingConfig zero_entry = c;
  zero_entry.use_gpu = false;
  zero_entry.resources_per_worker_list = {{{"CPU", 1}}, {{"CPU", 0}}, {{"CPU", 1}}, {{"CPU", 1}}};
  expect_error(zero_entry, "scaling_config.resources_per_worker_list[1]: every amount is zero");
  ScalingConfig selectors = c;
  selectors.label_selector = {Selector("a"), Selector("b")};
  expect_error(selectors, "scaling_config.label_selector: 2 entries for num_workers 4");
}

// The wire form: per-rank fields arrive as the head reads them, and a
// launcher, which numbers a node's ranks itself, may tell only rank 0 apart.
TEST(ScalingConfigTest, TheWireFormAndLaunchers) {
  v1::TrainJobSpec spec;
  v1::ScalingConfig* s = spec.mutable_scaling_config();
  s->set_num_workers(3);
  s->set_use_gpu(true);
  (*(*s->mutable_rank_resources())[1].mutable_amounts())["CPU"] = 4;
  v1::LabelSelectorRequirement* r = s->add_label_selector()->add_requirements();
  r->set_key("zone");
  r->set_op(v1::LABEL_OPERATOR_IN);
  r->add_values("a");
  auto group = PlacementGroupForJob(spec);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->bundles()[1].resources, ResourceSet::Of({{kGpu, 1}, {kCpu, 4}}));
  EXPECT_EQ(group->bundles()[1].selector, Selector("zone in (a)"));

  v1::Entrypoint::Command* command = spec.mutable_entrypoint()->mutable_command();
  command->add_argv("torchrun");
  command->set_launcher(v1::Entrypoint::LAUNCHER_TORCHRUN);
  auto refused = PlacementGroupForJob(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("spec.scaling_config: ranks 1 and above differ"));
  s->mutable_rank_resources()->clear();
  (*(*s->mutable_rank_resources())[0].mutable_amounts())["memory"] = 200 * kGi;
  EXPECT_TRUE(PlacementGroupForJob(spec).ok());  // rank 0 is node rank 0's first

  r->set_op(v1::LABEL_OPERATOR_UNSPECIFIED);
  auto op = PlacementGroupForJob(spec);
  ASSERT_FALSE(op.ok());
  EXPECT_THAT(std::string(op.status().message()),
              HasSubstr("spec.scaling_config.label_selector[0].requirements[0].op"));
}

class SeedExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 16 x T4 + 16 x A10G nodes; one A10G node has 256Gi of memory.
    for (int i = 0; i < 16; ++i) {
      table_.AddNode(MakeNode("t4-" + std::to_string(i), 8, 1, "T4", {}, 32 * kGi)).value();
    }
    for (int i = 0; i < 15; ++i) {
      table_.AddNode(MakeNode("a10g-" + std::to_string(i), 8, 1, "A10G", {}, 32 * kGi)).value();
    }
    table_.AddNode(MakeNode("a10g-bigmem", 64, 1, "A10G", {}, 256 * kGi)).value();
  }
  NodeResourceTable table_;
};

// Seed example 1: 16 A10G workers land only on A10G nodes.
TEST_F(SeedExamplesTest, AcceleratorTypeSelectsOnlyA10gNodes) {
  ScalingConfig c;
  c.num_workers = 16;
  c.use_gpu = true;
  c.accelerator_type = "A10G";
  auto d = BundlePlacer(&table_).Place(BuildTrainPlacementGroup(c).value()).value();
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced) << d.reason;
  std::set<std::string> nodes;
  for (const auto& p : d.placements) {
    EXPECT_EQ(table_.node(p.allocation.node).accelerator_type, "A10G");
    nodes.insert(table_.node(p.allocation.node).id);
  }
  EXPECT_EQ(nodes.size(), 16u);
  // A 17th A10G worker has to wait; it is not infeasible.
  c.num_workers = 1;
  auto more = BundlePlacer(&table_).Place(BuildTrainPlacementGroup(c).value()).value();
  EXPECT_EQ(more.outcome, PlacementOutcome::kRetryLater);
}

// Seed example 2: trainer_resources memory 200Gi puts the trainer and rank 0
// on the one node with that much memory.
TEST_F(SeedExamplesTest, TrainerResourcesPutRankZeroOnTheBigMemoryNode) {
  ScalingConfig c;
  c.num_workers = 16;
  c.use_gpu = true;
  c.accelerator_type = "A10G";
  c.trainer_resources = {{{"memory", 200 * kGi}}};
  auto d = BundlePlacer(&table_).Place(BuildTrainPlacementGroup(c).value()).value();
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced) << d.reason;
  ASSERT_EQ(d.placements[0].bundle_index, 0u);
  EXPECT_EQ(table_.node(d.placements[0].allocation.node).id, "a10g-bigmem");
  for (const auto& p : d.placements) {
    EXPECT_EQ(table_.node(p.allocation.node).accelerator_type, "A10G");
  }
  // 300Gi can never fit: infeasible, saying what the largest node has.
  c.trainer_resources = {{{"memory", 300 * kGi}}};
  auto never = BundlePlacer(&table_).Place(BuildTrainPlacementGroup(c).value()).value();
  EXPECT_EQ(never.outcome, PlacementOutcome::kInfeasible);
  EXPECT_THAT(PlacementReasonText(never.reason),
              HasSubstr("the largest A10G node has memory: 256Gi"));
  EXPECT_EQ(never.reason.gap, PlacementReason::Gap::kTooLittle);
}

// The same without any trainer_resources: rank_resources says it of rank 0.
TEST_F(SeedExamplesTest, RankResourcesPutRankZeroOnTheBigMemoryNodeWithoutATrainer) {
  ScalingConfig c;
  c.num_workers = 16;
  c.use_gpu = true;
  c.accelerator_type = "A10G";
  c.trainer_resources = ResourceAmounts{};
  c.rank_resources = {{0, {{"memory", 200 * kGi}}}};
  auto d = BundlePlacer(&table_).Place(BuildTrainPlacementGroup(c).value()).value();
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced) << d.reason;
  EXPECT_EQ(table_.node(d.placements[0].allocation.node).id, "a10g-bigmem");
  for (const auto& p : d.placements) {
    EXPECT_EQ(table_.node(p.allocation.node).accelerator_type, "A10G");
  }
}

// OMP_NUM_THREADS follows each rank's own CPUs: its resources_per_worker
// (entry) and rank_resources, not the trainer's share of bundle 0.
TEST(ScalingConfigTest, EachRankGetsTheThreadsOfItsOwnCpus) {
  AttemptInputs in;
  in.job_id = "job-1";
  in.spec.mutable_entrypoint()->mutable_command()->add_argv("/bin/true");
  v1::ScalingConfig* scaling = in.spec.mutable_scaling_config();
  scaling->set_num_workers(3);
  (*scaling->mutable_resources_per_worker()->mutable_amounts())["CPU"] = 2;
  (*scaling->mutable_trainer_resources()->mutable_amounts())["CPU"] = 4;
  (*(*scaling->mutable_rank_resources())[0].mutable_amounts())["CPU"] = 6;
  (*(*scaling->mutable_rank_resources())[2].mutable_amounts())["CPU"] = 1.5;
  absl::StatusOr<std::vector<RankedWorker>> ranks =
      AssignRanks({{"n0", {}}, {"n0", {}}, {"n1", {}}}, RankOrder::kByBundle);
  ASSERT_TRUE(ranks.ok());
  in.ranks = *ranks;
  in.master_addr = "127.0.0.1";
  in.master_port = 29500;
  absl::StatusOr<AttemptPlan> plan = PlanAttempt(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, std::string> threads;  // worker id suffix -> OMP_NUM_THREADS
  for (const auto& [node, workers] : plan->by_node) {
    for (const v1::WorkerSpec& w : workers) {
      threads[w.worker_id().substr(w.worker_id().rfind('-') + 1)] = w.env().at("OMP_NUM_THREADS");
    }
  }
  EXPECT_EQ(threads.at("r0"), "8");  // 2 + 6, without the trainer's 4
  EXPECT_EQ(threads.at("r1"), "2");
  EXPECT_EQ(threads.at("r2"), "3");  // 2 + 1.5, whole
}

TEST(ScalingConfigTest, ElasticJobsSplitIntoTheirGroupAndOneBundleGroups) {
  ScalingConfig c;
  c.num_workers = 4;
  c.min_workers = 2;
  c.use_gpu = true;
  c.trainer_resources = {{"CPU", 2}};
  c.rank_resources = {{1, {{"memory", kGi}}}};
  absl::StatusOr<PlacementGroupSpec> group = BuildTrainPlacementGroup(c);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->bundles().size(), 4u);
  absl::StatusOr<ElasticGroups> split = SplitElastic(*group, 2);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->core.bundles().size(), 2u);
  EXPECT_EQ(split->core.bundles()[0].resources.Get(kCpu), Quantity::Whole(2));  // the trainer's
  EXPECT_FALSE(split->core.bundles()[1].resources.Get(kMemory).IsZero());       // rank 1's extra
  ASSERT_EQ(split->extra.bundles().size(), 1u);
  EXPECT_EQ(split->extra.bundles()[0], group->bundles()[3]);
  EXPECT_FALSE(SplitElastic(*group, 4).ok());  // nothing elastic
  EXPECT_FALSE(SplitElastic(*group, 0).ok());

  auto expect_error = [](const ScalingConfig& bad, const std::string& field) {
    absl::StatusOr<PlacementGroupSpec> r = BuildTrainPlacementGroup(bad);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(field));
  };
  ScalingConfig more = c;
  more.min_workers = 5;
  expect_error(more, "scaling_config.min_workers: 5 is not in 1..num_workers (4, the most)");
  ScalingConfig list = c;
  list.rank_resources.clear();
  list.resources_per_worker_list = {{{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}};
  expect_error(list, "scaling_config.min_workers: an elastic job's workers are alike");
  ScalingConfig late = c;
  late.rank_resources = {{3, {{"memory", kGi}}}};
  expect_error(late,
               "scaling_config.rank_resources[3]: an elastic job shapes only the ranks it "
               "always has, 0..1");
  ScalingConfig racked = c;
  racked.topology.required = "berth.io/topology-rack";
  expect_error(racked, "scaling_config.topology: not yet for elastic jobs");
}

}  // namespace
}  // namespace berth
