#include "scheduler/state_store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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

// A head in memory only keeps no second copy of its state: nothing reads it.
TEST(StateStoreTest, MemoryKeepsNothing) {
  absl::StatusOr<std::unique_ptr<StateStore>> opened = OpenStateStore("memory:", "--state-store");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->Describe(), "memory");
  EXPECT_FALSE((*opened)->KeepsRecords());
  ASSERT_TRUE((*opened)->Put("groups", "pg-a", "one").ok());
  EXPECT_TRUE((*opened)->Scan("groups")->empty());
  absl::StatusOr<uint64_t> epoch = (*opened)->AdvanceEpoch();
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 1u);
}

TEST(StateStoreTest, TheTestStoreKeepsWhatIsWritten) {
  std::unique_ptr<StateStore> store = NewMemoryStateStore();
  EXPECT_TRUE(store->KeepsRecords());
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

// One head writes a store at a time: a second cannot claim it while the
// first holds it; once the first stops renewing its lease (a paused head),
// the second claims it with the next epoch, and the first can neither
// write nor keep its claim. `url` has a lease-ttl of 2 s.
void ExerciseClaims(const std::string& url) {
  absl::StatusOr<std::unique_ptr<StateStore>> a = OpenStateStore(url, "--state-store");
  absl::StatusOr<std::unique_ptr<StateStore>> b = OpenStateStore(url, "--state-store");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_TRUE((*a)->Claim("head A").ok());
  ASSERT_TRUE((*a)->Claim("head A, serving").ok());  // a new description
  const absl::Status second = (*b)->Claim("head B");
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
  EXPECT_THAT(second.message(), HasSubstr("held by another head (head A, serving)"));
  absl::StatusOr<uint64_t> first_epoch = (*a)->AdvanceEpoch();
  ASSERT_TRUE(first_epoch.ok()) << first_epoch.status();
  ASSERT_TRUE((*a)->Put("groups", "pg", "from A").ok());
  ASSERT_TRUE((*a)->Keep().ok());

  // A stops renewing; B takes over once A's lease is gone.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status claimed;
  while (!(claimed = (*b)->Claim("head B")).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(claimed.ok()) << claimed;
  EXPECT_EQ(*(*b)->AdvanceEpoch(), *first_epoch + 1);
  const absl::Status fenced = (*a)->Put("groups", "pg", "from A, late");
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted) << fenced;
  EXPECT_EQ((*a)->Keep().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE((*b)->Put("groups", "pg", "from B").ok());
  EXPECT_THAT(*(*b)->Scan("groups"), ElementsAre(Pair("pg", "from B")));
}

TEST(StateStoreTest, ASupersededSqliteWriterCannotWrite) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<StateStore>> a = OpenStateStore(dir, "--state-dir");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Claim("head A").ok());
  EXPECT_EQ(*(*a)->AdvanceEpoch(), 1u);
  ASSERT_TRUE((*a)->Put("groups", "pg", "from A").ok());
  // The lock file's check is the first guard; the epoch in each
  // transaction is the second: a writer that got past the first (the file
  // was removed and the store opened again) still cannot overwrite.
  absl::StatusOr<std::unique_ptr<StateStore>> b = OpenStateStore(dir, "--state-dir");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Claim("head B").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*(*b)->AdvanceEpoch(), 2u);
  const absl::Status fenced = (*a)->Apply({{"groups", "pg", "late"}, {"nodes", "n", "late"}});
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted) << fenced;
  EXPECT_THAT(fenced.message(), HasSubstr("epoch 1 was superseded by epoch 2"));
  EXPECT_THAT(*(*b)->Scan("groups"), ElementsAre(Pair("pg", "from A")));
  EXPECT_TRUE((*b)->Scan("nodes")->empty());  // nothing of the batch was written
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
  store = OpenStateStore("etcd://127.0.0.1:2379,nowhere", "--state-store");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("bad endpoint \"nowhere\""));
  store = OpenStateStore("etcd://127.0.0.1:2379?lease-ttl=0", "--state-store");
  EXPECT_THAT(store.status().message(), HasSubstr("lease-ttl: want whole seconds from 2 to 600"));
  store = OpenStateStore("etcd://127.0.0.1:1", "--state-store");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(store.status().message(), HasSubstr("--state-store: state store etcd://127.0.0.1:1"));
}

