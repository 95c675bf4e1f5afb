// The bash completion script, run by a real bash against a small command
// tree.
#include "client/completion.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

class CompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    app_.add_option("--address", address_);
    CLI::App* job = app_.add_subcommand("job", "");
    CLI::App* submit = job->add_subcommand("submit", "");
    submit->add_option("--wait", wait_);
    submit->add_option("--num-workers", wait_);
    job->add_subcommand("list", "");
    app_.add_subcommand("nodes", "");
    char path[] = "/tmp/berth-completion-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    script_ = path;
    std::ofstream(script_) << BashCompletion(app_);
  }
  void TearDown() override { std::remove(script_.c_str()); }

  // What bash completes for the command line `words` (the last one being
  // completed), sorted, one string.
  std::string Complete(const std::string& words) {
    const std::string command = absl::StrCat(
        "env PATH=/usr/bin:/bin bash -c 'source ", script_, "; COMP_WORDS=(", words,
        "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _berth; printf \"%s\\n\" \"${COMPREPLY[@]}\" "
        "| sort | tr \"\\n\" \" \"' 2>&1");
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
    pclose(pipe);
    return out;
  }

  CLI::App app_{"berth", "berth"};
  std::string address_, wait_, script_;
};

TEST_F(CompletionTest, CommandsSubcommandsAndTheirFlagsComplete) {
  EXPECT_EQ(Complete("berth \"\""), "job nodes ");
  EXPECT_EQ(Complete("berth j"), "job ");
  EXPECT_EQ(Complete("berth job \"\""), "list submit ");
  EXPECT_EQ(Complete("berth --address x job su"), "submit ");
  EXPECT_EQ(Complete("berth job submit --w"), "--wait ");
  EXPECT_EQ(Complete("berth job submit --a"), "--address ");  // a global flag
}

TEST_F(CompletionTest, NothingOfBerthsCompletesInTheUsersCommand) {
  EXPECT_EQ(Complete("berth job submit -- --w"), " ");
}

}  // namespace
}  // namespace berth
