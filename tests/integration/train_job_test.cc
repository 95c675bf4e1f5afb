// Train jobs across real processes (train_job_fixture.h): placement, the env
// contract, user scripts, waiting, stop, logs, bad specs, a head restart,
// limits.
#include "absl/strings/str_cat.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

TEST_F(TrainJobTest, BuiltinWorkersTrainAsOneGroupWithRankZeroBesideTheTrainer) {
  v1::TrainJobSpec spec = GpuJob(4);
  (*spec.mutable_scaling_config()->mutable_trainer_resources()->mutable_amounts())["CPU"] = 1;
  (*spec.mutable_scaling_config()->mutable_trainer_resources()->mutable_amounts())["memory"] = kGi;
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(200);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_checkpoint_every_steps(50);
  const std::string id = Submit(spec);
  v1::TrainJobInfo info = WaitDone(id);
  ASSERT_EQ(info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << info.DebugString();
  ASSERT_EQ(info.workers_size(), 4);

  // Rank 0 is bundle 0; the trainer ran on its node, in its bundle.
  const v1::WorkerRank& rank0 = info.workers(0);
  EXPECT_EQ(rank0.bundle_index(), 0u);
  auto exits = Exits(id);
  const std::string trainer = id + "-a0-trainer";
  ASSERT_TRUE(exits.count(trainer)) << "no exit recorded for the trainer";
  EXPECT_EQ(exits[trainer].node_id(), rank0.node_id());
  EXPECT_EQ(exits[trainer].status().bundle_index(), 0u);
  // The others: the trainer's node first, then by GPU id; local ranks count up.
  std::map<std::string, uint32_t> local;
  for (int r = 0; r < 4; ++r) {
    const v1::WorkerRank& w = info.workers(r);
    EXPECT_EQ(w.world_rank(), static_cast<uint32_t>(r));
    EXPECT_EQ(w.local_rank(), local[w.node_id()]++) << "rank " << r;
    EXPECT_EQ(w.node_rank(), w.node_id() == rank0.node_id() ? 0u : 1u);
    EXPECT_EQ(w.local_world_size(), 2u);
    if (r > 0 && info.workers(r - 1).node_id() == w.node_id() && r - 1 > 0) {
      EXPECT_LT(info.workers(r - 1).gpu_indices(0), w.gpu_indices(0));
    }
  }
  EXPECT_EQ(info.workers(1).node_id(), rank0.node_id());

  // The Gloo group trained: loss fell 10x, and every rank ends identical.
  std::vector<std::pair<int, double>> losses = Losses(RankLog(info, 0));
  ASSERT_GE(losses.size(), 2u) << RankLog(info, 0) << RankLog(info, 0, ".err");
  EXPECT_LT(losses.back().second * 10, losses.front().second)
      << "first " << losses.front().second << " last " << losses.back().second;
  const std::string hash = ParamsHash(RankLog(info, 0));
  ASSERT_FALSE(hash.empty());
  for (int r = 1; r < 4; ++r) EXPECT_EQ(ParamsHash(RankLog(info, r)), hash) << "rank " << r;
  // The trainer relayed progress and a checkpoint to the head.
  EXPECT_GE(info.last_step(), 190u);
  EXPECT_GT(info.last_loss(), 0);
  EXPECT_FALSE(info.latest_checkpoint().empty());
  EXPECT_FALSE(ReadFileOrEmpty(info.latest_checkpoint()).empty());
  EXPECT_EQ(info.failures(), 0u);
  // The attempt's start-up, stage by stage, all on this machine's clock. A
  // rank's main() follows its StartWorker call by the load of libtorch.
  const v1::StartupTimeline& t = info.startup();
  EXPECT_GT(t.submitted_unix_us(), 0) << t.DebugString();
  EXPECT_LE(t.submitted_unix_us(), t.placed_unix_us()) << t.DebugString();
  EXPECT_LE(t.placed_unix_us(), t.workers_started_unix_us()) << t.DebugString();
  EXPECT_LE(t.workers_started_unix_us(), t.ranks_running_unix_us()) << t.DebugString();
  EXPECT_LE(t.ranks_running_unix_us(), t.group_joined_unix_us()) << t.DebugString();
  EXPECT_LE(t.group_joined_unix_us(), info.ended_unix_ms() * 1000) << t.DebugString();
}

TEST_F(TrainJobTest, EveryRankGetsTheEnvContract) {
  v1::TrainJobSpec spec = GpuJob(4);
  SetCommand(&spec, {"/bin/sh", "-c", "env | sort"}, {{"MY_FLAG", "1"}});
  const std::string id = Submit(spec);
  v1::TrainJobInfo info = WaitDone(id);
  ASSERT_EQ(info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << info.DebugString();
  const std::string master_port =
      info.master_address().substr(info.master_address().rfind(':') + 1);
  std::map<std::string, std::vector<uint32_t>> node_gpus;  // in local-rank order
  for (const auto& w : info.workers()) {
    for (uint32_t g : w.gpu_indices()) node_gpus[w.node_id()].push_back(g);
  }
  for (int r = 0; r < 4; ++r) {
    const v1::WorkerRank& w = info.workers(r);
    std::map<std::string, std::string> env = ParseEnv(RankLog(info, r));
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(w.local_rank()));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], std::to_string(w.local_world_size()));
    EXPECT_EQ(env["NODE_RANK"], std::to_string(w.node_rank()));
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], master_port);
    EXPECT_EQ(env["BERTH_JOB_ID"], id);
    EXPECT_EQ(env["BERTH_PLACEMENT_GROUP_ID"], info.placement_group_id());
    EXPECT_EQ(env["BERTH_BUNDLE_INDEX"], std::to_string(w.bundle_index()));
    EXPECT_EQ(env["BERTH_HEAD_ADDRESS"], cluster_->head_address());
    // Rank 0 hosts the store, in the script's own torch.
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(w.node_rank()));
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(r));
    EXPECT_EQ(env["ROLE_NAME"], "default");
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], id);
    EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env["BERTH_ATTEMPT"], "0");
    EXPECT_EQ(env["BERTH_NODE_ID"], w.node_id());
    // One error file per process, in the raylet's log folder.
    EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"],
              cluster_->log_dir(w.node_id()) + "/" + w.worker_id() + ".error.json");
    EXPECT_THAT(env["BERTH_REPORT_FILE"], HasSubstr(id));
    EXPECT_EQ(env["BERTH_LATEST_CHECKPOINT"], "");
    EXPECT_EQ(env["MY_FLAG"], "1");
    const auto& gpus = node_gpus[w.node_id()];
    std::string visible;
    for (uint32_t g : gpus) visible += (visible.empty() ? "" : ",") + std::to_string(g);
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], visible);
    // Device LOCAL_RANK of the list is the worker's own GPU.
    EXPECT_EQ(gpus[w.local_rank()], w.gpu_indices(0));
  }
}

