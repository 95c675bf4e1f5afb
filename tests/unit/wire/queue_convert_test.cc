#include "wire/queue_convert.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(QueueConvert, AQueueRoundTripsThroughTheApiAndTheRecord) {
  v1::Queue proto;
  proto.set_name("team-a");
  proto.set_cohort("gpus");
  (*proto.mutable_nominal_quota())["GPU"] = 8;
  (*proto.mutable_nominal_quota())["GPU:A10G"] = 0;  // a zero quota is kept
  (*proto.mutable_borrowing_limit())["GPU"] = 4;
  (*proto.mutable_lending_limit())["GPU"] = 2;
  proto.set_weight(3);
  proto.set_team("ml-research");
  proto.set_within_queue_preemption("Never");
  QueueSpec spec = QueueFromProto(proto, "queue").value();
  EXPECT_EQ(spec.nominal.at("GPU:A10G"), Quantity());
  v1::Queue back;
  QueueToProto(spec, &back);
  EXPECT_EQ(back.name(), "team-a");
  EXPECT_EQ(back.cohort(), "gpus");
  EXPECT_EQ(back.nominal_quota().at("GPU"), 8);
  EXPECT_EQ(back.nominal_quota().at("GPU:A10G"), 0);
  EXPECT_EQ(back.borrowing_limit().at("GPU"), 4);
  EXPECT_EQ(back.lending_limit().at("GPU"), 2);
  EXPECT_EQ(back.weight(), 3);
  EXPECT_EQ(back.team(), "ml-research");
  EXPECT_EQ(back.within_queue_preemption(), "Never");

  QueueConfig config = QueueConfig().WithCohort("gpus").value().WithQueue(spec).value();
  QueueConfig restored = QueueConfigFromRecord(QueueConfigToRecord(config)).value();
  ASSERT_NE(restored.FindQueue("team-a"), nullptr);
  EXPECT_EQ(restored.FindQueue("team-a")->borrowing_limit, spec.borrowing_limit);
  EXPECT_EQ(restored.FindQueue("team-a")->within_queue_preemption, WithinQueuePreemption::kNever);
  EXPECT_EQ(restored.cohorts(), config.cohorts());
  EXPECT_NE(restored.FindQueue("default"), nullptr);
}

TEST(QueueConvert, BadInputNamesTheFieldAndABadRecordIsDataLoss) {
  v1::Queue proto;
  proto.set_name("team-a");
  (*proto.mutable_nominal_quota())["GPU"] = -1;
  absl::StatusOr<QueueSpec> spec = QueueFromProto(proto, "queue");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("queue.nominal_quota[\"GPU\"]"));

  v1::QueueConfigRecord record;
  v1::Queue* orphan = record.add_queues();
  orphan->set_name("team-b");
  orphan->set_cohort("gone");  // a cohort the record does not have
  EXPECT_EQ(QueueConfigFromRecord(record).status().code(), absl::StatusCode::kDataLoss);
}

TEST(QueueConvert, ApplyingAddsOrReplacesEverythingNamedOrNothing) {
  QueueConfig base = QueueConfig().WithCohort("org").value();
  google::protobuf::RepeatedPtrField<std::string> cohorts;
  cohorts.Add("research");
  google::protobuf::RepeatedPtrField<v1::Queue> queues;
  v1::Queue* a = queues.Add();
  a->set_name("team-a");
  a->set_cohort("research");
  (*a->mutable_nominal_quota())["GPU"] = 4;
  google::protobuf::RepeatedPtrField<v1::PriorityClass> classes;
  v1::PriorityClass* high = classes.Add();
  high->set_name("high");
  high->set_value(100);
  QueueConfig applied = QueueConfigWith(base, cohorts, queues, classes).value();
  EXPECT_TRUE(applied.HasCohort("org"));  // what the file does not name stays
  EXPECT_TRUE(applied.HasCohort("research"));
  ASSERT_NE(applied.FindQueue("team-a"), nullptr);
  EXPECT_EQ(applied.PriorityOf("high", 0, "priority_class").value(), 100);
  // The classes survive the record too.
  QueueConfig restored = QueueConfigFromRecord(QueueConfigToRecord(applied)).value();
  EXPECT_EQ(restored.PriorityOf("high", 0, "priority_class").value(), 100);

  // A bad second queue: the error names it, and nothing is returned.
  v1::Queue* bad = queues.Add();
  bad->set_name("team-b");
  bad->set_cohort("nowhere");
  absl::StatusOr<QueueConfig> refused = QueueConfigWith(base, cohorts, queues, classes);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(refused.status().message(), HasSubstr("queues[1].cohort"));
  high->set_name("not a name");
  EXPECT_THAT(QueueConfigWith(base, cohorts, {}, classes).status().message(),
              HasSubstr("priority_classes[0].name"));
}

}  // namespace
}  // namespace berth
