#include "raylet/worker_processes.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/unit/shell_worker.h"

namespace berth {
namespace {

class WorkerProcessManagerTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "/workers_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = std::filesystem::canonical(pattern).string();
    manager_ = std::make_unique<WorkerProcessManager>(WorkerProcessManager::Options{
        dir_ + "/logs", dir_ + "/work", [this](const WorkerRecord& record) {
          absl::MutexLock lock(&mu_);
          exits_[record.worker_id] = record;
        }});
  }

  // The record passed to on_exit, waiting up to `timeout` for it.
  std::optional<WorkerRecord> WaitForExit(const std::string& id,
                                          absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto ended = [&] { return exits_.count(id) > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
    if (exits_.count(id) == 0) return std::nullopt;
    return exits_[id];
  }

  // Waits until the worker's stdout log contains `text`.
  bool WaitForOutput(const std::string& id, const std::string& text) {
    for (int i = 0; i < 500; ++i) {
      if (ReadFileOrEmpty(LogPath(id, ".out")).find(text) != std::string::npos) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::string LogPath(const std::string& id, const std::string& ext) {
    return absl::StrCat(dir_, "/logs/", id, ext);
  }

  std::string dir_;
  absl::Mutex mu_;
  std::map<std::string, WorkerRecord> exits_;
  std::unique_ptr<WorkerProcessManager> manager_;
};

TEST_F(WorkerProcessManagerTest, RecordsExitCodes) {
  ASSERT_TRUE(manager_->Start(ShellWorker("ok", "exit 0")).ok());
  ASSERT_TRUE(manager_->Start(ShellWorker("bad", "exit 3")).ok());
  auto ok = WaitForExit("ok");
  auto bad = WaitForExit("bad");
  ASSERT_TRUE(ok && bad);
  EXPECT_EQ(ok->state, WorkerState::kExited);
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_EQ(bad->state, WorkerState::kFailed);
  EXPECT_EQ(bad->exit_code, 3);
  EXPECT_EQ(bad->signal, 0);
  EXPECT_GT(bad->ended_unix_ms, 0);
  EXPECT_GE(bad->ended_unix_ms, bad->started_unix_ms);
  EXPECT_EQ(manager_->RunningCount(), 0u);
}

TEST_F(WorkerProcessManagerTest, RecordsTheSignalThatEndedAWorker) {
  ASSERT_TRUE(manager_->Start(ShellWorker("usr1", "kill -USR1 $$")).ok());
  auto record = WaitForExit("usr1");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, WorkerState::kFailed);  // not sent by Stop
  EXPECT_EQ(record->signal, SIGUSR1);
}

TEST_F(WorkerProcessManagerTest, LogFilesHoldTheOutputAndAreAppended) {
  ASSERT_TRUE(manager_->Start(ShellWorker("w", "echo to-stdout; echo to-stderr >&2")).ok());
  ASSERT_TRUE(WaitForExit("w"));
  EXPECT_EQ(ReadFileOrEmpty(LogPath("w", ".out")), "to-stdout\n");
  EXPECT_EQ(ReadFileOrEmpty(LogPath("w", ".err")), "to-stderr\n");
}

TEST_F(WorkerProcessManagerTest, ChildGetsExactlyItsEnvPlusCudaVisibleDevices) {
  // Nothing of the raylet's own environment leaks into workers.
  setenv("BERTH_TEST_RAYLET_ONLY", "leaked", 1);
  WorkerLaunch launch = ShellWorker(
      "env", "echo \"$RANK|$CUDA_VISIBLE_DEVICES|${BERTH_TEST_RAYLET_ONLY-none}\"; pwd");
  launch.env = {{"RANK", "3"}, {"CUDA_VISIBLE_DEVICES", "7"}};  // the raylet's value wins
  launch.visible_gpu_indices = {2, 0};
  ASSERT_TRUE(manager_->Start(launch).ok());
  ASSERT_TRUE(WaitForExit("env"));
  // Default working directory: <work_dir_root>/<job_id>, created on demand.
  EXPECT_EQ(ReadFileOrEmpty(LogPath("env", ".out")),
            absl::StrCat("3|2,0|none\n", dir_, "/work/job\n"));

  WorkerLaunch no_gpus = ShellWorker("no-gpus", "echo \"${CUDA_VISIBLE_DEVICES-unset}.\"; pwd");
  no_gpus.cwd = dir_;
  ASSERT_TRUE(manager_->Start(no_gpus).ok());
  ASSERT_TRUE(WaitForExit("no-gpus"));
  EXPECT_EQ(ReadFileOrEmpty(LogPath("no-gpus", ".out")), absl::StrCat(".\n", dir_, "\n"));
}

TEST_F(WorkerProcessManagerTest, StopEscalatesToSigkillAfterTheGracePeriod) {
  // Ignores SIGTERM (and so does the sleep it becomes).
  ASSERT_TRUE(
      manager_->Start(ShellWorker("stubborn", "trap '' TERM; echo ready; exec sleep 60")).ok());
  ASSERT_TRUE(WaitForOutput("stubborn", "ready"));
  const absl::Duration grace = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(manager_->Stop("stubborn", grace).ok());
  auto record = WaitForExit("stubborn");
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, WorkerState::kKilled);
  EXPECT_EQ(record->signal, SIGKILL);
  EXPECT_GE(took, grace);
  EXPECT_LT(took, grace + absl::Seconds(2));
}

TEST_F(WorkerProcessManagerTest, StopSendsSigtermFirst) {
  ASSERT_TRUE(manager_->Start(ShellWorker("polite", "echo ready; sleep 60")).ok());
  ASSERT_TRUE(WaitForOutput("polite", "ready"));
  ASSERT_TRUE(manager_->Stop("polite", absl::Seconds(30)).ok());
  auto record = WaitForExit("polite", absl::Seconds(5));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, WorkerState::kKilled);
  EXPECT_EQ(record->signal, SIGTERM);
  EXPECT_TRUE(manager_->Stop("polite", absl::ZeroDuration()).ok());  // already ended: fine
  EXPECT_EQ(manager_->Stop("nobody", absl::ZeroDuration()).code(), absl::StatusCode::kNotFound);
}

