// End to end through the real `berth` binary: `up` a two-node local cluster
// in a temporary BERTH_HOME, read `status -o json`, submit command jobs from
// a job file, read their logs, stop one, and check `down` leaves none of the
// cluster's processes running. The cluster is secure by default: a token
// and mutual TLS with certificates `up` writes.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/local_cluster.h"

namespace berth {
namespace {

struct Result {
  int rc = -1;
  std::string out;  // stdout and stderr
};

class CliEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/berth-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    home_ = dir;
  }
  void TearDown() override {
    Berth("down");
    std::filesystem::remove_all(home_);
  }

  // Runs `berth args` against this test's cluster only (`env`: more
  // VAR=value settings).
  Result Berth(const std::string& args, const std::string& env = "") {
    const std::string command = absl::StrCat("env -u BERTH_ADDRESS BERTH_HOME=", home_, " ", env,
                                             " ", BERTH_CLI, " ", args, " 2>&1");
    Result result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) result.out.append(buffer, n);
    const int status = pclose(pipe);
    result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

  std::string WriteJob(const std::string& name, const std::string& shell) {
    const std::string path = absl::StrCat(home_, "/", name, ".yaml");
    std::ofstream(path) << "name: " << name << "\nscaling:\n  num_workers: 2\nentrypoint:\n"
                        << "  command: /bin/sh\n  args: [-c, \"" << shell << "\"]\n";
    return path;
  }

  std::string JobState(const std::string& id) {
    const Result got = Berth(absl::StrCat("job ", id, " -o json"));
    if (got.rc != 0) return got.out;
    return nlohmann::json::parse(got.out)["job"].value("state", "");
  }

  bool WaitForState(const std::string& id, const std::string& state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (JobState(id) != state) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return true;
  }

  std::string home_;
};

// A mistyped command, with or without --help, is a usage error that names it
// and the command meant; nothing is run.
TEST_F(CliEndToEndTest, AnUnknownCommandSuggestsTheNearest) {
  const Result typo = Berth("sumbit job.yaml");
  EXPECT_EQ(typo.rc, 2) << typo.out;
  EXPECT_NE(typo.out.find("unknown command \"sumbit\" for \"berth\""), std::string::npos)
      << typo.out;
  EXPECT_NE(typo.out.find("Did you mean \"berth submit\"?"), std::string::npos) << typo.out;
  const Result help = Berth("foo --help");
  EXPECT_EQ(help.rc, 2) << help.out;
  EXPECT_NE(help.out.find("unknown command \"foo\""), std::string::npos) << help.out;
  const Result nested = Berth("pg lsit");
  EXPECT_EQ(nested.rc, 2) << nested.out;
  EXPECT_NE(nested.out.find("Did you mean \"berth pg list\"?"), std::string::npos) << nested.out;
}

TEST_F(CliEndToEndTest, QueuesAreCheckedWholeAndListed) {
  ASSERT_EQ(Berth("up --nodes 1 --port 0").rc, 0);
  ASSERT_EQ(Berth("queue cohort create gpus").rc, 0);
  const Result created =
      Berth("queue create team-a --cohort gpus --quota GPU=8,CPU=64 --borrowing-limit GPU=4");
  ASSERT_EQ(created.rc, 0) << created.out;
  struct Refused {
    const char* args;
    int rc;
    const char* says;
  };
  for (const Refused& r : {
           Refused{"queue create team-b --quota GPU=-4", 2, "--quota[\"GPU\"]"},
           Refused{"queue create team-b --cohort nope --quota GPU=4", 1, "queue.cohort"},
           Refused{"queue create team-b --cohort gpus --quota GPU=4 --lending-limit GPU=6", 1,
                   "queue.lending_limit[\"GPU\"]"},
           Refused{"queue create team-a --quota GPU=1", 1, "ALREADY_EXISTS"},
           Refused{"queue create team-b --quota GPU=4 --within-queue-preemption Newer", 1,
                   "queue.within_queue_preemption"},
       }) {
    const Result refused = Berth(r.args);
    EXPECT_EQ(refused.rc, r.rc) << r.args << ": " << refused.out;
    EXPECT_NE(refused.out.find(r.says), std::string::npos) << r.args << ": " << refused.out;
  }
  const Result list = Berth("queues -o json");
  ASSERT_EQ(list.rc, 0) << list.out;
  const nlohmann::json json = nlohmann::json::parse(list.out);
  ASSERT_EQ(json["queues"].size(), 2u) << list.out;  // default and team-a: nothing else
  EXPECT_EQ(json["queues"][1]["nominal_quota"]["GPU"], 8) << list.out;
  EXPECT_EQ(json["queues"][1]["within_queue_preemption"], "LowerPriority") << list.out;
}

