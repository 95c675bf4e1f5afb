// QueueScheduler's admitted gangs that lack bundles (Lacks, PlaceLacking):
// their turn, their backoff, and what ends their wait.
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queueing/queue_scheduler.h"
#include "tests/unit/queueing/pool_capacity_test_util.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ResourceSet Gpus(double n) { return ResourceSet::Of({{kGpu, n}}); }

// A pool whose remainders are placed as a test says (placed unless told
// otherwise), counting the tries.
class RemainderPool : public testing::PoolCapacity {
 public:
  using PoolCapacity::PoolCapacity;
  RemainderPlacement PlaceRemainder(GangRef gang) override {
    const std::string& id = *gang.id;
    ++tries[id];
    auto it = outcome.find(id);
    RemainderPlacement r;
    r.outcome = it == outcome.end() ? PlacementOutcome::kPlaced : it->second;
    if (r.outcome != PlacementOutcome::kPlaced) {
      auto why = std::make_shared<PlacementReason>();
      why->why = PlacementWhy::kUnknownGang;
      why->gang = id;
      r.reason = std::move(why);
    }
    return r;
  }
  std::map<std::string, PlacementOutcome> outcome;
  std::map<std::string, int> tries;
};

std::vector<std::string> Ids(const std::vector<QueueScheduler::Remainder>& placed) {
  std::vector<std::string> ids;
  for (const auto& r : placed) ids.push_back(r.id);
  return ids;
}

class LackingGangsTest : public ::testing::Test {
 protected:
  LackingGangsTest() : scheduler_(QueueConfig(), Options()), pool_(Gpus(16)) {}

  static QueueSchedulerOptions Options() {
    QueueSchedulerOptions options;
    // 100 ms, then twice the last, at most 400 ms.
    options.lacking_backoff = [](int64_t previous) {
      return previous == 0 ? 100 : std::min<int64_t>(previous * 2, 400);
    };
    return options;
  }
  // Submits and admits a gang of `gpus` GPUs.
  void Run(const std::string& id, double gpus, int32_t priority = 0) {
    pool_.Add(id, Gpus(gpus));
    GangRequest r{id, "", priority, Gpus(gpus), true, std::nullopt};
    ASSERT_TRUE(scheduler_.Submit(r, 0).ok());
    ASSERT_THAT(scheduler_.Pass(0, pool_).admitted, ElementsAre(id));
  }

  QueueScheduler scheduler_;
  RemainderPool pool_;
};

TEST_F(LackingGangsTest, LostGangsGoFirstThenByPriorityThenArrival) {
  Run("old", 2);
  Run("high", 2, 5);
  Run("failed", 2, 9);
  Run("young", 2);
  scheduler_.Lacks("young", 10, /*lost=*/true, false);
  scheduler_.Lacks("failed", 10, /*lost=*/false, false);  // a failed commit
  scheduler_.Lacks("old", 10, true, false);
  scheduler_.Lacks("high", 10, true, false);
  EXPECT_EQ(scheduler_.lacking(), 4u);
  // At most two placed a call: the rest keep their turn.
  EXPECT_THAT(Ids(scheduler_.PlaceLacking(10, pool_, 2, false)), ElementsAre("high", "old"));
  EXPECT_THAT(Ids(scheduler_.PlaceLacking(10, pool_, 2, false)), ElementsAre("young", "failed"));
  EXPECT_EQ(scheduler_.lacking(), 0u);
  // A gang placed lacks nothing until told so again.
  EXPECT_THAT(scheduler_.PlaceLacking(10, pool_, 8, false), IsEmpty());
}

TEST_F(LackingGangsTest, ARemainderThatDoesNotFitWaitsLongerEachTime) {
  Run("g", 4);
  pool_.outcome["g"] = PlacementOutcome::kRetryLater;
  scheduler_.Lacks("g", 0, true, false);
  EXPECT_EQ(scheduler_.NextLackingDue(), 0);
  std::vector<QueueScheduler::Remainder> tried = scheduler_.PlaceLacking(0, pool_, 8, false);
  ASSERT_EQ(tried.size(), 1u);
  EXPECT_EQ(tried[0].placement.outcome, PlacementOutcome::kRetryLater);
  ASSERT_NE(tried[0].placement.reason, nullptr);
  EXPECT_EQ(tried[0].placement.reason->gang, "g");
  EXPECT_EQ(scheduler_.WhyLacking("g"), tried[0].placement.reason);
  EXPECT_EQ(scheduler_.NextLackingDue(), 100);
  EXPECT_THAT(scheduler_.PlaceLacking(99, pool_, 8, false), IsEmpty());  // not due
  scheduler_.PlaceLacking(100, pool_, 8, false);
  EXPECT_EQ(scheduler_.NextLackingDue(), 300);  // 200 more
  // Room came free: every lacking gang is tried, due or not.
  scheduler_.PlaceLacking(101, pool_, 8, /*all=*/true);
  EXPECT_EQ(pool_.tries["g"], 3);
  EXPECT_EQ(scheduler_.NextLackingDue(), 501);  // 400, the most
  // Lost again, it starts from the first wait.
  pool_.outcome.erase("g");
  scheduler_.Lacks("g", 600, true, /*after_backoff=*/true);
  EXPECT_EQ(scheduler_.NextLackingDue(), 1000);
  scheduler_.Lacks("g", 600, true, /*after_backoff=*/false);
  EXPECT_EQ(scheduler_.NextLackingDue(), 600);
  EXPECT_THAT(Ids(scheduler_.PlaceLacking(600, pool_, 8, false)), ElementsAre("g"));
}

TEST_F(LackingGangsTest, AnInfeasibleRemainderWaitsForTheNodesToChange) {
  Run("g", 4);
  pool_.outcome["g"] = PlacementOutcome::kInfeasible;
  scheduler_.Lacks("g", 0, true, false);
  scheduler_.PlaceLacking(0, pool_, 8, false);
  EXPECT_TRUE(scheduler_.LacksInfeasibly("g"));
  EXPECT_EQ(scheduler_.NextLackingDue(), std::nullopt);
  EXPECT_THAT(scheduler_.PlaceLacking(5000, pool_, 8, /*all=*/true), IsEmpty());
  EXPECT_EQ(scheduler_.lacking(), 1u);  // still waiting, as infeasible
  pool_.outcome.erase("g");
  scheduler_.NodesChanged(6000);
  EXPECT_FALSE(scheduler_.LacksInfeasibly("g"));
  EXPECT_THAT(Ids(scheduler_.PlaceLacking(6000, pool_, 8, false)), ElementsAre("g"));
}

TEST_F(LackingGangsTest, AGangThatEndedOrWasNeverAdmittedLacksNothing) {
  Run("ends", 8);
  scheduler_.Lacks("ends", 0, true, false);
  scheduler_.Finish("ends");
  EXPECT_EQ(scheduler_.lacking(), 0u);
  // Only an admitted gang can lack bundles.
  pool_.Add("waits", Gpus(32));
  ASSERT_TRUE(scheduler_.Submit({"waits", "", 0, Gpus(32), true, std::nullopt}, 0).ok());
  scheduler_.Lacks("waits", 0, true, false);
  scheduler_.Lacks("unknown", 0, true, false);
  EXPECT_EQ(scheduler_.lacking(), 0u);
}

}  // namespace
}  // namespace berth
