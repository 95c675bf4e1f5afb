// The env contract of a job's processes, name by name, against what
// torchrun's agent sets (docs/train.md has the table), and the launcher
// command lines.
#include "train/worker_env.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

AttemptEnv Attempt() {
  AttemptEnv a;
  a.job_id = "job-1";
  a.placement_group_id = "pg-1";
  a.head_address = "10.0.0.1:6380";
  a.master_addr = "10.0.0.2";
  a.master_port = 29500;
  a.world_size = 4;
  a.num_nodes = 2;
  a.attempt = 3;
  a.max_restarts = 5;
  a.storage_path = "/ckpt/job-1";
  a.report_file = "/ckpt/job-1/reports/attempt-3.jsonl";
  a.latest_checkpoint = "/ckpt/job-1/step-40";
  a.cpus_per_worker = 2.5;
  return a;
}

RankedWorker Rank3() {
  RankedWorker r;
  r.world_rank = 3;
  r.local_rank = 1;
  r.node_rank = 1;
  r.local_world_size = 2;
  r.bundle_index = 2;
  r.node_id = "node-b";
  return r;
}

TEST(RankEnvTest, EveryNameOfTheContract) {
  const std::map<std::string, std::string> env = RankEnv(Attempt(), Rank3());
  const std::map<std::string, std::string> expected = {
      // torchrun's (local_elastic_agent.py), same meanings.
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "3"},
      {"ROLE_NAME", "default"},
      {"ROLE_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "10.0.0.2"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "3"},
      {"TORCHELASTIC_MAX_RESTARTS", "5"},
      {"TORCHELASTIC_RUN_ID", "job-1"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"OMP_NUM_THREADS", "2"},
      // Beyond torchrun.
      {"NODE_RANK", "1"},
      {"PYTHONUNBUFFERED", "1"},
      {"ACCELERATE_USE_CPU", "true"},  // a rank without GPUs
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"BERTH_JOB_ID", "job-1"},
      {"BERTH_PLACEMENT_GROUP_ID", "pg-1"},
      {"BERTH_BUNDLE_INDEX", "2"},
      {"BERTH_HEAD_ADDRESS", "10.0.0.1:6380"},
      {"BERTH_NODE_ID", "node-b"},
      {"BERTH_ATTEMPT", "3"},
      {"BERTH_STORAGE_PATH", "/ckpt/job-1"},
      {"BERTH_REPORT_FILE", "/ckpt/job-1/reports/attempt-3.jsonl"},
      {"BERTH_LATEST_CHECKPOINT", "/ckpt/job-1/step-40"},
  };
  EXPECT_EQ(env, expected);
}

TEST(RankEnvTest, AGpuRankLeavesAccelerateToFindItsGpus) {
  RankedWorker r = Rank3();
  r.gpu_ids = {1};
  EXPECT_EQ(RankEnv(Attempt(), r).count("ACCELERATE_USE_CPU"), 0u);
}

TEST(RankEnvTest, BuiltinRanksUseTheTrainersStore) {
  AttemptEnv a = Attempt();
  a.agent_store = true;
  EXPECT_EQ(RankEnv(a, Rank3()).at("TORCHELASTIC_USE_AGENT_STORE"), "True");
}

TEST(RankEnvTest, OmpThreadsIsAtLeastOne) {
  AttemptEnv a = Attempt();
  a.cpus_per_worker = 0.5;
  EXPECT_EQ(RankEnv(a, Rank3()).at("OMP_NUM_THREADS"), "1");
}

TEST(RankEnvTest, ANodeLauncherGetsNoRanksOfItsOwn) {
  const std::map<std::string, std::string> env = NodeEnv(Attempt(), "node-b", 1, 2, 2, false);
  for (const char* name : {"RANK", "LOCAL_RANK", "ROLE_RANK"})
    EXPECT_EQ(env.count(name), 0u) << name;
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "true");
  EXPECT_EQ(NodeEnv(Attempt(), "node-b", 1, 2, 2, true).count("ACCELERATE_USE_CPU"), 0u);
}

