#include "client/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/processes.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(LocalClusterTest, ParsesNodeSpecsAndExpandsCounts) {
  absl::StatusOr<std::vector<NodeSpec>> specs = ParseNodeSpecs(R"(
- name: a10g
  gpus: 4
  accelerator_type: A10G
  cpus: 8
  memory: 256Gi
  labels: {zone: a}
  count: 2
- name: t4
  gpus: 2
  accelerator_type: T4
)",
                                                               "nodes.yaml");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].memory, "256Gi");
  EXPECT_EQ((*specs)[0].labels.at("zone"), "a");
  std::vector<std::pair<std::string, NodeSpec>> nodes = ExpandNodes(*specs);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].first, "a10g-1");
  EXPECT_EQ(nodes[1].first, "a10g-2");
  EXPECT_EQ(nodes[2].first, "t4");
  EXPECT_THAT(RayletFlags(nodes[0].first, nodes[0].second),
              ElementsAre("--node-id", "a10g-1", "--num-gpus", "4", "--accelerator-type", "A10G",
                          "--num-cpus", "8", "--memory", "256Gi", "--labels", "zone=a"));
}

TEST(LocalClusterTest, NodeSpecErrorsNameFileLineAndKey) {
  auto error = [](const std::string& text) {
    return std::string(ParseNodeSpecs(text, "n.yaml").status().message());
  };
  EXPECT_THAT(error("- name: a\n  gpu: 4\n"), HasSubstr("n.yaml:2: [0].gpu: unknown key"));
  EXPECT_THAT(error("- name: a\n  gpus: four\n"),
              HasSubstr("n.yaml:2: [0].gpus: must be an integer"));
  EXPECT_THAT(error("- name: a\n  count: 0\n"), HasSubstr("[0].count: must be >= 1"));
  EXPECT_THAT(error("- gpus: 1\n"), HasSubstr("[0].name: is required"));
  EXPECT_THAT(error("- name: a\n- name: a\n"), HasSubstr("\"a\" is used twice"));
  EXPECT_THAT(error("name: a\n"), HasSubstr("must be a non-empty list"));
  EXPECT_THAT(error("- [unclosed\n"), HasSubstr("not valid YAML"));
  EXPECT_EQ(LoadNodeSpecFile("/nonexistent/n.yaml").status().code(), absl::StatusCode::kNotFound);
}

class LocalClusterFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("berth-bin-" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Touch(const fs::path& path) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), 0755);
  }
  fs::path root_;
};

TEST_F(LocalClusterFilesTest, FindsBesideThenBuildTreeThenPath) {
  const std::string self = (root_ / "build/client/berth").string();
  Touch(root_ / "bin/berth-head");
  EXPECT_EQ(
      FindBinary("berth-head", "scheduler", self, "/nope:" + (root_ / "bin").string()).value(),
      (root_ / "bin/berth-head").string());
  Touch(root_ / "build/scheduler/berth-head");
  EXPECT_EQ(FindBinary("berth-head", "scheduler", self, (root_ / "bin").string()).value(),
            (root_ / "build/scheduler/berth-head").string());
  Touch(root_ / "build/client/berth-head");
  EXPECT_EQ(FindBinary("berth-head", "scheduler", self, "").value(),
            (root_ / "build/client/berth-head").string());
  absl::StatusOr<std::string> missing = FindBinary("berth-raylet", "raylet", self, "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("build/raylet/berth-raylet"));
}

TEST_F(LocalClusterFilesTest, StateFileRoundTrips) {
  LocalState state{"127.0.0.1:6380",
                   "/tmp/logs",
                   {{"head", "head", 42, "/bin/berth-head", "/tmp/logs/head.log"},
                    {"raylet", "node-1", 43, "/bin/berth-raylet", "/tmp/logs/node-1.log"}}};
  const std::string path = StateFilePath((root_ / "local").string());
  EXPECT_FALSE(ReadStateFile(path).value().has_value());
  ASSERT_TRUE(WriteStateFile(path, state).ok());
  std::optional<LocalState> read = ReadStateFile(path).value();
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(SerializeState(*read), SerializeState(state));
  EXPECT_EQ(read->processes[1].pid, 43);
  EXPECT_THAT(ParseState("{}", "x.json").status().message(),
              HasSubstr("x.json: not a berth state"));
}

TEST(LocalClusterTest, StateDirAndAddressDiscoveryOrder) {
  EXPECT_EQ(LocalStateDir(nullptr, 1000), "/tmp/berth-1000/local");
  EXPECT_EQ(LocalStateDir("/srv/b", 1000), "/srv/b/local");
  const std::optional<LocalState> local = LocalState{"127.0.0.1:7000", "", {}};
  EXPECT_EQ(ResolveHeadAddress("h:1", "h:2", local), "h:1");
  EXPECT_EQ(ResolveHeadAddress("", "h:2", local), "h:2");
  EXPECT_EQ(ResolveHeadAddress("", "", local), "127.0.0.1:7000");
  EXPECT_EQ(ResolveHeadAddress("", nullptr, std::nullopt), "127.0.0.1:6380");
}

TEST(LocalClusterTest, SpawnsStopsAndReportsExecFailures) {
  const std::string log =
      fs::temp_directory_path() / ("berth-spawn-" + std::to_string(getpid()) + ".log");
  absl::StatusOr<pid_t> pid = SpawnDaemon("/bin/sleep", {"30"}, log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const std::optional<uint64_t> started = ProcessStartTicks(*pid);
  ASSERT_TRUE(started.has_value());
  const LocalProcess real{"raylet", "s", *pid, fs::canonical("/bin/sleep").string(), log,
                          *started};
  EXPECT_TRUE(IsRunning(real));
  // A reused pid: another program, or the same program started later.
  EXPECT_FALSE(IsRunning(LocalProcess{"raylet", "s", *pid, "/not/sleep", log, *started}));
  LocalProcess later = real;
  later.start_ticks = *started + 1;
  EXPECT_FALSE(IsRunning(later));
  StopProcesses({later}, absl::Seconds(5));  // not ours: not signalled
  EXPECT_TRUE(IsRunning(real));
  StopProcesses({real}, absl::Seconds(5));
  EXPECT_FALSE(IsRunning(real));
  EXPECT_EQ(SpawnDaemon("/nonexistent/berth-head", {}, log).status().code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove(log);
}

}  // namespace
}  // namespace berth