// A user's PyTorch script (examples/ray-port: Debian's torch, Gloo) whose
// rank 1 raises at step 7 in the first attempt: the cause names the
// exception, not the broken connections its peers then die of; the job
// restarts and resumes from the checkpoint the script reported.
TEST_F(TrainJobTest, AUserScriptThatRaisesRestartsFromTheCheckpointItReported) {
  v1::TrainJobSpec spec = GpuJob(4);
  spec.mutable_failure_config()->set_max_failures(1);
  SetCommand(&spec,
             {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/resumable-ddp/train.py", "--steps", "20",
              "--checkpoint-every", "5", "--fail-at-step", "7"},
             {{"PYTHONPATH", BERTH_SOURCE_DIR "/python"}});
  const std::string id = Submit(spec);
  v1::TrainJobInfo info = WaitDone(id, seconds(180));
  ASSERT_EQ(info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << info.DebugString();
  EXPECT_EQ(info.failures(), 1u);
  ASSERT_EQ(info.failure_causes_size(), 1);
  EXPECT_THAT(info.failure_causes(0), HasSubstr("rank 1 ("));
  EXPECT_THAT(info.failure_causes(0), HasSubstr("exited with code 1: ValueError: boom at step 7"));
  EXPECT_THAT(info.failure_causes(0), HasSubstr("train.py"));  // the traceback follows
  EXPECT_EQ(info.attempt(), 1u);
  // berth.train.report() reached the head: the last step, its loss, the checkpoint.
  EXPECT_EQ(info.last_step(), 20u);
  EXPECT_TRUE(info.last_metrics().contains("loss")) << info.DebugString();
  EXPECT_THAT(info.latest_checkpoint(), HasSubstr("step-20"));
  // The second attempt resumed from the step-5 checkpoint, on every rank.
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(RankLog(info, r), HasSubstr("resuming from step 5"))
        << "rank " << r << RankLog(info, r, ".err");
  }
  const std::string hash = ParamsHash(RankLog(info, 0));
  ASSERT_FALSE(hash.empty());
  for (int r = 1; r < 4; ++r) EXPECT_EQ(ParamsHash(RankLog(info, r)), hash) << "rank " << r;
}