TEST(RankEnvTest, EverySetNameIsReservedOrDefaulted) {
  std::vector<std::string> known = ReservedEnvNames();
  known.insert(known.end(), DefaultedEnvNames().begin(), DefaultedEnvNames().end());
  for (const auto& [name, value] : RankEnv(Attempt(), Rank3())) {
    EXPECT_NE(std::find(known.begin(), known.end(), name), known.end()) << name;
  }
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "TORCHELASTIC_ERROR_FILE"}) {
    EXPECT_NE(std::find(ReservedEnvNames().begin(), ReservedEnvNames().end(), name),
              ReservedEnvNames().end());
  }
}

TEST(StoreHostTest, PythonInterpretersByName) {
  for (const char* p :
       {"python", "python3", "python3.11", "/usr/bin/python3", "/venv/bin/python"}) {
    EXPECT_TRUE(IsPythonInterpreter(p)) << p;
  }
  for (const char* p :
       {"torchrun", "/bin/sh", "python-config", "ipython", "/opt/python/bin/accelerate", ""}) {
    EXPECT_FALSE(IsPythonInterpreter(p)) << p;
  }
}

TEST(StoreHostTest, RunsTheJobsPythonWithPortAndWorldSize) {
  const std::vector<std::string> argv = StoreHostArgv("/venv/bin/python", 29500, 8);
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[0], "/venv/bin/python");
  EXPECT_EQ(argv[1], "-c");
  EXPECT_THAT(argv[2], HasSubstr("TCPStore(\"0.0.0.0\", port, world, True"));
  EXPECT_EQ(argv[3], "29500");
  EXPECT_EQ(argv[4], "8");
}

NodeLaunch Node1() { return NodeLaunch{1, 2, 2, 4, "10.0.0.2", 29500}; }

TEST(LauncherArgvTest, TorchrunFlagsFollowTheProgram) {
  absl::StatusOr<std::vector<std::string>> argv =
      LauncherArgv(Launcher::kTorchrun, {"torchrun", "train.py", "--epochs", "3"}, Node1());
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_THAT(*argv, ElementsAre("torchrun", "--nnodes=2", "--node_rank=1", "--nproc_per_node=2",
                                 "--master_addr=10.0.0.2", "--master_port=29500", "train.py",
                                 "--epochs", "3"));
  argv = LauncherArgv(Launcher::kTorchrun, {"python3", "-m", "torch.distributed.run", "train.py"},
                      Node1());
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_THAT(*argv, ElementsAre("python3", "-m", "torch.distributed.run", "--nnodes=2",
                                 "--node_rank=1", "--nproc_per_node=2", "--master_addr=10.0.0.2",
                                 "--master_port=29500", "train.py"));
}

TEST(LauncherArgvTest, AccelerateFlagsFollowLaunchWithTheTotalProcessCount) {
  absl::StatusOr<std::vector<std::string>> argv =
      LauncherArgv(Launcher::kAccelerate,
                   {"accelerate", "launch", "--config_file", "fsdp.yaml", "train.py"}, Node1());
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_THAT(*argv,
              ElementsAre("accelerate", "launch", "--num_machines=2", "--machine_rank=1",
                          "--num_processes=4", "--main_process_ip=10.0.0.2",
                          "--main_process_port=29500", "--config_file", "fsdp.yaml", "train.py"));
}

TEST(LauncherArgvTest, ArgvThatDoesNotFitIsRefusedNamingTheField) {
  const char* field = "spec.entrypoint.command.argv";
  absl::Status s = ValidateLauncherArgv(Launcher::kAccelerate, {"accelerate", "train.py"}, field);
  EXPECT_THAT(s.message(), HasSubstr("spec.entrypoint.command.argv: the accelerate launcher runs"));
  s = ValidateLauncherArgv(Launcher::kTorchrun, {"torchrun", "--nnodes=4", "train.py"}, field);
  EXPECT_THAT(s.message(),
              HasSubstr("spec.entrypoint.command.argv[1]: --nnodes is filled in by berth"));
  s = ValidateLauncherArgv(Launcher::kTorchrun, {"torchrun", "--node-rank", "1", "train.py"},
                           field);
  EXPECT_THAT(s.message(), HasSubstr("--node-rank is filled in by berth"));
  s = ValidateLauncherArgv(Launcher::kAccelerate,
                           {"accelerate", "launch", "--num_processes", "8", "t.py"}, field);
  EXPECT_THAT(s.message(), HasSubstr("argv[2]: --num_processes"));
  EXPECT_TRUE(ValidateLauncherArgv(Launcher::kNone, {"python3", "--nnodes=3"}, field).ok());
}

}  // namespace
}  // namespace berth
