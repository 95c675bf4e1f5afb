#include "client/format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kGi = 1 << 30;

v1::Bundle MakeBundle(std::initializer_list<std::pair<const char*, double>> amounts) {
  v1::Bundle bundle;
  for (const auto& [name, amount] : amounts)
    (*bundle.mutable_resources()->mutable_amounts())[name] = amount;
  return bundle;
}

TEST(FormatTest, ResourcesAreSortedWithMemoryInBinaryUnits) {
  EXPECT_EQ(
      FormatResources(MakeBundle({{"memory", 16 * kGi}, {"GPU", 0.5}, {"CPU", 2}}).resources()),
      "{CPU: 2, GPU: 0.5, memory: 16Gi}");
}

TEST(FormatTest, BundleShowsItsSelector) {
  v1::Bundle bundle = MakeBundle({{"GPU", 1}});
  v1::LabelSelectorRequirement* in = bundle.mutable_selector()->add_requirements();
  in->set_key("zone");
  in->set_op(v1::LABEL_OPERATOR_IN);
  in->add_values("a");
  in->add_values("b");
  v1::LabelSelectorRequirement* absent = bundle.mutable_selector()->add_requirements();
  absent->set_key("spot");
  absent->set_op(v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(FormatBundle(bundle), "{GPU: 1; zone in (a,b), !spot}");
}

TEST(FormatTest, NodesTableHasFreeOverTotal) {
  v1::ListNodesResponse response;
  v1::NodeInfo* node = response.add_nodes();
  node->set_node_id("node-a");
  node->set_state(v1::NODE_STATE_ALIVE);
  node->set_address("10.0.0.1:6381");
  node->set_metrics_address("10.0.0.1:9465");
  (*node->mutable_total()->mutable_amounts())["GPU"] = 4;
  (*node->mutable_total()->mutable_amounts())["CPU"] = 16;
  (*node->mutable_total()->mutable_amounts())["memory"] = 128 * kGi;
  (*node->mutable_available()->mutable_amounts())["GPU"] = 3;
  (*node->mutable_available()->mutable_amounts())["CPU"] = 14.5;
  (*node->mutable_available()->mutable_amounts())["memory"] = 100 * kGi;
  (*node->mutable_labels())["berth.io/accelerator-type"] = "A10G";
  (*node->mutable_labels())["zone"] = "a";
  v1::NodeInfo* cpu_node = response.add_nodes();
  cpu_node->set_node_id("node-b");
  cpu_node->set_state(v1::NODE_STATE_DRAINING);
  (*cpu_node->mutable_total()->mutable_amounts())["CPU"] = 8;

  v1::UnhealthyGpu* sick = node->add_unhealthy_gpus();
  sick->set_index(2);
  sick->set_reason("XID 79, GPU has fallen off the bus");
  sick->set_since_unix_ms(1'800'000'000'000);

  const std::string table = FormatNodes(response);
  EXPECT_THAT(table,
              ContainsRegex("^NODE_ID +STATE +ADDRESS +ACCELERATOR +GPU +HEALTHY +CPU +MEMORY "
                            "+METRICS +LABELS\n"));
  EXPECT_THAT(table,
              ContainsRegex("node-a +ALIVE +10.0.0.1:6381 +A10G +3/4 +3/4 +14.5/16 +100/128Gi "
                            "+10.0.0.1:9465 +berth.io/accelerator-type=A10G,zone=a\n"));
  EXPECT_THAT(table, ContainsRegex("node-b +DRAINING +- +- +- +- +0/8 +- +- +-\n"));
  EXPECT_THAT(table, ContainsRegex("\nnode-a GPU 2 unhealthy since .*: XID 79, GPU has fallen off "
                                   "the bus\n"));
}

v1::PlacementGroupInfo PendingGroup() {
  v1::PlacementGroupInfo group;
  group.set_placement_group_id("pg-1");
  group.set_name("train");
  group.set_strategy(v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  group.set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  *group.add_bundles() = MakeBundle({{"GPU", 2}, {"CPU", 4}});
  *group.add_bundles() = MakeBundle({{"GPU", 0.25}});
  group.set_pending_reason("waiting for resources: bundle 0 needs GPU: 2");
  return group;
}

TEST(FormatTest, PlacementGroupListRows) {
  v1::ListPlacementGroupsResponse response;
  *response.add_placement_groups() = PendingGroup();
  v1::PlacementGroupInfo* anonymous = response.add_placement_groups();
  anonymous->set_placement_group_id("pg-2");
  anonymous->set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
  anonymous->set_infeasible(true);
  *anonymous->add_bundles() = MakeBundle({{"GPU", 64}});

  const std::string table = FormatPlacementGroups(response);
  EXPECT_THAT(table, ContainsRegex("^ID +NAME +STRATEGY +STATE +BUNDLES\n"));
  EXPECT_THAT(table, ContainsRegex("pg-1 +train +STRICT_SPREAD +PENDING +2\n"));
  // UNSPECIFIED strategy means PACK.
  EXPECT_THAT(table, ContainsRegex("pg-2 +- +PACK +PENDING \\(infeasible\\) +1\n"));
}

TEST(FormatTest, PendingGroupShowsReasonAndUnplacedBundles) {
  const std::string text = FormatPlacementGroup(PendingGroup());
  EXPECT_THAT(text, ContainsRegex("state: +PENDING\n"));
  EXPECT_THAT(text, ContainsRegex("reason: +waiting for resources: bundle 0 needs GPU: 2\n"));
  EXPECT_THAT(text, ContainsRegex("BUNDLE +NODE +GPUS +RESOURCES +SELECTOR\n"));
  EXPECT_THAT(text, ContainsRegex("0 +- +- +\\{CPU: 4, GPU: 2\\} +-\n"));
}

TEST(FormatTest, CreatedGroupShowsNodesAndGpuIds) {
  v1::PlacementGroupInfo group = PendingGroup();
  group.set_state(v1::PLACEMENT_GROUP_STATE_CREATED);
  group.set_pending_reason("");
  v1::BundleLocation* first = group.add_locations();
  first->set_bundle_index(0);
  first->set_node_id("node-a");
  for (uint32_t gpu : {2, 3}) {
    v1::GpuShare* share = first->add_gpus();
    share->set_index(gpu);
    share->set_units(10000);
  }
  v1::BundleLocation* second = group.add_locations();
  second->set_bundle_index(1);
  second->set_node_id("node-b");
  v1::GpuShare* quarter = second->add_gpus();
  quarter->set_index(0);
  quarter->set_units(2500);

  const std::string text = FormatPlacementGroup(group);
  EXPECT_THAT(text, Not(HasSubstr("reason:")));
  EXPECT_THAT(text, ContainsRegex("0 +node-a +2,3 +\\{CPU: 4, GPU: 2\\}"));
  EXPECT_THAT(text, ContainsRegex("1 +node-b +0\\(0.25\\) +\\{GPU: 0.25\\}"));
}

TEST(FormatTest, PendingDemandLineIsLikeRayStatus) {
  v1::PendingDemand demand;
  for (int i = 0; i < 8; ++i) *demand.add_shape() = MakeBundle({{"GPU", 1}});
  demand.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
  demand.set_count(2);
  EXPECT_EQ(FormatPendingDemand(demand), "{GPU: 1} * 8 (PACK): 2+ pending");

  v1::PendingDemand mixed;
  *mixed.add_shape() = MakeBundle({{"CPU", 1}, {"GPU", 1}});
  *mixed.add_shape() = MakeBundle({{"GPU", 1}});
  *mixed.add_shape() = MakeBundle({{"GPU", 1}});
  mixed.set_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  mixed.set_count(1);
  mixed.set_infeasible(true);
  EXPECT_EQ(FormatPendingDemand(mixed),
            "{CPU: 1, GPU: 1} * 1, {GPU: 1} * 2 (STRICT_PACK): 1+ pending, infeasible");
}

TEST(FormatTest, ClusterStatusHasTotalsAcceleratorsAndDemand) {
  v1::GetClusterStatusResponse status;
  status.set_alive_nodes(3);
  status.set_draining_nodes(1);
  (*status.mutable_total()->mutable_amounts())["GPU"] = 8;
  (*status.mutable_total()->mutable_amounts())["memory"] = 256 * kGi;
  (*status.mutable_total()->mutable_amounts())["accelerator_type:A10G"] = 2;
  (*status.mutable_available()->mutable_amounts())["GPU"] = 1.5;
  v1::AcceleratorTypeCount* a10g = status.add_accelerators();
  a10g->set_accelerator_type("A10G");
  a10g->set_nodes(2);
  a10g->set_gpus_total(8);
  a10g->set_gpus_available(1.5);
  (*a10g->mutable_total()->mutable_amounts())["CPU"] = 16;
  (*a10g->mutable_total()->mutable_amounts())["memory"] = 128 * kGi;
  (*a10g->mutable_available()->mutable_amounts())["CPU"] = 10;
  (*a10g->mutable_available()->mutable_amounts())["memory"] = 96 * kGi;
  v1::PendingDemand* demand = status.add_pending_demand();
  *demand->add_shape() = MakeBundle({{"GPU", 1}});
  demand->set_strategy(v1::PLACEMENT_STRATEGY_SPREAD);
  demand->set_count(4);
  demand->set_reason("waiting for resources");

  const std::string text = FormatClusterStatus(status);
  EXPECT_THAT(text, HasSubstr("Nodes: 3 alive, 1 draining, 0 dead\n"));
  EXPECT_THAT(text, ContainsRegex("GPU +1.5 +8\n"));
  EXPECT_THAT(text, ContainsRegex("memory +0 +256Gi\n"));
  EXPECT_THAT(text, Not(HasSubstr("accelerator_type:")));
  EXPECT_THAT(text, ContainsRegex("A10G +2 +1.5 +8 +6/16 +32/128Gi\n"));
  EXPECT_THAT(text, HasSubstr("  {GPU: 1} * 1 (SPREAD): 4+ pending\n    waiting for resources\n"));
  status.set_unhealthy_gpus(2);
  EXPECT_THAT(
      FormatClusterStatus(status),
      HasSubstr("Nodes: 3 alive, 1 draining, 0 dead; 2 unhealthy GPU(s) (see `berth nodes`)\n"));
}

TEST(FormatTest, ClusterStatusWithoutDemandSaysNone) {
  EXPECT_THAT(FormatClusterStatus(v1::GetClusterStatusResponse()),
              HasSubstr("Pending demand:\n  (none)\n"));
}

TEST(FormatTest, ClusterStatusShowsThePlacementScorerAndWhatItLearned) {
  v1::GetClusterStatusResponse status;
  v1::PlacementScorerStatus* scorer = status.mutable_placement_scorer();
  scorer->set_name("fragmentation");
  scorer->set_active("builtin");
  scorer->set_window_tasks(12);
  scorer->set_window_shapes(3);
  EXPECT_THAT(FormatClusterStatus(status),
              HasSubstr("Placement scorer: fragmentation (builtin meanwhile: 12 GPU tasks seen, "
                        "too few to learn from)\n"));
  scorer->set_active("fragmentation");
  scorer->set_builds(2);
  EXPECT_THAT(FormatClusterStatus(status),
              HasSubstr("Placement scorer: fragmentation, learned from 12 GPU tasks of 3 shapes, "
                        "built 2 times\n"));
  scorer->set_window_tasks(1);
  scorer->set_window_shapes(1);
  scorer->set_builds(1);
  EXPECT_THAT(FormatClusterStatus(status),
              HasSubstr("learned from 1 GPU task of 1 shape, built 1 time\n"));
  scorer->set_name("first-fit");
  scorer->set_active("first-fit");
  scorer->set_window_tasks(0);
  scorer->set_builds(0);
  EXPECT_THAT(FormatClusterStatus(status), HasSubstr("Placement scorer: first-fit\n"));
}

TEST(FormatTest, ClusterStatusShowsAutoscalerAndMetrics) {
  v1::GetClusterStatusResponse status;
  status.set_metrics_address("127.0.0.1:9464");
  v1::AutoscalerStatus* autoscaler = status.mutable_autoscaler();
  autoscaler->set_reported_unix_ms(1);
  v1::NodePoolStatus* pool = autoscaler->add_pools();
  pool->set_name("a10g");
  pool->set_accelerator_type("A10G");
  pool->set_nodes(1);
  pool->set_target_nodes(2);
  pool->set_max_nodes(4);
  v1::AutoscalerAction* action = autoscaler->add_recent_actions();
  action->set_kind(v1::AUTOSCALER_ACTION_KIND_SCALE_UP);
  action->set_pool("a10g");
  action->set_target_nodes(2);
  action->set_reason("1 pending gang(s)");
  v1::UnsatisfiableDemand* never = autoscaler->add_unsatisfiable();
  *never->add_shape() = MakeBundle({{"GPU", 16}});
  never->set_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  never->set_reason("no pool has 16 GPUs per node");

  const std::string text = FormatClusterStatus(status);
  EXPECT_THAT(text, ContainsRegex("a10g +A10G +1 +2 +0 +4\n"));
  EXPECT_THAT(text, HasSubstr("SCALE_UP a10g -> 2 node(s): 1 pending gang(s)\n"));
  EXPECT_THAT(text, HasSubstr("no pool can hold {GPU: 16} * 1 (STRICT_PACK)"));
  EXPECT_THAT(text, HasSubstr("no pool has 16 GPUs per node"));
  EXPECT_THAT(text, HasSubstr("Metrics: http://127.0.0.1:9464/metrics"));
}

// A 4-worker job on two nodes after one restart, rank 0 on node-a.
v1::TrainJobInfo RunningJob() {
  v1::TrainJobInfo job;
  job.set_job_id("job-1");
  job.mutable_spec()->set_name("mnist");
  job.mutable_spec()->mutable_scaling_config()->set_num_workers(4);
  job.mutable_spec()->mutable_failure_config()->set_max_failures(-1);
  job.set_state(v1::TRAIN_JOB_STATE_RUNNING);
  job.set_placement_group_id("pg-7");
  job.set_master_address("10.0.0.1:29500");
  job.set_attempt(1);
  job.set_failures(1);
  job.add_failure_causes("rank 1 (worker job-1-a0-r1 on node-b) exited with code 3");
  job.set_last_step(120);
  job.set_last_loss(0.431234);
  job.set_latest_checkpoint("/ckpt/job-1/step-100");
  job.set_latest_checkpoint_step(100);
  job.set_submitted_unix_ms(1700000000000);
  const struct {
    uint32_t rank, local_rank, node_rank, bundle;
    const char* node;
    std::vector<uint32_t> gpus;
  } workers[] = {{0, 0, 0, 0, "node-a", {0}},
                 {1, 1, 0, 2, "node-a", {1}},
                 {2, 0, 1, 1, "node-b", {0}},
                 {3, 1, 1, 3, "node-b", {1}}};
  for (const auto& w : workers) {
    v1::WorkerRank* rank = job.add_workers();
    rank->set_world_rank(w.rank);
    rank->set_local_rank(w.local_rank);
    rank->set_node_rank(w.node_rank);
    rank->set_local_world_size(2);
    rank->set_bundle_index(w.bundle);
    rank->set_node_id(w.node);
    for (uint32_t gpu : w.gpus) rank->add_gpu_indices(gpu);
    rank->set_worker_id(absl::StrCat("job-1-a1-r", w.rank));
  }
  return job;
}

TEST(FormatTest, TrainJobShowsFailuresCheckpointAndRankTable) {
  const std::string text = FormatTrainJob(RunningJob());
  EXPECT_THAT(text, ContainsRegex("^id: +job-1\n"));
  EXPECT_THAT(text, ContainsRegex("state: +RUNNING\n"));
  EXPECT_THAT(text, Not(HasSubstr("message:")));
  EXPECT_THAT(text, ContainsRegex("placement group: +pg-7\n"));
  EXPECT_THAT(text, ContainsRegex("master: +10.0.0.1:29500\n"));
  EXPECT_THAT(text, ContainsRegex("attempt: +1\n"));
  EXPECT_THAT(text, ContainsRegex("failures: +1 \\(max unlimited\\)\n"));
  EXPECT_THAT(text, ContainsRegex("failure 1: +rank 1 \\(worker job-1-a0-r1 on node-b\\) exited "
                                  "with code 3\n"));
  EXPECT_THAT(text, ContainsRegex("step: +120\nloss: +0.4312\n"));
  EXPECT_THAT(text, ContainsRegex("checkpoint: +/ckpt/job-1/step-100 \\(step 100\\)\n"));
  EXPECT_THAT(text, HasSubstr("submitted:        2023-11-14 22:13:20 UTC\n"));
  EXPECT_THAT(text, Not(HasSubstr("startup:")));  // the ranks have not joined yet
  // The rank table: ranks in order; bundles need not follow them.
  EXPECT_THAT(text, HasSubstr("\n\n"
                              "RANK  NODE    BUNDLE  LOCAL_RANK  NODE_RANK  GPUS  WORKER_ID\n"
                              "0     node-a  0       0           0          0     job-1-a1-r0\n"
                              "1     node-a  2       1           0          1     job-1-a1-r1\n"
                              "2     node-b  1       0           1          0     job-1-a1-r2\n"
                              "3     node-b  3       1           1          1     job-1-a1-r3\n"));
}

TEST(FormatTest, TrainJobSaysWhereACommandsRanksRun) {
  v1::TrainJobInfo job = RunningJob();
  v1::Entrypoint::Command& command = *job.mutable_spec()->mutable_entrypoint()->mutable_command();
  command.add_argv("python3");
  command.set_working_dir("/srv/train");
  EXPECT_THAT(FormatTrainJob(job),
              HasSubstr("working dir:      /srv/train (the same path on every node: a shared "
                        "filesystem)\n"));
  command.clear_working_dir();
  EXPECT_THAT(FormatTrainJob(job),
              HasSubstr("working dir:      each node's own folder for the job (not shared)\n"));
  job.mutable_spec()->mutable_entrypoint()->mutable_builtin_trainer();
  EXPECT_THAT(FormatTrainJob(job), Not(HasSubstr("working dir:")));
}

TEST(FormatTest, TrainJobShowsItsStartupStageByStage) {
  v1::TrainJobInfo job = RunningJob();
  v1::StartupTimeline& t = *job.mutable_startup();
  t.set_submitted_unix_us(1700000000000000);
  t.set_placed_unix_us(1700000000012400);
  t.set_workers_started_unix_us(1700000000043000);
  t.set_ranks_running_unix_us(1700000000843000);
  t.set_group_joined_unix_us(1700000000900000);
  EXPECT_THAT(FormatTrainJob(job),
              HasSubstr("startup:          900 ms (placement 12 ms, launch 31 ms, process start "
                        "800 ms, rendezvous 57 ms)\n"));
  // A restart counts from the restart: 10 s of the first attempt are not placement.
  t.set_restarted_unix_us(1700000000002400);
  EXPECT_THAT(FormatTrainJob(job),
              HasSubstr("startup:          898 ms (placement 10 ms, launch 31 ms, process start "
                        "800 ms, rendezvous 57 ms)\n"));
}

TEST(FormatTest, PendingTrainJobShowsItsMessageAndNoRanks) {
  v1::TrainJobInfo job;
  job.set_job_id("job-2");
  job.set_state(v1::TRAIN_JOB_STATE_PENDING);
  job.set_message("waiting for resources: bundle 0 needs GPU: 8");
  job.mutable_spec()->mutable_entrypoint()->mutable_command()->add_argv("python");
  const std::string text = FormatTrainJob(job);
  EXPECT_THAT(text, ContainsRegex("message: +waiting for resources: bundle 0 needs GPU: 8\n"));
  EXPECT_THAT(text, ContainsRegex("failures: +0 \\(max 0\\)\n"));
  EXPECT_THAT(text, ContainsRegex("step: +-\nloss: +-\ncheckpoint: +-\n"));
  EXPECT_THAT(text, ContainsRegex("RANK +NODE +BUNDLE +LOCAL_RANK +NODE_RANK +GPUS +WORKER_ID\n$"));
}

TEST(FormatTest, TrainJobListRows) {
  v1::ListTrainJobsResponse response;
  *response.add_jobs() = RunningJob();
  v1::TrainJobInfo* pending = response.add_jobs();
  pending->set_job_id("job-2");
  pending->set_state(v1::TRAIN_JOB_STATE_PENDING);
  const std::string table = FormatTrainJobs(response);
  EXPECT_THAT(table,
              ContainsRegex("^JOB_ID +NAME +STATE +WORKERS +FAILURES +STEP +LOSS +SUBMITTED\n"));
  EXPECT_THAT(table,
              ContainsRegex("job-1 +mnist +RUNNING +4 +1 +120 +0.4312 +2023-11-14 22:13:20 UTC\n"));
  // num_workers 0 is the default, 1; no report yet shows as "-".
  EXPECT_THAT(table, ContainsRegex("job-2 +- +PENDING +1 +0 +- +- +-\n"));
}

TEST(FormatTest, TrainProgressLine) {
  v1::TrainJobInfo job = RunningJob();
  EXPECT_EQ(FormatTrainProgress(job), "step 120 loss 0.4312 [RUNNING]");
  job.set_last_loss(1.5e-5);
  job.set_state(v1::TRAIN_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(FormatTrainProgress(job), "step 120 loss 1.5e-05 [SUCCEEDED]");
  v1::TrainJobInfo starting;
  starting.set_state(v1::TRAIN_JOB_STATE_STARTING);
  EXPECT_EQ(FormatTrainProgress(starting), "step - loss - [STARTING]");
}

TEST(FormatTest, JsonUsesProtoFieldNamesAndPrintsDefaults) {
  v1::WaitPlacementGroupReadyResponse response;
  response.mutable_placement_group()->set_placement_group_id("pg-1");
  absl::StatusOr<std::string> json = ToJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"placement_group_id\": \"pg-1\""));
  EXPECT_THAT(*json, HasSubstr("\"ready\": false"));
  EXPECT_EQ(json->back(), '\n');
}

}  // namespace
}  // namespace berth
