// WorkerCgroups on this machine's real cgroup v1 hierarchies (the tests run
// as root, as the raylet does where it confines workers), and the
// WorkerProcessManager confining real processes with them.
#include "raylet/worker_cgroups.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/files.h"
#include "common/working_dir_package.h"
#include "gtest/gtest.h"
#include "raylet/worker_processes.h"
#include "tests/unit/shell_worker.h"

namespace berth {
namespace {

TEST(ParseCgroupV1Test, FindsEachControllersMountAndThisProcesssPlaceInIt) {
  const std::string mounts =
      "proc /proc proc rw 0 0\n"
      "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
      "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
      "cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
      "cgroup /sys/fs/cgroup/devices cgroup rw,devices 0 0\n"
      "cgroup /sys/fs/cgroup/freezer cgroup rw,freezer 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
  const std::string self =
      "5:devices:/\n4:memory:/system.slice/berth-raylet.service\n3:pids:/\n"
      "2:cpu,cpuacct:/\n1:freezer:/\n0::/\n";
  std::map<std::string, CgroupHierarchy> parsed = ParseCgroupV1(mounts, self);
  ASSERT_EQ(parsed.size(), 5u);  // freezer is not one berth uses
  EXPECT_EQ(parsed["memory"].mount, "/sys/fs/cgroup/memory");
  EXPECT_EQ(parsed["memory"].own, "/system.slice/berth-raylet.service");
  EXPECT_EQ(parsed["cpu"].mount, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(parsed["cpuacct"].mount, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(parsed["devices"].own, "/");
}

TEST(ParseCgroupV1Test, AUnifiedOnlyNodeHasNoV1Hierarchies) {
  EXPECT_TRUE(ParseCgroupV1("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "0::/init.scope\n").empty());
}

TEST(WorkerCgroupsOpenTest, SaysWhyWithoutTheControllersItNeeds) {
  const std::string dir = testing::TempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/mounts", "cgroup /x/memory cgroup rw,memory 0 0\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/self", "4:memory:/\n").ok());
  absl::StatusOr<std::unique_ptr<WorkerCgroups>> cgroups =
      WorkerCgroups::Open({"n", dir, dir + "/mounts", dir + "/self"});
  ASSERT_FALSE(cgroups.ok());
  EXPECT_EQ(cgroups.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cgroups.status().message().find("no cgroup v1 cpu hierarchy"), std::string::npos)
      << cgroups.status();
}

// A node id no other test (or test run) uses at the same time.
std::string UniqueNodeId() {
  static std::atomic<int> counter{0};
  return absl::StrCat("unit-", getpid(), "-", counter++);
}

int64_t ReadNumber(const std::string& path) {
  int64_t value = -1;
  EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(path)), &value)) << path;
  return value;
}

// Whether `pid` is a process that has not ended (not a zombie).
bool Running(int pid) {
  const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t end_of_name = stat.rfind(") ");
  return end_of_name != std::string::npos && stat[end_of_name + 2] != 'Z';
}

class WorkerCgroupsTest : public testing::Test {
 protected:
  void SetUp() override {
    node_id_ = UniqueNodeId();
    std::string pattern = testing::TempDir() + "/cgroups_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    absl::StatusOr<std::unique_ptr<WorkerCgroups>> cgroups = WorkerCgroups::Open({node_id_, dir_});
    ASSERT_TRUE(cgroups.ok()) << cgroups.status();
    cgroups_ = *std::move(cgroups);
  }
  void TearDown() override {
    manager_.reset();
    cgroups_.reset();
    // Nothing is left of the node's cgroups.
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(MemoryDir("")).parent_path()));
  }

  // The memory hierarchy's directory of a worker of this node.
  std::string MemoryDir(const std::string& worker_id) {
    const std::string self = ReadFileOrEmpty("/proc/self/cgroup");
    std::map<std::string, CgroupHierarchy> hierarchies =
        ParseCgroupV1(ReadFileOrEmpty("/proc/self/mounts"), self);
    const CgroupHierarchy& memory = hierarchies["memory"];
    return absl::StrCat(memory.mount, absl::StripSuffix(memory.own, "/"), "/berth/", node_id_, "-",
                        DigestOf(dir_).substr(7, 8), "/", worker_id);
  }