// A server of the test's own in a child process, on a free loopback port
// (and the one after it): `exec(port)` runs in the child and execs the
// server; `serves(port)` says it answers.
class ChildServer {
 public:
  ~ChildServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool Start(const std::function<void(int)>& exec, const std::function<bool(int)>& serves) {
    for (port_ = 20000 + getpid() % 20000; port_ < 65000; port_ += 7) {
      // A server another test left on the port would answer for ours.
      if (serves(port_)) continue;
      pid_ = fork();
      if (pid_ == 0) {
        exec(port_);
        _exit(127);
      }
      for (int i = 0; i < 150; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (serves(port_)) return true;
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;  // port taken: try another
      }
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    return false;
  }
  int port() const { return port_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
};

// A private redis-server.
class RedisStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_TRUE(redis_.Start(
        [&](int port_number) {
          const std::string port = std::to_string(port_number);
          execlp(BERTH_REDIS_SERVER, BERTH_REDIS_SERVER, "--port", port.c_str(), "--bind",
                 "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                 "--dir", dir_.c_str(), "--daemonize", "no", static_cast<char*>(nullptr));
        },
        [&](int) { return OpenRedisStateStore(Url()).ok(); }))
        << "could not start redis-server";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Url() const { return "redis://127.0.0.1:" + std::to_string(redis_.port()); }

  std::string dir_;
  ChildServer redis_;
};

TEST_F(RedisStateStoreTest, OneHolderAtATimeFencedByEpoch) {
  ExerciseClaims(Url() + "/3?lease-ttl=2");
}

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

// A private one-member etcd.
class EtcdStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_TRUE(etcd_.Start(
        [&](int port) {
          const std::string client = absl::StrCat("http://127.0.0.1:", port);
          const std::string peer = absl::StrCat("http://127.0.0.1:", port + 1);
          const std::string log = dir_ + "/etcd.log";
          freopen(log.c_str(), "w", stderr);
          execlp(BERTH_ETCD, BERTH_ETCD, "--name", "test", "--data-dir", (dir_ + "/data").c_str(),
                 "--listen-client-urls", client.c_str(), "--advertise-client-urls", client.c_str(),
                 "--listen-peer-urls", peer.c_str(), "--initial-advertise-peer-urls", peer.c_str(),
                 "--initial-cluster", ("test=" + peer).c_str(), static_cast<char*>(nullptr));
        },
        [&](int) { return OpenEtcdStateStore(Url()).ok(); }))
        << "could not start etcd";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Url() const { return absl::StrCat("etcd://127.0.0.1:", etcd_.port()); }

  std::string dir_;
  ChildServer etcd_;
};

TEST_F(EtcdStateStoreTest, SharesTheSemanticsUnderItsPrefix) {
  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenStateStore(Url(), "--state-store");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Describe(), Url());
  ExerciseStore(**store);
  absl::StatusOr<std::unique_ptr<StateStore>> other =
      OpenStateStore(Url() + "/other-cluster", "--state-store");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->Scan("groups")->empty());
  // A batch larger than one etcd transaction, and a scan larger than a page.
  std::vector<StateStore::Write> batch;
  for (int i = 0; i < 1500; ++i) batch.push_back({"nodes", absl::StrCat("n", 10000 + i), "x"});
  ASSERT_TRUE((*other)->Apply(batch).ok());
  absl::StatusOr<std::vector<StateStore::Record>> nodes = (*other)->Scan("nodes");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1500u);
  EXPECT_EQ(nodes->front().first, "n10000");
  EXPECT_EQ(nodes->back().first, "n11499");
  EXPECT_THAT(*(*store)->Scan("nodes"), ElementsAre(Pair("n1", "node")));
}

TEST_F(EtcdStateStoreTest, OneHolderAtATimeFencedByTheLeaderRevision) {
  ExerciseClaims(Url() + "/claims?lease-ttl=2");
}

}  // namespace
}  // namespace berth
