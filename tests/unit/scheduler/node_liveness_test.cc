#include "scheduler/node_liveness.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Heartbeats every second, DEAD after 5 s of silence; checks every 250 ms.
class NodeLivenessTest : public ::testing::Test {
 protected:
  // Checks every 250 ms from now_ until `until`, with the nodes in
  // `beating` heard every second; returns every node declared.
  std::vector<std::string> Run(int64_t until, const std::vector<std::string>& beating) {
    std::vector<std::string> dead;
    for (; now_ <= until; now_ += 250) {
      if (now_ % 1000 == 0) {
        for (const std::string& id : beating) liveness_.Heard(id);
      }
      LivenessVerdict verdict = liveness_.Check(now_);
      dead.insert(dead.end(), verdict.dead.begin(), verdict.dead.end());
    }
    return dead;
  }

  NodeLiveness liveness_{LivenessConfig{1000, 5}};
  int64_t now_ = 1'000'000;  // a monotonic clock's reading, not 0
};

TEST_F(NodeLivenessTest, ASilentNodeIsDeclaredAfterTheTimeoutAndOnlyOnce) {
  liveness_.Heard("n1");
  liveness_.Heard("n2");
  liveness_.Heard("n3");
  const int64_t start = now_;
  EXPECT_THAT(Run(start + 5000, {"n1", "n2"}), IsEmpty());
  EXPECT_THAT(Run(start + 6000, {"n1", "n2"}), ElementsAre("n3"));
  EXPECT_THAT(Run(start + 20000, {"n1", "n2"}), IsEmpty());
}

TEST_F(NodeLivenessTest, TheHeadsOwnStallIsNotCountedAgainstAnyNode) {
  for (const char* id : {"n1", "n2", "n3"}) liveness_.Heard(id);
  Run(now_ + 3000, {"n1", "n2", "n3"});
  // The head is paused for 40 s: the next check comes that much late, and
  // the nodes' heartbeats reach it just after.
  now_ += 40'000;
  LivenessVerdict resumed = liveness_.Check(now_);
  EXPECT_THAT(resumed.dead, IsEmpty());
  EXPECT_THAT(resumed.suspected, IsEmpty());
  EXPECT_GE(resumed.head_stall_ms, 39'000);
  EXPECT_THAT(Run(now_ + 30'000, {"n1", "n2", "n3"}), IsEmpty());
}

TEST_F(NodeLivenessTest, ANodeThatDiedDuringAStallIsFoundAfterTheTimeout) {
  for (const char* id : {"n1", "n2", "n3"}) liveness_.Heard(id);
  Run(now_ + 2000, {"n1", "n2", "n3"});
  now_ += 15'000;  // stalled; n3 died meanwhile
  const int64_t resumed = now_;
  std::vector<std::string> dead;
  int64_t found_at = 0;
  for (; dead.empty() && now_ < resumed + 20'000; now_ += 250) {
    if (now_ % 1000 == 0) {
      liveness_.Heard("n1");
      liveness_.Heard("n2");
    }
    dead = liveness_.Check(now_).dead;
    found_at = now_;
  }
  EXPECT_THAT(dead, ElementsAre("n3"));
  // n3 was heard 2 s before the stall: 5 s of silence minus those 2 s of
  // observed time, plus at most one check's tolerance.
  EXPECT_LE(found_at - resumed, 5000);
}

TEST_F(NodeLivenessTest, MostNodesSilentAtOnceWaitOutAGraceAndOnlyTheStillSilentAreDeclared) {
  for (const char* id : {"n1", "n2", "n3", "n4"}) liveness_.Heard(id);
  Run(now_ + 1000, {"n1", "n2", "n3", "n4"});
  // n1-n3 fall silent together (a network cut seen from the head), n4 beats.
  const int64_t silent_from = now_;
  LivenessVerdict first_suspicion;
  for (; now_ <= silent_from + 7000; now_ += 250) {
    if (now_ % 1000 == 0) liveness_.Heard("n4");
    LivenessVerdict verdict = liveness_.Check(now_);
    ASSERT_THAT(verdict.dead, IsEmpty()) << "at " << now_ - silent_from;
    if (verdict.suspicion_began) first_suspicion = verdict;
  }
  EXPECT_THAT(first_suspicion.suspected, ElementsAre("n1", "n2", "n3"));
  // n1 and n2 come back within the grace; n3 stays silent and is declared
  // once the grace (one more timeout) is over.
  std::vector<std::string> dead = Run(silent_from + 14'000, {"n1", "n2", "n4"});
  EXPECT_THAT(dead, ElementsAre("n3"));
}

TEST_F(NodeLivenessTest, ALoneNodeIsNotMostOfTheCluster) {
  liveness_.Heard("n1");
  const int64_t start = now_;
  EXPECT_THAT(Run(start + 6000, {}), ElementsAre("n1"));
}

TEST_F(NodeLivenessTest, GraceAllGivesEveryNodeMoreTimeFromNow) {
  liveness_.Heard("n1");
  liveness_.Heard("n2");
  liveness_.GraceAll(5000);
  const int64_t start = now_;
  EXPECT_THAT(Run(start + 10'000, {"n1"}), IsEmpty());
  EXPECT_THAT(Run(start + 11'000, {"n1"}), ElementsAre("n2"));
}

}  // namespace
}  // namespace berth
