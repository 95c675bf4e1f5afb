// The logger's lines as a daemon writes them: program, level letter, whole
// lines, and the level that filters them.
#include "common/log.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// stderr of `write`, captured through a file.
template <typename Write>
std::string Stderr(Write write) {
  char path[] = "/tmp/berth-log-XXXXXX";
  const int fd = mkstemp(path);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  write();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

TEST(LogTest, ALineHasTheTimeTheProgramTheLevelAndTheText) {
  InitLog("berth-test", LogLevel::kInfo);
  const std::string out = Stderr([] { LogWarning("node ", 7, " missed its heartbeats"); });
  EXPECT_THAT(out, ContainsRegex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ berth-test W node 7 missed "
                                 "its heartbeats\n$"));
}

TEST(LogTest, LinesBelowTheLevelAreDropped) {
  InitLog("berth-test", LogLevel::kWarning);
  const std::string out = Stderr([] {
    LogDebug("debug line");
    LogInfo("info line");
    LogError("error line");
  });
  EXPECT_THAT(out, Not(HasSubstr("debug line")));
  EXPECT_THAT(out, Not(HasSubstr("info line")));
  EXPECT_THAT(out, HasSubstr("berth-test E error line"));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
}

TEST(LogTest, LevelsParseByNameAndOthersAreErrorsNamingTheFlag) {
  EXPECT_EQ(ParseLogLevel("debug", "--log-level").value(), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("WARNING", "--log-level").value(), LogLevel::kWarning);
  absl::StatusOr<LogLevel> bad = ParseLogLevel("loud", "--log-level");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--log-level: 'loud' is not a log level"));
}

}  // namespace
}  // namespace berth