  void StartManager() {
    WorkerProcessManager::Options options;
    options.log_dir = dir_ + "/logs";
    options.work_dir_root = dir_ + "/work";
    options.on_exit = [this](const WorkerRecord& record) {
      absl::MutexLock lock(&mu_);
      exits_[record.worker_id] = record;
    };
    options.cgroups = cgroups_.get();
    options.pids_max = 64;
    options.gpu_devices = {{0, {kNvidiaMajor, 0}}, {1, {kNvidiaMajor, 1}}};
    manager_ = std::make_unique<WorkerProcessManager>(options);
  }

  std::optional<WorkerRecord> WaitForExit(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto ended = [&] { return exits_.count(id) > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(20));
    if (exits_.count(id) == 0) return std::nullopt;
    return exits_[id];
  }

  std::string node_id_;
  std::string dir_;
  std::unique_ptr<WorkerCgroups> cgroups_;
  absl::Mutex mu_;
  std::map<std::string, WorkerRecord> exits_;
  std::unique_ptr<WorkerProcessManager> manager_;
};

TEST_F(WorkerCgroupsTest, AWorkersCgroupHoldsItsLimitsAndGoesWithIt) {
  CgroupLimits limits;
  limits.memory_bytes = 256 << 20;
  limits.cpus = 1.5;
  limits.pids = 100;
  limits.denied_devices = {{kNvidiaMajor, 3}};
  absl::StatusOr<CgroupJoin> join = cgroups_->Create("w1", limits);
  ASSERT_TRUE(join.ok()) << join.status();
  EXPECT_FALSE(join->fds().empty());
  const std::string memory = MemoryDir("w1");
  EXPECT_EQ(ReadNumber(memory + "/memory.limit_in_bytes"), 256 << 20);
  EXPECT_EQ(cgroups_->MemoryLimit("w1"), 256 << 20);
  EXPECT_EQ(cgroups_->OomKills("w1"), 0);
  EXPECT_EQ(cgroups_->KillAll("w1"), 0);  // nothing in it yet
  EXPECT_TRUE(cgroups_->Remove("w1"));
  EXPECT_FALSE(std::filesystem::exists(memory));
}

TEST_F(WorkerCgroupsTest, AWorkerOverItsMemoryIsKilledAloneAndSaysSo) {
  StartManager();
  WorkerLaunch hog =
      ShellWorker("hog", "exec python3 -c 'b = bytearray(256 << 20); print(len(b))'");
  hog.memory_bytes = 64 << 20;
  WorkerLaunch neighbour = ShellWorker("neighbour", "sleep 1; echo fine");
  neighbour.memory_bytes = 64 << 20;
  ASSERT_TRUE(manager_->Start(hog).ok());
  ASSERT_TRUE(manager_->Start(neighbour).ok());
  std::optional<WorkerRecord> hog_end = WaitForExit("hog");
  std::optional<WorkerRecord> neighbour_end = WaitForExit("neighbour");
  ASSERT_TRUE(hog_end && neighbour_end);
  EXPECT_EQ(hog_end->state, WorkerState::kFailed);
  EXPECT_EQ(hog_end->signal, SIGKILL);
  EXPECT_EQ(hog_end->error.rfind("out of memory: bundle limit 64Mi", 0), 0u) << hog_end->error;
  EXPECT_EQ(neighbour_end->state, WorkerState::kExited);
}

TEST_F(WorkerCgroupsTest, AConfinedWorkerIsToldSo) {
  StartManager();
  // berth.train's warm zygote stands aside in a confined worker.
  ASSERT_TRUE(manager_->Start(ShellWorker("env", "echo $BERTH_CONFINEMENT")).ok());
  ASSERT_TRUE(WaitForExit("env"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/env.out"), "cgroup-v1\n");
}

TEST_F(WorkerCgroupsTest, AWorkerMayOpenOnlyItsOwnGpusDeviceNodes) {
  for (int minor : {0, 1}) {
    const std::string node = absl::StrCat(dir_, "/nvidia", minor);
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(kNvidiaMajor, minor)), 0);
  }
  StartManager();
  // No driver here: the own GPU's node opens to ENXIO, the other's is EPERM.
  WorkerLaunch launch = ShellWorker(
      "gpu0", absl::StrCat("cat ", dir_, "/nvidia1 2>&1; cat ", dir_, "/nvidia0 2>&1; exit 0"));
  launch.visible_gpu_indices = {0};
  ASSERT_TRUE(manager_->Start(launch).ok());
  ASSERT_TRUE(WaitForExit("gpu0"));
  const std::string out = ReadFileOrEmpty(dir_ + "/logs/gpu0.out");
  EXPECT_NE(out.find("nvidia1: Operation not permitted"), std::string::npos) << out;
  EXPECT_EQ(out.find("nvidia0: Operation not permitted"), std::string::npos) << out;
}

TEST_F(WorkerCgroupsTest, EndingAWorkerKillsWhatLeftItsProcessGroup) {
  StartManager();
  const std::string pid_file = dir_ + "/escaped.pid";
  // setsid leaves the worker's process group; the cgroup still holds it.
  ASSERT_TRUE(manager_
                  ->Start(ShellWorker("w", absl::StrCat("setsid sh -c 'echo $$ > ", pid_file,
                                                        "; exec sleep 300' & sleep 300")))
                  .ok());
  int escaped = 0;
  for (int i = 0; i < 500 && escaped == 0; ++i) {
    absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(pid_file)), &escaped);
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(escaped, 0);
  ASSERT_NE(ReadFileOrEmpty(absl::StrCat("/proc/", escaped, "/cmdline")).find("sleep"),
            std::string::npos);
  EXPECT_NE(getpgid(escaped), manager_->List().front().pid);
  ASSERT_TRUE(manager_->Stop("w", absl::ZeroDuration()).ok());
  ASSERT_TRUE(WaitForExit("w"));
  for (int i = 0; i < 500 && std::filesystem::exists(MemoryDir("w")); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(std::filesystem::exists(MemoryDir("w")));
  // Gone, or a zombie its new parent (init) has not reaped yet.
  for (int i = 0; i < 500 && Running(escaped); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_FALSE(Running(escaped));
}

TEST_F(WorkerCgroupsTest, AForkBombStopsAtThePidsCap) {
  StartManager();
  // 100 sleeps in a worker capped at 64 tasks: it cannot fork them all.
  WorkerLaunch launch;
  launch.worker_id = "many";
  launch.argv = {"python3", "-c",
                 "import subprocess\n"
                 "started = []\n"
                 "try:\n"
                 "    for i in range(100): started.append(subprocess.Popen(['sleep', '30']))\n"
                 "except OSError:\n"
                 "    pass\n"
                 "print('started', len(started))\n"};
  ASSERT_TRUE(manager_->Start(launch).ok());
  std::optional<WorkerRecord> end = WaitForExit("many");
  ASSERT_TRUE(end);
  const std::string out = ReadFileOrEmpty(dir_ + "/logs/many.out");
  int started = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripPrefix(out, "started ")), &started))
      << out;
  EXPECT_LT(started, 64);
}

TEST_F(WorkerCgroupsTest, LeftoversOfAnEarlierLifeAreKilledAndRemoved) {
  absl::StatusOr<CgroupJoin> join = cgroups_->Create("old", {});
  ASSERT_TRUE(join.ok()) << join.status();
  // A process in the leftover cgroup, as if its raylet had died.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int fd : join->fds()) {
      if (write(fd, "0", 1) != 1) _exit(1);
    }
    execl("/bin/sleep", "sleep", "300", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 500 && cgroups_->Usage("old").memory_bytes == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(cgroups_->RemoveLeftovers(), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(MemoryDir("old")));
}

}  // namespace
}  // namespace berth
