// Heads on etcd under a running job, on real processes: a 3-member etcd
// (the one `berth up --state-store etcd` starts), an active head and a
// standby on it, two raylets. An etcd member's death, the etcd leader's,
// the active head's kill -9, and each head paused in turn past its lease:
// the job goes on at its first attempt through all of them, and at most one
// head is active per epoch. A lone head paused past its lease comes back.
#include <signal.h>

#include <iostream>
#include <thread>

#include "tests/integration/etcd_cluster.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

class EtcdFailoverTest : public TrainJobTest {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/berth-etcd-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    etcd_ = std::make_unique<EtcdCluster>(dir_);
    cluster_ = std::make_unique<LocalCluster>(
        100, std::vector<std::string>{"--state-store", etcd_->url()});
    if (with_standby_) cluster_->AddStandbyHead();
    cluster_->AddRaylet({"n0", 2, "A10G", 8, "32Gi"});
    cluster_->AddRaylet({"n1", 2, "A10G", 8, "32Gi"});
  }
  void TearDown() override {
    if (HasFailure()) {
      for (const char* log : {"/head.log", "/standby.log"}) {
        std::cerr << log << ":\n" << ReadFileOrEmpty(cluster_->dir() + log) << "\n";
      }
    }
    cluster_.reset();  // the heads before their store
    etcd_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Waits until a head answers as active at `epoch`.
  ::testing::AssertionResult ActiveAt(uint64_t epoch, seconds within) {
    v1::HeadInfo head;
    if (WaitUntil([&] { return (head = ActiveHead()).epoch() == epoch; }, within)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no head active at epoch " << epoch << " within "
                                         << within.count() << " s; last: " << head.DebugString();
  }
  // A job of both nodes' GPUs that runs `seconds` and must not fail once.
  std::string SubmitLongJob(int run_seconds) {
    v1::TrainJobSpec spec = GpuJob(4);
    spec.mutable_failure_config()->set_max_failures(0);
    SetCommand(&spec, {"/bin/sh", "-c", absl::StrCat("sleep ", run_seconds)});
    const std::string id = Submit(spec);
    EXPECT_TRUE(
        WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(20)));
    return id;
  }
  bool with_standby_ = true;
  std::string dir_;
  std::unique_ptr<EtcdCluster> etcd_;
};

// Two members of three lost: no quorum, so no write and no lease renewal.
// The active head steps down once its lease lapses and every head waits for
// etcd; when the members are back, one takes over at the next epoch and the
// job, which ran on meanwhile, goes on at its first attempt.
TEST_F(EtcdFailoverTest, EtcdLosesItsQuorumAndGetsItBack) {
  ASSERT_TRUE(ActiveAt(1, seconds(5)));
  const std::string id = SubmitLongJob(25);
  etcd_->Kill(0);
  etcd_->Kill(1);
  // The active head steps down once its lease lapses.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ReadFileOrEmpty(cluster_->dir() + "/head.log").find("lease lapsed") !=
               std::string::npos;
      },
      seconds(15)));
  etcd_->Start(0);
  etcd_->Start(1);
  ASSERT_TRUE(ActiveAt(2, seconds(30)));
  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_RUNNING);
  ExpectSucceededAtFirstAttempt(id, seconds(90));
}

class LoneEtcdHeadTest : public EtcdFailoverTest {
 protected:
  LoneEtcdHeadTest() { with_standby_ = false; }
};

TEST_F(EtcdFailoverTest, EtcdMembersAndTheActiveHeadDieUnderARunningJob) {
  ASSERT_TRUE(ActiveAt(1, seconds(5)));
  const std::string id = SubmitLongJob(20);

  // A member that does not lead: the other two are a quorum.
  const int leader = etcd_->Leader();
  ASSERT_GE(leader, 0);
  const size_t follower = (static_cast<size_t>(leader) + 1) % etcd_->size();
  etcd_->Kill(follower);
  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_RUNNING);
  etcd_->Start(follower);
  std::this_thread::sleep_for(seconds(2));

  // The leader: the others elect one; the head's lease outlives the election.
  etcd_->Kill(static_cast<size_t>(etcd_->Leader()));
  std::this_thread::sleep_for(seconds(4));
  EXPECT_EQ(ActiveHead().epoch(), 1u) << "an etcd election must not move the head";
  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_RUNNING);

  // The active head: the standby takes over once its lease lapses.
  cluster_->KillHead(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(ActiveAt(2, seconds(15)));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, seconds(10));
  ExpectSucceededAtFirstAttempt(id, seconds(90));
}

TEST_F(EtcdFailoverTest, EachHeadPausedInTurnStepsDownAndTheJobGoesOn) {
  ASSERT_TRUE(ActiveAt(1, seconds(5)));
  const std::string id = SubmitLongJob(30);
  const pid_t first = cluster_->head_pid();
  const pid_t second = cluster_->standby_pid();

  // Paused past its lease (5 s): the standby takes over; resumed, the old
  // head finds its lease gone, steps down and stands by (same pid).
  for (const auto& [paused, epoch] : {std::pair{first, 2u}, std::pair{second, 3u}}) {
    ASSERT_EQ(kill(paused, SIGSTOP), 0);
    const bool took_over = ActiveAt(epoch, seconds(15));
    ASSERT_EQ(kill(paused, SIGCONT), 0);
    ASSERT_TRUE(took_over);
    // Watched for 3 s: the one answering as active is the new head.
    const auto watch_until = std::chrono::steady_clock::now() + seconds(3);
    while (std::chrono::steady_clock::now() < watch_until) {
      const uint64_t answered = ActiveHead().epoch();
      if (answered != 0) EXPECT_EQ(answered, epoch) << "the resumed head must not act";
      std::this_thread::sleep_for(milliseconds(100));
    }
    ASSERT_TRUE(ActiveAt(epoch, seconds(5)));
    EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_RUNNING);
  }
  const std::string first_log = ReadFileOrEmpty(cluster_->dir() + "/head.log");
  EXPECT_THAT(first_log, HasSubstr("lease lapsed"));
  EXPECT_THAT(first_log, HasSubstr("stepping down: this head starts again as a standby"));
  EXPECT_THAT(ReadFileOrEmpty(cluster_->dir() + "/standby.log"), HasSubstr("stepping down"));
  ExpectSucceededAtFirstAttempt(id, seconds(90));
}

// No standby: paused past its lease, the head steps down, starts again,
// finds the store free, and is active again at the next epoch, with the
// running job restored, not restarted.
TEST_F(LoneEtcdHeadTest, APausedHeadWithNoStandbyComesBackAtTheNextEpoch) {
  ASSERT_TRUE(ActiveAt(1, seconds(5)));
  const std::string id = SubmitLongJob(20);
  ASSERT_EQ(kill(cluster_->head_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(seconds(8));
  ASSERT_EQ(kill(cluster_->head_pid(), SIGCONT), 0);
  ASSERT_TRUE(ActiveAt(2, seconds(15)));
  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_RUNNING);
  for (const char* line : {"stepping down", "active at", "epoch 2"}) {
    EXPECT_THAT(ReadFileOrEmpty(cluster_->dir() + "/head.log"), HasSubstr(line));
  }
  ExpectSucceededAtFirstAttempt(id, seconds(90));
}

}  // namespace
}  // namespace berth::testing