TEST_F(CliEndToEndTest, AQueueFileATeamTokenAndTheQueuesTable) {
  ASSERT_EQ(Berth("up --nodes 1 --gpus-per-node 2 --port 0").rc, 0);
  const std::string file = home_ + "/queues.yaml";
  {
    std::ofstream out(file);
    out << "cohorts: [org]\n"
           "priority_classes:\n  - {name: high, value: 100}\n"
           "queues:\n"
           "  - {name: team-a, cohort: org, team: team-a, quota: {GPU: 1}}\n"
           "  - {name: team-b, cohort: org, team: team-b, quota: {GPU: 1}}\n";
  }
  const Result applied = Berth("queue apply -f " + file);
  ASSERT_EQ(applied.rc, 0) << applied.out;
  EXPECT_NE(applied.out.find("Priority classes: high=100"), std::string::npos) << applied.out;

  // The admin's token issues team A's; with it, team B's queue is refused.
  const std::string token = home_ + "/team-a.token";
  const Result issued = Berth("credentials --team team-a --out " + token);
  ASSERT_EQ(issued.rc, 0) << issued.out;
  EXPECT_EQ(std::filesystem::status(token).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const Result mine = Berth("--token-file " + token + " pg create --queue team-a --bundle GPU=2");
  ASSERT_EQ(mine.rc, 0) << mine.out;
  const Result theirs = Berth("--token-file " + token + " pg create --queue team-b --bundle GPU=1");
  EXPECT_EQ(theirs.rc, 1) << theirs.out;
  EXPECT_NE(theirs.out.find("PERMISSION_DENIED"), std::string::npos) << theirs.out;
  EXPECT_NE(theirs.out.find("queue 'team-b'"), std::string::npos) << theirs.out;
  const Result admin_only = Berth("--token-file " + token + " queue create team-c");
  EXPECT_NE(admin_only.out.find("PERMISSION_DENIED"), std::string::npos) << admin_only.out;

  // Team A borrows B's GPU once the group is admitted; the table says so.
  nlohmann::json team_a;
  for (int i = 0; i < 100 && team_a["status"]["borrowed"]["GPU"] != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    const nlohmann::json json = nlohmann::json::parse(Berth("queues -o json").out);
    for (const nlohmann::json& q : json["queues"]) {
      if (q["name"] == "team-a") team_a = q;
    }
  }
  EXPECT_EQ(team_a["status"]["usage"]["GPU"], 2) << team_a.dump();
  EXPECT_EQ(team_a["status"]["borrowed"]["GPU"], 1) << team_a.dump();
  const Result table = Berth("queues");
  EXPECT_NE(table.out.find("GPU_BORROWED"), std::string::npos) << table.out;
}

TEST_F(CliEndToEndTest, UpSubmitLogsStopDown) {
  const Result up = Berth("up --nodes 2 --gpus-per-node 2 --port 0");
  ASSERT_EQ(up.rc, 0) << up.out;
  EXPECT_NE(up.out.find("node-1"), std::string::npos) << up.out;

  const Result again = Berth("up --port 0");
  EXPECT_EQ(again.rc, 1) << again.out;
  EXPECT_NE(again.out.find("already running"), std::string::npos) << again.out;

  const Result status = Berth("status -o json");
  ASSERT_EQ(status.rc, 0) << status.out;
  const nlohmann::json json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json.value("alive_nodes", 0), 2) << status.out;
  for (const char* file :
       {"token", "tls/ca.crt", "tls/ca.key", "tls/head.key", "tls/node.key", "tls/client.key"}) {
    const auto perms = std::filesystem::status(absl::StrCat(home_, "/local/", file)).permissions();
    EXPECT_EQ(perms, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << file;
  }
  // Another cluster's CA does not trust this head.
  const Result other = Berth(absl::StrCat("credentials ", home_, "/other"));
  ASSERT_EQ(other.rc, 0) << other.out;
  const Result foreign =
      Berth("status", absl::StrCat("BERTH_TLS_CA_FILE=", home_, "/other/ca.crt"));
  EXPECT_EQ(foreign.rc, 1) << foreign.out;
  EXPECT_NE(foreign.out.find("UNAVAILABLE"), std::string::npos) << foreign.out;
  const Result twice = Berth(absl::StrCat("credentials ", home_, "/other"));
  EXPECT_EQ(twice.rc, 2) << twice.out;
  EXPECT_NE(twice.out.find("already holds a CA"), std::string::npos) << twice.out;

  const Result hi = Berth(absl::StrCat("submit ", WriteJob("hi", "echo hi $RANK"), " --wait"));
  ASSERT_EQ(hi.rc, 0) << hi.out;
  const std::string id = hi.out.substr(0, hi.out.find('\n'));
  EXPECT_NE(hi.out.find("SUCCEEDED"), std::string::npos) << hi.out;

  const Result logs = Berth(absl::StrCat("logs ", id));
  ASSERT_EQ(logs.rc, 0) << logs.out;
  EXPECT_NE(logs.out.find("[rank 0] hi 0"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[rank 1] hi 1"), std::string::npos) << logs.out;

  const Result sleeper = Berth(absl::StrCat("submit ", WriteJob("sleeper", "sleep 300")));
  ASSERT_EQ(sleeper.rc, 0) << sleeper.out;
  const std::string sleeper_id = sleeper.out.substr(0, sleeper.out.find('\n'));
  ASSERT_TRUE(WaitForState(sleeper_id, "TRAIN_JOB_STATE_RUNNING")) << JobState(sleeper_id);
  const Result stop = Berth(absl::StrCat("stop ", sleeper_id));
  ASSERT_EQ(stop.rc, 0) << stop.out;
  EXPECT_TRUE(WaitForState(sleeper_id, "TRAIN_JOB_STATE_STOPPED")) << JobState(sleeper_id);
  // Stopping it again (or one that succeeded) says it had ended.
  const Result ended_again = Berth(absl::StrCat("stop ", id));
  EXPECT_EQ(ended_again.rc, 1) << ended_again.out;
  EXPECT_NE(ended_again.out.find("had already ended (SUCCEEDED); nothing to stop"),
            std::string::npos)
      << ended_again.out;
  // `--wait 2` gives up waiting (exit 1) while the job goes on.
  const Result waited = Berth(absl::StrCat("submit ", WriteJob("long", "sleep 300"), " --wait 2"));
  EXPECT_EQ(waited.rc, 1) << waited.out;
  EXPECT_NE(waited.out.find("has not ended yet"), std::string::npos) << waited.out;
  const std::string long_id = waited.out.substr(0, waited.out.find('\n'));
  EXPECT_EQ(Berth(absl::StrCat("stop ", long_id)).rc, 0);
  // A drain with a deadline shows in `berth nodes` until `undrain`.
  const Result bad_deadline = Berth("drain node-2 --deadline soon");
  EXPECT_EQ(bad_deadline.rc, 2) << bad_deadline.out;
  EXPECT_NE(bad_deadline.out.find("--deadline"), std::string::npos) << bad_deadline.out;
  const Result drain = Berth("drain node-2 --deadline 10m --reason 'kernel upgrade'");
  ASSERT_EQ(drain.rc, 0) << drain.out;
  EXPECT_EQ(drain.out.rfind("node node-2 is draining; ", 0), 0u) << drain.out;
  EXPECT_NE(drain.out.find(" bundle(s) to move; everything moves by 20"), std::string::npos)
      << drain.out;
  const Result drained = Berth("nodes");
  EXPECT_NE(drained.out.find("node-2 drains: kernel upgrade; deadline 20"), std::string::npos)
      << drained.out;
  const Result undrain = Berth("undrain node-2");
  EXPECT_EQ(undrain.rc, 0) << undrain.out;
  EXPECT_EQ(Berth("nodes").out.find("drains:"), std::string::npos);
  const Result undrain_again = Berth("undrain node-2");
  EXPECT_EQ(undrain_again.rc, 1) << undrain_again.out;
  EXPECT_NE(undrain_again.out.find("is ALIVE, not DRAINING"), std::string::npos)
      << undrain_again.out;
  const Result version = Berth("--version");
  EXPECT_EQ(version.rc, 0) << version.out;
  EXPECT_EQ(version.out.rfind("berth ", 0), 0u) << version.out;

  absl::StatusOr<std::optional<LocalState>> state =
      ReadStateFile(StateFilePath(absl::StrCat(home_, "/local")));
  ASSERT_TRUE(state.ok() && state->has_value()) << state.status();
  ASSERT_EQ((*state)->processes.size(), 3u);
  const Result down = Berth("down");
  ASSERT_EQ(down.rc, 0) << down.out;
  for (const LocalProcess& p : (*state)->processes) {
    EXPECT_FALSE(IsRunning(p)) << p.name << " pid " << p.pid;
  }
  EXPECT_EQ(Berth("down").rc, 0);
}

}  // namespace
}  // namespace berth