// Ranks that differ, on a user's PyTorch DDP script (Debian's torch, Gloo):
// rank_resources gives rank 0 200Gi without any trainer_resources, and a
// per-rank selector sends rank 2 to the nvme node; rank i is bundle i, so
// both land on the big node (ranks 0 and 2 there, 1 and 3 elsewhere), and
// the script's own RANK and device order agree with what berth reports.
TEST_F(TrainJobTest, RanksThatDifferGetTheirOwnBundlesAndTrainTogether) {
  cluster_->AddRaylet({"bigmem", 2, "A10G", 16, "256Gi", "disk=nvme"});
  v1::TrainJobSpec spec = GpuJob(4);
  v1::ScalingConfig* scaling = spec.mutable_scaling_config();
  (*scaling->mutable_trainer_resources()->mutable_amounts())["CPU"] = 0;  // no trainer resources
  (*(*scaling->mutable_rank_resources())[0].mutable_amounts())["memory"] = 200 * kGi;
  for (int r = 0; r < 4; ++r) {
    v1::LabelSelector* selector = scaling->add_label_selector();
    if (r != 2) continue;
    v1::LabelSelectorRequirement* nvme = selector->add_requirements();
    nvme->set_key("disk");
    nvme->set_op(v1::LABEL_OPERATOR_IN);
    nvme->add_values("nvme");
  }
  SetCommand(&spec, {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/pytorch-ddp/train.py",
                     "--steps", "20"});
  const std::string id = Submit(spec);
  v1::TrainJobInfo info = WaitDone(id, seconds(180));
  ASSERT_EQ(info.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << info.DebugString();
  ASSERT_EQ(info.workers_size(), 4);
  for (int r = 0; r < 4; ++r) {
    const v1::WorkerRank& w = info.workers(r);
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(w.world_rank(), static_cast<uint32_t>(r));
    EXPECT_EQ(w.bundle_index(), static_cast<uint32_t>(r));
    EXPECT_EQ(w.node_id() == "bigmem", r == 0 || r == 2);
    // The script's own view: torch's rank, and its LOCAL_RANK.
    EXPECT_THAT(RankLog(info, r), HasSubstr(absl::StrCat("rank ", r, "/4 local_rank ",
                                                         w.local_rank(), " backend gloo")));
  }
  // On the big node rank 0 is local rank 0 on the lower GPU, rank 2 local 1.
  EXPECT_EQ(info.workers(0).node_rank(), 0u);
  EXPECT_EQ(info.workers(0).local_rank(), 0u);
  EXPECT_EQ(info.workers(2).local_rank(), 1u);
  EXPECT_LT(info.workers(0).gpu_indices(0), info.workers(2).gpu_indices(0));
  const std::string hash = ParamsHash(RankLog(info, 0));
  ASSERT_FALSE(hash.empty()) << RankLog(info, 0) << RankLog(info, 0, ".err");
  for (int r = 1; r < 4; ++r) EXPECT_EQ(ParamsHash(RankLog(info, r)), hash) << "rank " << r;
}

// Ray Train V2's num_workers=(2, 4) on a real DDP script that checkpoints
// (examples/ray-port): room for 2 workers of 2 GPUs (n0, n1), then a 4-GPU
// raylet joins and the job grows at its next checkpoint, then that raylet is
// killed and the job shrinks back instead of failing, and finishes.
TEST_F(TrainJobTest, AnElasticJobGrowsWhenANodeJoinsShrinksWhenItDiesAndSucceeds) {
  v1::TrainJobSpec spec = GpuJob(4);
  spec.mutable_scaling_config()->set_min_workers(2);
  (*spec.mutable_scaling_config()->mutable_resources_per_worker()->mutable_amounts())["GPU"] = 2;
  SetCommand(&spec,
             {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/resumable-ddp/train.py", "--steps", "80",
              "--checkpoint-every", "5", "--step-seconds", "0.25"},
             {{"PYTHONPATH", BERTH_SOURCE_DIR "/python"}});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(60)))
      << Get(id).DebugString();
  EXPECT_EQ(Get(id).workers_size(), 2);
  ASSERT_EQ(Get(id).elastic_group_ids_size(), 2);
  // The two waiting workers are pending demand an autoscaler sees.
  v1::GetClusterStatusResponse status;
  ASSERT_TRUE(cluster_->cluster().GetClusterStatus(Context().get(), {}, &status).ok());
  ASSERT_EQ(status.pending_demand_size(), 1) << status.DebugString();
  EXPECT_EQ(status.pending_demand(0).count(), 2u) << status.DebugString();

  cluster_->AddRaylet({"n2", 4, "A10G", 8, "32Gi"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const v1::TrainJobInfo info = Get(id);
        return info.state() == v1::TRAIN_JOB_STATE_RUNNING && info.workers_size() == 4;
      },
      seconds(60)))
      << Get(id).DebugString();
  v1::TrainJobInfo grown = Get(id);
  ASSERT_EQ(grown.resizes_size(), 1);
  EXPECT_EQ(grown.resizes(0).from(), 2u);
  EXPECT_EQ(grown.resizes(0).to(), 4u);
  EXPECT_THAT(grown.resizes(0).reason(), HasSubstr("2 more worker(s) placed"));
  EXPECT_EQ(grown.workers(3).node_id(), "n2");
  // It resumed from the checkpoint it grew at, with the larger world.
  ASSERT_TRUE(WaitUntil([&] { return RankLog(Get(id), 0).find("resuming") != std::string::npos; },
                        seconds(30)))
      << Get(id).DebugString() << RankLog(Get(id), 0) << RankLog(Get(id), 0, ".err");

  cluster_->KillRaylet("n2", SIGKILL);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const v1::TrainJobInfo info = Get(id);
        return info.state() == v1::TRAIN_JOB_STATE_RUNNING && info.workers_size() == 2 &&
               info.resizes_size() == 2;
      },
      seconds(60)))
      << Get(id).DebugString();
  v1::TrainJobInfo done = WaitDone(id, seconds(120));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 0u);
  ASSERT_EQ(done.resizes_size(), 2);
  EXPECT_EQ(done.resizes(1).from(), 4u);
  EXPECT_EQ(done.resizes(1).to(), 2u);
  EXPECT_THAT(done.resizes(1).reason(), HasSubstr("node n2 died"));
  EXPECT_THAT(RankLog(done, 0), HasSubstr("resuming from step"));
  // Every group is gone with the job.
  for (const std::string& group : done.elastic_group_ids()) {
    v1::GetPlacementGroupRequest get;
    get.set_placement_group_id(group);
    v1::GetPlacementGroupResponse pg;
    ASSERT_TRUE(cluster_->groups().GetPlacementGroup(Context().get(), get, &pg).ok());
    EXPECT_EQ(pg.placement_group().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  }
}

