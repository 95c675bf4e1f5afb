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

  QueueConfig config = QueueConfig().WithCohort("gpus").value().WithQueue(spec).value();
  QueueConfig restored = QueueConfigFromRecord(QueueConfigToRecord(config)).value();
  ASSERT_NE(restored.FindQueue("team-a"), nullptr);
  EXPECT_EQ(restored.FindQueue("team-a")->borrowing_limit, spec.borrowing_limit);
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

}  // namespace
}  // namespace berth
