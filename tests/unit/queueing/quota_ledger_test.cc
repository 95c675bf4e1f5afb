#include "queueing/quota_ledger.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

QueueSpec Queue(const std::string& name, const std::string& cohort, double gpus,
                std::optional<double> borrow = std::nullopt,
                std::optional<double> lend = std::nullopt) {
  QueueInput in;
  in.name = name;
  in.cohort = cohort;
  in.nominal = {{"GPU", gpus}};
  if (borrow) in.borrowing_limit = {{"GPU", *borrow}};
  if (lend) in.lending_limit = {{"GPU", *lend}};
  return QueueSpecFromInput(in, "queue").value();
}

ResourceSet Gpus(double n) { return ResourceSet::Of({{kGpu, n}, {kCpu, 4 * n}}); }

TEST(QuotaLedger, WithoutACohortAQueueStaysWithinItsQuota) {
  QueueConfig config = QueueConfig().WithQueue(Queue("solo", "", 8)).value();
  QuotaLedger ledger(&config);
  EXPECT_TRUE(ledger.Check("solo", Gpus(8)).fits);
  ledger.Add("solo", Gpus(6));
  QuotaVerdict v = ledger.Check("solo", Gpus(4));
  EXPECT_FALSE(v.fits);
  EXPECT_FALSE(v.never);
  ASSERT_NE(v.shortfall, nullptr);
  EXPECT_EQ(v.shortfall->limit, QuotaShortfall::Limit::kNominal);
  EXPECT_EQ(v.shortfall->resource, "GPU");
  EXPECT_EQ(v.shortfall->in_use, Quantity::Whole(6));
  EXPECT_EQ(v.shortfall->asked, Quantity::Whole(4));
  EXPECT_EQ(v.shortfall->quota, Quantity::Whole(8));
  EXPECT_EQ(QuotaShortfallText(*v.shortfall),
            "queue solo: GPU 6 in use + 4 asked would pass its quota of 8");
  EXPECT_TRUE(ledger.Check("solo", Gpus(4), {{"solo", Gpus(2)}}).fits);
  EXPECT_TRUE(ledger.Check("solo", Gpus(9)).never);
  // CPU is not in the quota: unlimited.
  EXPECT_TRUE(ledger.Check("solo", ResourceSet::Of({{kCpu, 1000}})).fits);
  // The default queue names no quota at all.
  EXPECT_TRUE(ledger.Check("default", Gpus(1000)).fits);
}

TEST(QuotaLedger, CohortMembersBorrowIdleQuotaUpToTheirLimits) {
  QueueConfig config = QueueConfig()
                           .WithCohort("c")
                           .value()
                           .WithQueue(Queue("a", "c", 8, /*borrow=*/4))
                           .value()
                           .WithQueue(Queue("b", "c", 8))
                           .value();
  QuotaLedger ledger(&config);
  QuotaVerdict v = ledger.Check("a", Gpus(12));
  EXPECT_TRUE(v.fits);
  EXPECT_FALSE(v.within_nominal);
  EXPECT_FALSE(ledger.Check("a", Gpus(13)).fits);  // borrowing limit 4
  EXPECT_TRUE(ledger.Check("a", Gpus(13)).never);
  ledger.Add("a", Gpus(12));
  EXPECT_EQ(ledger.Borrowed("a"), ResourceSet::Of({{kGpu, 4}}));
  EXPECT_TRUE(ledger.IsBorrowing("a", Gpus(1)));
  // b has 4 of its 8 left: a borrowed the rest.
  EXPECT_TRUE(ledger.Check("b", Gpus(4)).fits);
  v = ledger.Check("b", Gpus(6));
  EXPECT_FALSE(v.fits);
  EXPECT_TRUE(v.within_nominal);  // so b may reclaim what a borrowed
  ASSERT_NE(v.shortfall, nullptr);
  EXPECT_EQ(v.shortfall->limit, QuotaShortfall::Limit::kCohortPool);
  EXPECT_EQ(v.shortfall->cohort, "c");
  EXPECT_EQ(v.shortfall->queue, "b");
  EXPECT_THAT(QuotaShortfallText(*v.shortfall), HasSubstr("cohort c has no GPU to lend queue b"));
}

