#include "worker/flags.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(WorkerFlagsTest, TrainDefaultsAreValid) { EXPECT_TRUE(ValidateTrainFlags({}).ok()); }

TEST(WorkerFlagsTest, BadTrainFlagsAreNamed) {
  TrainFlags flags;
  flags.steps = 0;
  EXPECT_THAT(ValidateTrainFlags(flags).message(), HasSubstr("--steps"));
  for (double lr : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    flags = {};
    flags.lr = lr;
    EXPECT_THAT(ValidateTrainFlags(flags).message(), HasSubstr("--lr")) << lr;
  }
  flags = {};
  flags.batch_size = 0;
  EXPECT_THAT(ValidateTrainFlags(flags).message(), HasSubstr("--batch-size"));
  flags = {};
  flags.checkpoint_every = 0;  // = only at the end
  EXPECT_TRUE(ValidateTrainFlags(flags).ok());
}

TrainerFlags GoodTrainer() {
  TrainerFlags flags;
  flags.port = 29500;
  flags.world_size = 2;
  flags.checkpoint_dir = "/tmp/ckpt";
  return flags;
}

TEST(WorkerFlagsTest, TrainerFlags) {
  EXPECT_TRUE(ValidateTrainerFlags(GoodTrainer()).ok());
  TrainerFlags flags = GoodTrainer();
  flags.head = "10.0.0.1:6380";
  flags.job_id = "job-1";
  EXPECT_TRUE(ValidateTrainerFlags(flags).ok());
  flags.head = "[::1]:6380";
  EXPECT_TRUE(ValidateTrainerFlags(flags).ok());
}

TEST(WorkerFlagsTest, BadTrainerFlagsAreNamed) {
  struct Case {
    void (*mutate)(TrainerFlags&);
    const char* flag;
  };
  const Case cases[] = {
      {[](TrainerFlags& f) { f.port = 0; }, "--port"},
      {[](TrainerFlags& f) { f.port = 65536; }, "--port"},
      {[](TrainerFlags& f) { f.world_size = 0; }, "--world-size"},
      {[](TrainerFlags& f) { f.checkpoint_dir = ""; }, "--checkpoint-dir"},
      {[](TrainerFlags& f) { f.head = "h:1"; }, "--head"},
      {[](TrainerFlags& f) { f.job_id = "j"; }, "--job-id"},
      {[](TrainerFlags& f) {
         f.head = "host";
         f.job_id = "j";
       },
       "--head"},
      {[](TrainerFlags& f) {
         f.head = "host:0";
         f.job_id = "j";
       },
       "--head"},
      {[](TrainerFlags& f) { f.timeout_s = 0; }, "--timeout-s"},
      {[](TrainerFlags& f) { f.timeout_s = std::nan(""); }, "--timeout-s"},
  };
  for (const Case& c : cases) {
    TrainerFlags flags = GoodTrainer();
    c.mutate(flags);
    absl::Status status = ValidateTrainerFlags(flags);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(status.message(), HasSubstr(c.flag));
  }
}

TEST(WorkerFlagsTest, RelayFlagsAreNamed) {
  RelayFlags flags;
  flags.report_file = "/tmp/reports/attempt-0.jsonl";
  flags.world_size = 2;
  EXPECT_TRUE(ValidateRelayFlags(flags).ok());
  flags.head = "10.0.0.1:6380";
  flags.job_id = "job-1";
  EXPECT_TRUE(ValidateRelayFlags(flags).ok());
  flags.head = "10.0.0.1";
  EXPECT_THAT(ValidateRelayFlags(flags).message(), HasSubstr("--head"));
  flags.head.clear();
  EXPECT_THAT(ValidateRelayFlags(flags).message(), HasSubstr("--job-id"));
  flags = {};
  flags.world_size = 2;
  EXPECT_THAT(ValidateRelayFlags(flags).message(), HasSubstr("--report-file"));
  flags.report_file = "r";
  flags.world_size = 0;
  EXPECT_THAT(ValidateRelayFlags(flags).message(), HasSubstr("--world-size"));
}

}  // namespace
}  // namespace berth
