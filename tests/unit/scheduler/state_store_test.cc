#include "scheduler/state_store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string TempDir() {
  char dir[] = "/tmp/berth-store-XXXXXX";
  return mkdtemp(dir);
}

// Put / Delete / Scan semantics every backend must share.
void ExerciseStore(StateStore& store) {
  ASSERT_TRUE(store.Put("groups", "pg-b", "two").ok());
  ASSERT_TRUE(store.Put("groups", "pg-a", std::string("one\0binary", 10)).ok());
  ASSERT_TRUE(store.Put("nodes", "n1", "node").ok());
  ASSERT_TRUE(store.Put("groups", "pg-b", "two, updated").ok());
  absl::StatusOr<std::vector<StateStore::Record>> groups = store.Scan("groups");
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(Pair("pg-a", std::string("one\0binary", 10)),
                                   Pair("pg-b", "two, updated")));
  ASSERT_TRUE(store.Delete("groups", "pg-a").ok());
  ASSERT_TRUE(store.Delete("groups", "never-there").ok());
  EXPECT_THAT(*store.Scan("groups"), ElementsAre(Pair("pg-b", "two, updated")));
  EXPECT_THAT(*store.Scan("nodes"), ElementsAre(Pair("n1", "node")));
  EXPECT_TRUE(store.Scan("jobs")->empty());
}

TEST(StateStoreTest, Memory) {
  absl::StatusOr<std::unique_ptr<StateStore>> opened = OpenStateStore("memory:", "--state-store");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->Describe(), NewMemoryStateStore()->Describe());
  std::unique_ptr<StateStore> store = NewMemoryStateStore();
  ExerciseStore(*store);
}

TEST(StateStoreTest, SqliteKeepsRecordsAcrossReopen) {
  const std::string dir = TempDir();
  {
    absl::StatusOr<std::unique_ptr<StateStore>> store =
        OpenStateStore(dir + "/state", "--state-dir");
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->Describe(), "sqlite:" + dir + "/state/head.sqlite");
    ExerciseStore(**store);
  }
  absl::StatusOr<std::unique_ptr<StateStore>> reopened =
      OpenStateStore(dir + "/state", "--state-dir");
  ASSERT_TRUE(reopened.ok());
  EXPECT_THAT(*(*reopened)->Scan("groups"), ElementsAre(Pair("pg-b", "two, updated")));
  // The state directory is private to the head's user.
  EXPECT_EQ(std::filesystem::status(dir + "/state").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  std::filesystem::remove_all(dir);
}

TEST(StateStoreTest, BadLocationsAreClearErrors) {
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      OpenStateStore("/proc/berth-cannot-be-here", "--state-dir");
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("--state-dir"));
  store = OpenStateStore("redis://127.0.0.1:notaport", "--state-store");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(),
              HasSubstr("--state-store: \"redis://127.0.0.1:notaport\": bad port"));
  store = OpenStateStore("redis://127.0.0.1:1", "--state-store");  // nothing listens on port 1
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
}

// A private redis-server on a free port.
class RedisStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    for (port_ = 20000 + getpid() % 20000; port_ < 65000; port_ += 7) {
      pid_ = fork();
      if (pid_ == 0) {
        const std::string port = std::to_string(port_);
        execlp(BERTH_REDIS_SERVER, BERTH_REDIS_SERVER, "--port", port.c_str(), "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir",
               dir_.c_str(), "--daemonize", "no", static_cast<char*>(nullptr));
        _exit(127);
      }
      for (int i = 0; i < 100; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (OpenRedisStateStore(Url()).ok()) return;
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;  // port taken: try another
      }
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    FAIL() << "could not start redis-server";
  }
  void TearDown() override {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  std::string Url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(RedisStateStoreTest, SharesTheSemanticsAndSurvivesReconnect) {
  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenStateStore(Url() + "/2", "--state-store");
  ASSERT_TRUE(store.ok()) << store.status();
  ExerciseStore(**store);
  // Another client (a restarted head) sees the same records.
  absl::StatusOr<std::unique_ptr<StateStore>> other = OpenStateStore(Url() + "/2", "--state-store");
  ASSERT_TRUE(other.ok());
  EXPECT_THAT(*(*other)->Scan("groups"), ElementsAre(Pair("pg-b", "two, updated")));
  // Database 0 is separate.
  EXPECT_TRUE((*OpenStateStore(Url(), "--state-store"))->Scan("groups")->empty());
}

}  // namespace
}  // namespace berth