TEST(QuotaLedger, ALendingLimitKeepsPartOfTheQuotaForItsOwner) {
  QueueConfig config = QueueConfig()
                           .WithCohort("c")
                           .value()
                           .WithQueue(Queue("a", "c", 8))
                           .value()
                           .WithQueue(Queue("b", "c", 8, std::nullopt, /*lend=*/2))
                           .value();
  QuotaLedger ledger(&config);
  EXPECT_TRUE(ledger.Check("a", Gpus(10)).fits);
  EXPECT_FALSE(ledger.Check("a", Gpus(11)).fits);  // b lends only 2
  ledger.Add("a", Gpus(10));
  EXPECT_TRUE(ledger.Check("b", Gpus(6)).fits);  // b's own 6 are never lent
  EXPECT_FALSE(ledger.Check("b", Gpus(7)).fits);
}

TEST(QuotaLedger, ShareIsTheWeightedDominantShare) {
  QueueInput in;
  in.name = "heavy";
  in.weight = 2;
  QueueConfig config = QueueConfig().WithQueue(QueueSpecFromInput(in, "q").value()).value();
  QuotaLedger ledger(&config);
  const ResourceSet capacity = ResourceSet::Of({{kGpu, 10}, {kCpu, 100}});
  ledger.Add("heavy", ResourceSet::Of({{kGpu, 2}, {kCpu, 50}}));
  ledger.Add("default", ResourceSet::Of({{kGpu, 3}}));
  EXPECT_DOUBLE_EQ(ledger.Share("heavy", capacity), 0.25);  // CPU 0.5, weight 2
  EXPECT_DOUBLE_EQ(ledger.Share("default", capacity), 0.3);
  ledger.Remove("default", ResourceSet::Of({{kGpu, 3}}));
  EXPECT_TRUE(ledger.Usage("default").empty());
}

// GPU:<T> counts GPUs already counted as GPU: the one holder of the
// cluster's one A10 does not get a share of 100% for it, unless its quota
// names A10 GPUs (then they are what it is entitled to).
TEST(QuotaLedger, ShareCountsGpusOfATypeOnlyWhereTheQuotaNamesThem) {
  QueueInput typed;
  typed.name = "typed";
  typed.nominal = {{"GPU:A10", 1}};
  QueueConfig config = QueueConfig()
                           .WithQueue(Queue("plain", "", 8))
                           .value()
                           .WithQueue(QueueSpecFromInput(typed, "q").value())
                           .value();
  QuotaLedger ledger(&config);
  const ResourceSet capacity = ResourceSet::Of({{kGpu, 16}, {"GPU:A10", 1}, {"GPU:T4", 15}});
  const ResourceSet one_a10 = ResourceSet::Of({{kGpu, 1}, {"GPU:A10", 1}});
  ledger.Add("plain", one_a10);
  ledger.Add("typed", one_a10);
  EXPECT_DOUBLE_EQ(ledger.Share("plain", capacity), 1.0 / 16);
  EXPECT_DOUBLE_EQ(ledger.Share("typed", capacity), 1.0);
  EXPECT_DOUBLE_EQ(ledger.ShareAt("plain", ResourceSet::Of({{kGpu, 4}}), capacity), 0.25);
}

TEST(QuotaLedger, BelowNominalMeansLessOfEveryResourceTheQuotaNames) {
  QueueConfig config = QueueConfig().WithQueue(Queue("a", "", 8)).value();
  QuotaLedger ledger(&config);
  EXPECT_TRUE(ledger.IsBelowNominal("a", Gpus(1)));
  ledger.Add("a", Gpus(7));
  EXPECT_TRUE(ledger.IsBelowNominal("a", Gpus(4)));  // 7 < 8, though 7 + 4 > 8
  EXPECT_FALSE(ledger.IsBelowNominal("a", ResourceSet::Of({{kCpu, 1}})));  // CPU: not named
  ledger.Add("a", Gpus(1));
  EXPECT_FALSE(ledger.IsBelowNominal("a", Gpus(1)));
  EXPECT_FALSE(ledger.IsBelowNominal("unknown", Gpus(1)));
}

}  // namespace
}  // namespace berth
