#include "common/command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(RunCommandTest, SaysHowTheProgramEndedAndWhatItWrote) {
  absl::StatusOr<CommandOutcome> ok = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2"},
                                                 CurrentEnvironment(), absl::Seconds(10));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->ok());
  EXPECT_EQ(ok->output, "out\nerr\n");

  absl::StatusOr<CommandOutcome> failed = RunCommand(
      {"/bin/sh", "-c", "echo \"$GREETING\"; exit 3"}, {"GREETING=hello"}, absl::Seconds(10));
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->ok());
  EXPECT_EQ(failed->Ending(absl::Seconds(10)), "exit 3");
  EXPECT_EQ(failed->output, "hello\n");

  absl::StatusOr<CommandOutcome> killed =
      RunCommand({"/bin/sh", "-c", "kill -9 $$"}, {}, absl::Seconds(10));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->Ending(absl::Seconds(10)), "signal 9");

  absl::StatusOr<CommandOutcome> missing =
      RunCommand({"no-such-program-here"}, CurrentEnvironment(), absl::Seconds(10));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 127);
  EXPECT_THAT(missing->output, HasSubstr("cannot run no-such-program-here"));
}

TEST(RunCommandTest, AProgramThatOutlivesTheTimeoutIsKilledWithWhatItStarted) {
  // The child's child holds the pipe too: killing only the shell would
  // leave the read waiting for it.
  absl::StatusOr<CommandOutcome> slow =
      RunCommand({"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, absl::Milliseconds(300));
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  EXPECT_FALSE(slow->ok());
  EXPECT_EQ(slow->Ending(absl::Milliseconds(300)), "no answer within 300ms");
}

TEST(TextTailTest, KeepsTheEndWithoutSurroundingWhiteSpace) {
  EXPECT_EQ(TextTail("  short\n"), "short");
  EXPECT_EQ(TextTail("0123456789\n", 4), "789");
}

}  // namespace
}  // namespace berth