TEST_F(WorkerProcessManagerTest, StopAllKillsEveryWorker) {
  ASSERT_TRUE(manager_->Start(ShellWorker("a", "trap '' TERM; sleep 60")).ok());
  ASSERT_TRUE(manager_->Start(ShellWorker("b", "sleep 60")).ok());
  EXPECT_EQ(manager_->RunningCount(), 2u);
  manager_->StopAll(absl::ZeroDuration());
  EXPECT_EQ(manager_->RunningCount(), 0u);
  for (const WorkerRecord& r : manager_->List()) {
    EXPECT_EQ(r.state, WorkerState::kKilled) << r.worker_id;
    EXPECT_EQ(r.signal, SIGKILL) << r.worker_id;
  }
}

// Dead once it is gone or a zombie (whoever adopted it may reap it late);
// waits up to 2 s.
bool DiesSoon(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
    const size_t end_of_name = stat.rfind(')');
    if (end_of_name != std::string::npos && stat.compare(end_of_name, 3, ") Z") == 0) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST_F(WorkerProcessManagerTest, WhatAWorkerLeavesInItsGroupDiesWithIt) {
  ASSERT_TRUE(manager_->Start(ShellWorker("parent", "sleep 60 & echo $!; exit 0")).ok());
  ASSERT_TRUE(WaitForExit("parent"));
  int stray = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::StripAsciiWhitespace(ReadFileOrEmpty(LogPath("parent", ".out"))), &stray));
  EXPECT_TRUE(DiesSoon(stray)) << "pid " << stray << " survived its worker";
}