// num_workers (2, 4) of one GPU, SPREAD: the job's own two bundles on n0
// and n1. n1 is killed: the job goes on with what n0 holds (rank 0's bundle
// and an elastic worker) instead of waiting or failing (max_failures 0);
// a new raylet takes the lost bundles and the job grows back; SUCCEEDED.
TEST_F(TrainJobTest, AnElasticJobThatLosesANodeOfItsOwnGroupShrinksAndGrowsBack) {
  v1::TrainJobSpec spec = GpuJob(4);
  spec.mutable_scaling_config()->set_min_workers(2);
  spec.mutable_scaling_config()->set_placement_strategy(v1::PLACEMENT_STRATEGY_SPREAD);
  spec.mutable_failure_config()->set_max_failures(0);
  SetCommand(&spec,
             {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/resumable-ddp/train.py", "--steps", "120",
              "--checkpoint-every", "5", "--step-seconds", "0.25"},
             {{"PYTHONPATH", BERTH_SOURCE_DIR "/python"}});
  const std::string id = Submit(spec);
  auto running = [&](int workers) {
    return WaitUntil(
        [&] {
          const v1::TrainJobInfo info = Get(id);
          return info.state() == v1::TRAIN_JOB_STATE_RUNNING && info.workers_size() == workers;
        },
        seconds(90));
  };
  ASSERT_TRUE(running(4)) << Get(id).DebugString();
  const v1::TrainJobInfo full = Get(id);
  EXPECT_EQ(full.workers(0).node_id(), "n0");
  const int resizes = full.resizes_size();  // 2 -> 4 if it started before its elastic groups

  cluster_->KillRaylet("n1", SIGKILL);
  ASSERT_TRUE(running(2)) << Get(id).DebugString();
  v1::TrainJobInfo shrunk = Get(id);
  EXPECT_EQ(shrunk.failures(), 0u);
  ASSERT_EQ(shrunk.resizes_size(), resizes + 1) << shrunk.DebugString();
  EXPECT_EQ(shrunk.resizes(resizes).from(), 4u);
  EXPECT_EQ(shrunk.resizes(resizes).to(), 2u);
  EXPECT_THAT(shrunk.resizes(resizes).reason(), HasSubstr("node n1 died"));
  for (const v1::WorkerRank& w : shrunk.workers()) EXPECT_EQ(w.node_id(), "n0");

  cluster_->AddRaylet({"n2", 2, "A10G", 8, "32Gi"});
  ASSERT_TRUE(running(4)) << Get(id).DebugString();
  v1::TrainJobInfo done = WaitDone(id, seconds(180));
  ASSERT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.failures(), 0u);
  // It grows back in one step, or two when one of n2's bundles is placed
  // before the other; a loaded machine may add a node's missed heartbeats.
  ASSERT_GE(done.resizes_size(), resizes + 2) << done.DebugString();
  const v1::ResizeEvent& last = done.resizes(done.resizes_size() - 1);
  EXPECT_EQ(last.to(), 4u) << done.DebugString();
  EXPECT_THAT(last.reason(), HasSubstr("more worker(s) placed")) << done.DebugString();
  std::set<std::string> nodes;
  for (const v1::WorkerRank& w : done.workers()) nodes.insert(w.node_id());
  EXPECT_THAT(nodes, ::testing::ElementsAre("n0", "n2"));
  EXPECT_THAT(RankLog(done, 0), HasSubstr("resuming from step"));
}

