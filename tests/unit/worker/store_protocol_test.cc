#include "worker/store_protocol.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(WorkerStoreProtocolTest, Keys) {
  EXPECT_EQ(DoneKey(3), "berth/done/3");
  EXPECT_EQ(StartupKey(7), "berth/startup/7");
  EXPECT_EQ(GroupKeyPrefix(0), "berth/group/0/");
}

TEST(WorkerStoreProtocolTest, ResumeReadyIsWrittenLast) {
  EXPECT_THAT(ResumePointWrites(std::nullopt, 0), ElementsAre(Pair("berth/resume/ready", "0")));
  EXPECT_THAT(ResumePointWrites(std::string("bytes"), 40),
              ElementsAre(Pair("berth/resume/step", "40"), Pair("berth/resume/data", "bytes"),
                          Pair("berth/resume/ready", "1")));
}

TEST(WorkerStoreProtocolTest, CheckpointStepIsWrittenAfterItsData) {
  EXPECT_THAT(CheckpointWrites(50, "bytes"), ElementsAre(Pair("berth/checkpoint/data", "bytes"),
                                                         Pair("berth/checkpoint/step", "50")));
}

TEST(WorkerStoreProtocolTest, ProgressRoundTrips) {
  const Progress in{123, 0.0123456789f};
  absl::StatusOr<Progress> out = ParseProgress(FormatProgress(in), kProgressKey);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->step, 123u);
  EXPECT_EQ(static_cast<float>(out->loss), static_cast<float>(in.loss));
}

TEST(WorkerStoreProtocolTest, BadProgressNamesTheKey) {
  for (const char* text : {"", "12", "x 0.5", "-1 0.5", "1 zero", "1 0.5 7"}) {
    absl::StatusOr<Progress> out = ParseProgress(text, kProgressKey);
    ASSERT_FALSE(out.ok()) << text;
    EXPECT_THAT(out.status().message(), HasSubstr("berth/progress")) << text;
  }
}

TEST(WorkerStoreProtocolTest, RankStartupRoundTrips) {
  const RankStartup in{1700000000123456, 1700000000987654};
  EXPECT_EQ(FormatRankStartup(in), "1700000000123456 1700000000987654");
  absl::StatusOr<RankStartup> out = ParseRankStartup(FormatRankStartup(in), StartupKey(2));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->main_unix_us, in.main_unix_us);
  EXPECT_EQ(out->joined_unix_us, in.joined_unix_us);
}

TEST(WorkerStoreProtocolTest, BadRankStartupNamesTheKey) {
  for (const char* text : {"", "12", "x 5", "-1 5", "1 -5", "1 2 3", "1.5 2"}) {
    absl::StatusOr<RankStartup> out = ParseRankStartup(text, StartupKey(2));
    ASSERT_FALSE(out.ok()) << text;
    EXPECT_THAT(out.status().message(), HasSubstr("berth/startup/2")) << text;
  }
}

TEST(WorkerStoreProtocolTest, Steps) {
  EXPECT_EQ(*ParseStep("0", kResumeStepKey), 0u);
  EXPECT_EQ(*ParseStep("18446744073709551615", kResumeStepKey), UINT64_MAX);
  EXPECT_FALSE(ParseStep("", kResumeStepKey).ok());
  EXPECT_FALSE(ParseStep("+3", kResumeStepKey).ok());
  EXPECT_FALSE(ParseStep("3.5", kResumeStepKey).ok());
}

TEST(WorkerStoreProtocolTest, BytesRoundTrip) {
  const std::string text("a\0b", 3);
  EXPECT_EQ(FromBytes(ToBytes(text)), text);
}

TEST(WorkerStoreProtocolTest, Fnv1a64KnownValuesAndChaining) {
  EXPECT_EQ(Fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  EXPECT_EQ(Fnv1a64("bar", 3, Fnv1a64("foo", 3)), Fnv1a64("foobar", 6));
  EXPECT_EQ(HashToHex(0xaf63dc4c8601ec8cULL), "af63dc4c8601ec8c");
  EXPECT_EQ(HashToHex(1), "0000000000000001");
}

}  // namespace
}  // namespace berth