TEST_F(WorkerProcessManagerTest, NoWorkerOutlivesAKilledRaylet) {
  // A raylet of its own, so that it can be killed -9: a forked process
  // holding a manager with one worker that has a child of its own. Forked
  // with no other thread running: the fixture's manager has a reaper
  // thread, and a lock it held at the fork stays held in the child, which
  // then hung before starting its worker (seen in a CI run).
  manager_.reset();
  const std::string out = dir_ + "/raylet-logs/worker.out";
  const pid_t raylet = fork();
  ASSERT_GE(raylet, 0);
  if (raylet == 0) {
    WorkerProcessManager manager(
        WorkerProcessManager::Options{dir_ + "/raylet-logs", dir_ + "/work", {}});
    WorkerLaunch launch = ShellWorker("worker", "sleep 60 & echo $! $$; wait");
    if (!manager.Start(launch).ok()) _exit(1);
    while (true) pause();
  }
  int program = 0, child = 0;
  for (int i = 0; i < 500 && child == 0; ++i) {
    std::istringstream pids(ReadFileOrEmpty(out));
    pids >> child >> program;
    if (program == 0) child = 0;
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (child == 0) {  // the forked raylet must not outlive the test either
    kill(raylet, SIGKILL);
    waitpid(raylet, nullptr, 0);
    FAIL() << "the worker never started";
  }
  ASSERT_EQ(kill(raylet, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(raylet, &status, 0), raylet);
  EXPECT_TRUE(DiesSoon(program)) << "the worker (pid " << program << ") outlived its raylet";
  EXPECT_TRUE(DiesSoon(child)) << "the worker's child (pid " << child << ") outlived its raylet";
}

TEST_F(WorkerProcessManagerTest, ExecFailureIsAnErrorNotASilentExit) {
  WorkerLaunch launch = ShellWorker("missing", "");
  launch.argv = {"berth-no-such-program-anywhere", "--flag"};
  absl::StatusOr<StartedWorker> started = manager_->Start(launch);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(started.status().message().find("No such file"), std::string::npos) << started.status();
  EXPECT_TRUE(manager_->List().empty());

  WorkerLaunch bad_cwd = ShellWorker("bad-cwd", "exit 0");
  bad_cwd.cwd = dir_ + "/does/not/exist";
  started = manager_->Start(bad_cwd);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(started.status().message().find("chdir"), std::string::npos) << started.status();

  // A failed start leaves no record: the same id can start later.
  launch.argv = {"/bin/true"};
  EXPECT_TRUE(manager_->Start(launch).ok());
}

TEST_F(WorkerProcessManagerTest, StartIsIdempotentByWorkerId) {
  absl::StatusOr<StartedWorker> first = manager_->Start(ShellWorker("w", "sleep 60"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->already_running);
  absl::StatusOr<StartedWorker> second = manager_->Start(ShellWorker("w", "sleep 60"));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->already_running);
  EXPECT_EQ(second->pid, first->pid);
  EXPECT_EQ(manager_->List().size(), 1u);
  EXPECT_EQ(manager_->RunningCount(), 1u);
}

TEST_F(WorkerProcessManagerTest, BadLaunchesAreInvalidArgumentNamingTheField) {
  struct Case {
    WorkerLaunch launch;
    std::string field;
  };
  std::vector<Case> cases = {{ShellWorker("../escape", "exit 0"), "spec.worker_id"},
                             {ShellWorker("", "exit 0"), "spec.worker_id"},
                             {ShellWorker("w", "exit 0"), "spec.job_id"},
                             {ShellWorker("w", "exit 0"), "spec.argv"},
                             {ShellWorker("w", "exit 0"), "spec.env[\"A=B\"]"}};
  cases[2].launch.job_id = "a/b";
  cases[3].launch.argv.clear();
  cases[4].launch.env["A=B"] = "c";
  for (const Case& c : cases) {
    absl::StatusOr<StartedWorker> started = manager_->Start(c.launch);
    EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(started.status().message().find(c.field), std::string::npos) << started.status();
  }
  EXPECT_TRUE(manager_->List().empty());
}

TEST_F(WorkerProcessManagerTest, DestructorKillsRunningWorkers) {
  absl::StatusOr<StartedWorker> started =
      manager_->Start(ShellWorker("w", "trap '' TERM; sleep 60"));
  ASSERT_TRUE(started.ok());
  manager_.reset();
  EXPECT_TRUE(kill(started->pid, 0) != 0 && errno == ESRCH);
}

}  // namespace
}  // namespace berth