// Racks a (2 GPUs) and b (4 GPUs) beside the fixture's unlabelled n0, n1.
TEST_F(TrainJobTest, ARackGangNeverSpansRacksAndWaitsWithAReasonWhenNoRackFits) {
  const std::string rack = "berth.io/topology-rack";
  cluster_->AddRaylet({"a0", 2, "A10G", 8, "32Gi", rack + "=a"});
  cluster_->AddRaylet({"b0", 2, "A10G", 8, "32Gi", rack + "=b"});
  cluster_->AddRaylet({"b1", 2, "A10G", 8, "32Gi", rack + "=b"});
  auto racked = [&](int workers) {
    v1::TrainJobSpec spec = GpuJob(workers);
    spec.mutable_scaling_config()->mutable_topology()->set_required(rack);
    return spec;
  };
  // Only rack b holds 4 GPUs: a real DDP script trains there.
  v1::TrainJobSpec ddp = racked(4);
  SetCommand(&ddp, {"/usr/bin/python3", BERTH_SOURCE_DIR "/examples/pytorch-ddp/train.py",
                    "--steps", "40"});
  const std::string big = Submit(ddp);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(big).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(60)))
      << Get(big).DebugString();
  // 3 GPUs are free on n0 and n1 (4) but in no rack: the gang waits, saying so.
  v1::TrainJobSpec three = racked(3);
  SetCommand(&three, {"/bin/sh", "-c", "exit 0"});
  const std::string waiting = Submit(three);
  ASSERT_TRUE(WaitUntil([&] { return Get(waiting).message().find(rack) != std::string::npos; },
                        seconds(10)))
      << Get(waiting).DebugString();
  EXPECT_EQ(Get(waiting).state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_THAT(Get(waiting).message(), HasSubstr("topology.required " + rack));
  EXPECT_THAT(Get(waiting).message(), HasSubstr(rack + "=a has GPU: 2 free"));
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(Get(big).placement_group_id());
  v1::GetPlacementGroupResponse pg;
  ASSERT_TRUE(cluster_->groups().GetPlacementGroup(Context().get(), get, &pg).ok());
  EXPECT_EQ(pg.placement_group().topology_domain(), rack + "=b");

  v1::TrainJobInfo trained = WaitDone(big, seconds(180));
  ASSERT_EQ(trained.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << trained.DebugString();
  for (const v1::WorkerRank& w : trained.workers()) {
    EXPECT_TRUE(w.node_id() == "b0" || w.node_id() == "b1") << w.node_id();
  }
  const std::string hash = ParamsHash(RankLog(trained, 0));
  ASSERT_FALSE(hash.empty()) << RankLog(trained, 0) << RankLog(trained, 0, ".err");
  for (int r = 1; r < 4; ++r) EXPECT_EQ(ParamsHash(RankLog(trained, r)), hash) << "rank " << r;
  // Rack b is free again: the waiting gang goes there, whole.
  v1::TrainJobInfo after = WaitDone(waiting, seconds(60));
  ASSERT_EQ(after.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << after.DebugString();
  for (const v1::WorkerRank& w : after.workers()) {
    EXPECT_TRUE(w.node_id() == "b0" || w.node_id() == "b1") << w.node_id();
  }
  // A key no node carries is refused, and no job is made.
  v1::TrainJobSpec typo = GpuJob(2);
  typo.mutable_scaling_config()->mutable_topology()->set_required("rack");
  v1::SubmitTrainJobRequest request;
  *request.mutable_spec() = typo;
  request.set_request_id("typo");
  v1::SubmitTrainJobResponse response;
  grpc::Status refused = cluster_->jobs().SubmitTrainJob(Context().get(), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("spec.scaling_config.topology.required: no node carries label 'rack'"));
  v1::ListTrainJobsResponse jobs;
  ASSERT_TRUE(cluster_->jobs().ListTrainJobs(Context().get(), {}, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 2);
}

TEST_F(TrainJobTest, AJobTooLargeWaitsWithAReasonAndStartsWhenANodeJoins) {
  v1::TrainJobSpec spec = GpuJob(6);
  SetCommand(&spec, {"/bin/sh", "-c", "exit 0"});
  const std::string id = Submit(spec);
  // The placement core's reason, once the scheduler has tried the group.
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).message().find("GPU") != std::string::npos; }, seconds(5)))
      << Get(id).message();
  v1::TrainJobInfo pending = Get(id);
  EXPECT_EQ(pending.state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_THAT(pending.message(), HasSubstr("GPU"));
  v1::GetClusterStatusResponse status;
  ASSERT_TRUE(cluster_->cluster().GetClusterStatus(Context().get(), {}, &status).ok());
  ASSERT_EQ(status.pending_demand_size(), 1) << status.DebugString();
  EXPECT_EQ(status.pending_demand(0).shape_size(), 6) << status.DebugString();
  cluster_->AddRaylet({"n2", 2, "A10G", 8, "32Gi"});
  v1::TrainJobInfo done = WaitDone(id);
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
}

