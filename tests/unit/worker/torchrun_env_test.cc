#include "worker/torchrun_env.h"

#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> Contract() {
  return {
      {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}};
}

TEST(WorkerEnvTest, RequiredOnlyGetsSingleNodeDefaults) {
  absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(Contract()));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->rank, 1u);
  EXPECT_EQ(env->world_size, 4u);
  EXPECT_EQ(env->local_rank, 1u);
  EXPECT_EQ(env->local_world_size, 4u);
  EXPECT_EQ(env->node_rank, 0u);
  EXPECT_FALSE(env->cuda_visible_devices.has_value());
  EXPECT_FALSE(env->use_agent_store);
  EXPECT_EQ(env->restart_count, 0u);
  EXPECT_FALSE(env->crash_hook.has_value());
}

TEST(WorkerEnvTest, FullContract) {
  auto vars = Contract();
  vars["LOCAL_RANK"] = "0";
  vars["LOCAL_WORLD_SIZE"] = "2";
  vars["NODE_RANK"] = "1";
  vars["CUDA_VISIBLE_DEVICES"] = "2,3";
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars["TORCHELASTIC_RESTART_COUNT"] = "3";
  absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 0u);
  EXPECT_EQ(env->local_world_size, 2u);
  EXPECT_EQ(env->node_rank, 1u);
  EXPECT_EQ(*env->cuda_visible_devices, (std::vector<std::string>{"2", "3"}));
  EXPECT_TRUE(env->use_agent_store);
  EXPECT_EQ(env->restart_count, 3u);
}

TEST(WorkerEnvTest, EmptyCudaVisibleDevicesMeansNone) {
  auto vars = Contract();
  vars["CUDA_VISIBLE_DEVICES"] = "";
  absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_TRUE(env->cuda_visible_devices.has_value());
  EXPECT_TRUE(env->cuda_visible_devices->empty());
}

TEST(WorkerEnvTest, EachMissingRequiredVariableIsNamed) {
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    auto vars = Contract();
    vars.erase(name);
    absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
    ASSERT_FALSE(env.ok()) << name;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(env.status().message(), HasSubstr(name));
  }
}

TEST(WorkerEnvTest, BadValuesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"MASTER_PORT", "0"},
      {"MASTER_PORT", "65536"},
      {"MASTER_PORT", "http"},
      {"WORLD_SIZE", "0"},
      {"WORLD_SIZE", "-2"},
      {"RANK", "4"},
      {"RANK", "one"},
      {"LOCAL_WORLD_SIZE", "5"},
      {"LOCAL_RANK", "4"},
      {"NODE_RANK", "x"},
      {"TORCHELASTIC_USE_AGENT_STORE", "yes"},
      {"BERTH_TEST_CRASH_AT_STEP", "0"},
      {"BERTH_TEST_CRASH_RANK", "-1"},
  };
  for (const auto& [name, value] : bad) {
    auto vars = Contract();
    vars[name] = value;
    if (name == "BERTH_TEST_CRASH_RANK") vars["BERTH_TEST_CRASH_AT_STEP"] = "5";
    absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
    ASSERT_FALSE(env.ok()) << name << "=" << value;
    EXPECT_THAT(env.status().message(), HasSubstr(name)) << value;
  }
}

TEST(WorkerEnvTest, DefaultLocalRankMustFitLocalWorldSize) {
  auto vars = Contract();
  vars["LOCAL_WORLD_SIZE"] = "1";  // RANK=1 without LOCAL_RANK
  absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("LOCAL_RANK"));
}

TEST(WorkerEnvTest, CrashHook) {
  auto vars = Contract();
  vars["BERTH_TEST_CRASH_AT_STEP"] = "7";
  vars["BERTH_TEST_CRASH_ONCE_FILE"] = "/tmp/once";
  absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_TRUE(env->crash_hook.has_value());
  EXPECT_EQ(env->crash_hook->step, 7u);
  EXPECT_EQ(env->crash_hook->rank, 1u);
  EXPECT_EQ(env->crash_hook->once_file, "/tmp/once");
  vars["BERTH_TEST_CRASH_RANK"] = "0";
  env = ParseTorchrunEnv(Env(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->crash_hook->rank, 0u);
}

TEST(WorkerEnvTest, AgentStoreSpellings) {
  for (const auto& [value, expected] : std::vector<std::pair<std::string, bool>>{{"True", true},
                                                                                 {"true", true},
                                                                                 {"1", true},
                                                                                 {"False", false},
                                                                                 {"0", false},
                                                                                 {"", false}}) {
    auto vars = Contract();
    vars["TORCHELASTIC_USE_AGENT_STORE"] = value;
    absl::StatusOr<TorchrunEnv> env = ParseTorchrunEnv(Env(vars));
    ASSERT_TRUE(env.ok()) << value;
    EXPECT_EQ(env->use_agent_store, expected) << value;
  }
}

TEST(WorkerEnvTest, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("LocalHost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("node-127"));
}

TEST(WorkerEnvTest, LocalCudaDevice) {
  TorchrunEnv env;
  env.local_rank = 2;
  EXPECT_EQ(*LocalCudaDevice(env, 4), 2);  // all of the node's GPUs visible
  EXPECT_EQ(*LocalCudaDevice(env, 1), 0);  // one GPU per worker, as berth sets it
  absl::StatusOr<int> none = LocalCudaDevice(env, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(LocalCudaDevice(env, 0).ok());
}

}  // namespace
}  // namespace berth
