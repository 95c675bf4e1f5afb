#include "queueing/queue_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

QueueInput TeamInput() {
  QueueInput in;
  in.name = "team-a";
  in.cohort = "gpus";
  in.nominal = {{"GPU", 8}, {"GPU:A10G", 4}};
  in.borrowing_limit = {{"GPU", 8}};
  in.lending_limit = {{"GPU", 2}};
  in.weight = 2;
  in.within_queue_preemption = "LowerOrNewerEqualPriority";
  return in;
}

TEST(QueueSpecFromInput, KeepsEveryFieldAndZeroQuotas) {
  QueueInput in = TeamInput();
  in.nominal["CPU"] = 0;
  QueueSpec q = QueueSpecFromInput(in, "queue").value();
  EXPECT_EQ(q.name, "team-a");
  EXPECT_EQ(q.cohort, "gpus");
  EXPECT_EQ(q.nominal.at("GPU"), Quantity::Whole(8));
  EXPECT_EQ(q.nominal.at("CPU"), Quantity());  // a zero quota limits CPUs
  EXPECT_EQ(q.borrowing_limit.at("GPU"), Quantity::Whole(8));
  EXPECT_EQ(q.lending_limit.at("GPU"), Quantity::Whole(2));
  EXPECT_EQ(q.weight, 2);
  EXPECT_EQ(q.within_queue_preemption, WithinQueuePreemption::kLowerOrNewerEqualPriority);
  in.within_queue_preemption = "";  // the default
  EXPECT_EQ(QueueSpecFromInput(in, "queue")->within_queue_preemption,
            WithinQueuePreemption::kLowerPriority);
}

TEST(QueueSpecFromInput, RefusesBadInputNamingTheField) {
  struct Case {
    void (*edit)(QueueInput&);
    const char* field;
  };
  const Case cases[] = {
      {[](QueueInput& in) { in.name = ""; }, "queue.name"},
      {[](QueueInput& in) { in.name = "Bad Name!"; }, "queue.name"},
      {[](QueueInput& in) { in.nominal["GPU"] = -1; }, "queue.nominal_quota[\"GPU\"]"},
      {[](QueueInput& in) { in.nominal["GPU"] = std::nan(""); }, "queue.nominal_quota[\"GPU\"]"},
      {[](QueueInput& in) { in.nominal["GPU:"] = 1; }, "queue.nominal_quota[\"GPU:\"]"},
      {[](QueueInput& in) { in.borrowing_limit["GPU"] = -2; }, "queue.borrowing_limit[\"GPU\"]"},
      {[](QueueInput& in) { in.lending_limit["GPU"] = 9; }, "queue.lending_limit[\"GPU\"]"},
      {[](QueueInput& in) { in.borrowing_limit["CPU"] = 1; }, "queue.borrowing_limit[\"CPU\"]"},
      {[](QueueInput& in) { in.weight = 0; }, "queue.weight"},
      {[](QueueInput& in) { in.within_queue_preemption = "lowerpriority"; },
       "queue.within_queue_preemption"},
      {[](QueueInput& in) { in.max_time_limit_s = -1; }, "queue.max_time_limit_s"},
      {[](QueueInput& in) {
         in.default_time_limit_s = 7200;
         in.max_time_limit_s = 3600;
       },
       "queue.default_time_limit_s"},
      {[](QueueInput& in) {
         in.cohort = "";
         in.lending_limit.clear();
       },
       "queue.borrowing_limit"},
  };
  for (const Case& c : cases) {
    QueueInput in = TeamInput();
    c.edit(in);
    absl::StatusOr<QueueSpec> q = QueueSpecFromInput(in, "queue");
    ASSERT_FALSE(q.ok()) << c.field;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(q.status().message(), HasSubstr(c.field));
  }
}

TEST(QueueConfig, StartsWithAnUnlimitedDefaultQueue) {
  QueueConfig config;
  const QueueSpec* q = config.Resolve("", "queue").value();
  EXPECT_EQ(q->name, kDefaultQueue);
  EXPECT_TRUE(q->nominal.empty());
  EXPECT_EQ(config.Resolve("nope", "spec.queue").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.Resolve("nope", "spec.queue").status().message(), HasSubstr("spec.queue"));
  EXPECT_FALSE(config.WithoutQueue("default").ok());
}

TEST(QueueConfig, AQueueNeedsItsCohortAndAChangeRefusedChangesNothing) {
  QueueConfig config;
  QueueSpec team = QueueSpecFromInput(TeamInput(), "queue").value();
  absl::StatusOr<QueueConfig> refused = config.WithQueue(team);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cohort"));
  EXPECT_EQ(config.FindQueue("team-a"), nullptr);

  QueueConfig with = config.WithCohort("gpus").value().WithQueue(team).value();
  ASSERT_NE(with.FindQueue("team-a"), nullptr);
  EXPECT_EQ(with.WithoutCohort("gpus").status().code(), absl::StatusCode::kFailedPrecondition);
  QueueConfig without = with.WithoutQueue("team-a").value();
  EXPECT_EQ(without.FindQueue("team-a"), nullptr);
  EXPECT_NE(with.FindQueue("team-a"), nullptr);  // the old config is untouched
  EXPECT_TRUE(without.WithoutCohort("gpus").ok());
}

TEST(QueueConfig, PriorityClassesNameValuesAndPlainPrioritiesStillWork) {
  QueueConfig config = QueueConfig().WithPriorityClass({"production", 1000}).value();
  EXPECT_EQ(config.PriorityOf("production", 5, "priority_class").value(), 1000);
  EXPECT_EQ(config.PriorityOf("", 5, "priority_class").value(), 5);
  absl::StatusOr<int32_t> unknown = config.PriorityOf("urgent", 0, "spec.priority_class");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("spec.priority_class"));
}

}  // namespace
}  // namespace berth