TEST_F(TrainJobTest, StopEndsEveryProcessAndRemovesTheGroup) {
  const std::string id = StartSleepingJob();
  StopJob(id);
  v1::TrainJobInfo info = WaitDone(id, seconds(15));
  EXPECT_EQ(info.state(), v1::TRAIN_JOB_STATE_STOPPED);
  EXPECT_EQ(Exits(id).size(), 3u);  // trainer + 2 ranks all ended
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(info.placement_group_id());
  v1::GetPlacementGroupResponse pg;
  ASSERT_TRUE(cluster_->groups().GetPlacementGroup(Context().get(), get, &pg).ok());
  EXPECT_EQ(pg.placement_group().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
}

TEST_F(TrainJobTest, LogsAreKeptPerRankAndStreamed) {
  v1::TrainJobSpec spec = GpuJob(3);
  SetCommand(&spec, {"/bin/sh", "-c", "echo hello from rank $RANK; echo warn $RANK >&2"});
  const std::string id = Submit(spec);
  ASSERT_EQ(WaitDone(id).state(), v1::TRAIN_JOB_STATE_SUCCEEDED);
  auto read_all = [&](std::optional<uint32_t> rank) {
    v1::StreamTrainJobLogsRequest request;
    request.set_job_id(id);
    if (rank) request.set_rank(*rank);
    auto context = Context();
    auto reader = cluster_->jobs().StreamTrainJobLogs(context.get(), request);
    std::map<std::pair<uint32_t, int>, std::string> out;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) out[{chunk.rank(), chunk.stream()}] += chunk.data();
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  auto all = read_all(std::nullopt);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ((all[{r, v1::LOG_STREAM_STDOUT}]), "hello from rank " + std::to_string(r) + "\n");
    EXPECT_EQ((all[{r, v1::LOG_STREAM_STDERR}]), "warn " + std::to_string(r) + "\n");
  }
  auto one = read_all(2u);
  EXPECT_EQ(one.size(), 2u);
  EXPECT_EQ((one[{2u, v1::LOG_STREAM_STDOUT}]), "hello from rank 2\n");
  v1::StreamTrainJobLogsRequest bad;
  bad.set_job_id(id);
  bad.set_rank(7);
  auto context = Context();
  auto reader = cluster_->jobs().StreamTrainJobLogs(context.get(), bad);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(TrainJobTest, BadSpecsNameTheField) {
  auto expect = [&](v1::TrainJobSpec spec, const std::string& field) {
    v1::SubmitTrainJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id("bad-" + std::to_string(next_++));
    v1::SubmitTrainJobResponse response;
    grpc::Status s = cluster_->jobs().SubmitTrainJob(Context().get(), request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << field << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(field));
  };
  v1::TrainJobSpec too_many = GpuJob(5000);  // unset (0) is one worker
  expect(too_many, "spec.scaling_config.num_workers: 5000 is not in 1..4096");
  v1::TrainJobSpec gpu_without_use = GpuJob(1);
  gpu_without_use.mutable_scaling_config()->set_use_gpu(false);
  (*gpu_without_use.mutable_scaling_config()
        ->mutable_resources_per_worker()
        ->mutable_amounts())["GPU"] = 1;
  expect(gpu_without_use, "spec.scaling_config.resources_per_worker[\"GPU\"]");
  v1::TrainJobSpec internal = GpuJob(1);
  (*internal.mutable_scaling_config()
        ->mutable_resources_per_worker()
        ->mutable_amounts())["accelerator_type:A10G"] = 0.001;
  expect(internal, "scaling_config.accelerator_type");
  v1::TrainJobSpec nan = GpuJob(1);
  (*nan.mutable_scaling_config()->mutable_trainer_resources()->mutable_amounts())["memory"] =
      std::nan("");
  expect(nan, "spec.scaling_config.trainer_resources[\"memory\"]");
  v1::TrainJobSpec accel_cpu = GpuJob(1);
  accel_cpu.mutable_scaling_config()->set_use_gpu(false);
  accel_cpu.mutable_scaling_config()->set_accelerator_type("A10G");
  expect(accel_cpu, "spec.scaling_config.accelerator_type");
  v1::TrainJobSpec reserved = GpuJob(1);
  SetCommand(&reserved, {"/bin/true"}, {{"RANK", "3"}});
  expect(reserved, "spec.entrypoint.command.env[\"RANK\"]");
  v1::TrainJobSpec strategy = GpuJob(1);
  strategy.mutable_scaling_config()->set_placement_strategy(static_cast<v1::PlacementStrategy>(42));
  expect(strategy, "spec.scaling_config.placement_strategy");
  v1::TrainJobSpec model = GpuJob(1);
  model.mutable_entrypoint()->mutable_builtin_trainer()->set_model("resnet");
  expect(model, "spec.entrypoint.builtin_trainer.model");
  v1::ListTrainJobsResponse all;
  ASSERT_TRUE(cluster_->jobs().ListTrainJobs(Context().get(), {}, &all).ok());
  EXPECT_EQ(all.jobs_size(), 0);
}

// The seed examples: 2 x A10G nodes (one with 256Gi) + 2 x T4 nodes.
TEST(TrainSeedExamplesTest, AcceleratorTypeAndABigMemoryRankZero) {
  LocalCluster cluster;
  cluster.AddRaylet({"t4-0", 2, "T4", 8, "32Gi"});
  cluster.AddRaylet({"t4-1", 2, "T4", 8, "32Gi"});
  cluster.AddRaylet({"a10g-0", 2, "A10G", 8, "32Gi"});
  cluster.AddRaylet({"a10g-bigmem", 2, "A10G", 64, "256Gi"});
  int next = 0;
  auto run = [&](v1::TrainJobSpec spec) {
    SetCommand(&spec, {"/bin/sh", "-c", "exit 0"});
    v1::SubmitTrainJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id("seed-" + std::to_string(next++));
    v1::SubmitTrainJobResponse response;
    EXPECT_TRUE(cluster.jobs().SubmitTrainJob(Context().get(), request, &response).ok());
    v1::TrainJobInfo info;
    WaitUntil(
        [&] {
          v1::GetTrainJobRequest get;
          get.set_job_id(response.job_id());
          v1::GetTrainJobResponse got;
          cluster.jobs().GetTrainJob(Context().get(), get, &got);
          info = got.job();
          return info.state() == v1::TRAIN_JOB_STATE_SUCCEEDED ||
                 info.state() == v1::TRAIN_JOB_STATE_FAILED;
        },
        seconds(30));
    return info;
  };
  v1::TrainJobSpec a10g = GpuJob(4);
  a10g.mutable_scaling_config()->set_accelerator_type("A10G");
  v1::TrainJobInfo first = run(a10g);
  ASSERT_EQ(first.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << first.DebugString();
  for (const auto& w : first.workers())
    EXPECT_THAT(w.node_id(), HasSubstr("a10g")) << w.DebugString();

  (*a10g.mutable_scaling_config()->mutable_trainer_resources()->mutable_amounts())["memory"] =
      200 * kGi;
  v1::TrainJobInfo second = run(a10g);
  ASSERT_EQ(second.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << second.DebugString();
  EXPECT_EQ(second.workers(0).node_id(), "a10g-bigmem");
  EXPECT_EQ(second.workers(0).bundle_index(), 0u);
  for (const auto& w : second.workers()) EXPECT_THAT(w.node_id(), HasSubstr("a10g"));
}

// A head killed with -9 while a job runs comes back with the job, which
// keeps its processes (same attempt, no failure) and finishes.
TEST_F(TrainJobTest, AJobKeepsRunningAcrossAHeadRestart) {
  v1::TrainJobSpec spec = GpuJob(2);
  SetCommand(&spec, {"/bin/sh", "-c", "sleep 4"});
  const std::string id = Submit(spec);
  ASSERT_TRUE(
      WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(10)));
  const v1::TrainJobInfo before = Get(id);

  cluster_->RestartHead(SIGKILL);

  const v1::TrainJobInfo after = Get(id);
  EXPECT_EQ(after.state(), v1::TRAIN_JOB_STATE_RUNNING);
  EXPECT_EQ(after.placement_group_id(), before.placement_group_id());
  ASSERT_EQ(after.workers_size(), 2);
  EXPECT_EQ(after.workers(0).worker_id(), before.workers(0).worker_id());
  v1::TrainJobInfo done = WaitDone(id, seconds(30));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(done.attempt(), 0u);
  EXPECT_EQ(done.failures(), 0u);
  // The group is released once the job ends, as without a restart.
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(done.placement_group_id());
  v1::GetPlacementGroupResponse pg;
  grpc::Status s = cluster_->groups().GetPlacementGroup(Context().get(), get, &pg);
  EXPECT_TRUE(!s.ok() || pg.placement_group().state() == v1::PLACEMENT_GROUP_STATE_REMOVED);
}

TEST(TrainJobLimitsTest, ActiveJobsAreBoundedByTheHeadsFlag) {
  LocalCluster cluster(100, {"--max-active-jobs", "1"});
  cluster.AddRaylet({"n0", 2, "A10G", 8, "32Gi"});
  auto submit = [&](const std::string& request_id, v1::SubmitTrainJobResponse* response) {
    v1::SubmitTrainJobRequest request;
    request.set_request_id(request_id);
    *request.mutable_spec() = GpuJob(1);
    SetCommand(request.mutable_spec(), {"/bin/sh", "-c", "sleep 30"});
    return cluster.jobs().SubmitTrainJob(Context().get(), request, response);
  };
  v1::SubmitTrainJobResponse first, second;
  ASSERT_TRUE(submit("one", &first).ok());
  grpc::Status refused = submit("two", &second);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-active-jobs 1"));
  v1::ListTrainJobsResponse listed;
  ASSERT_TRUE(cluster.jobs().ListTrainJobs(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
  // Once the first is stopped, there is room.
  v1::StopTrainJobRequest stop;
  stop.set_job_id(first.job_id());
  stop.set_request_id("stop-one");
  v1::StopTrainJobResponse stopped;
  ASSERT_TRUE(cluster.jobs().StopTrainJob(Context().get(), stop, &stopped).ok());
  EXPECT_TRUE(WaitUntil([&] { return submit("two", &second).ok(); }, seconds(15)));
}

}  // namespace
}  // namespace berth::testing
