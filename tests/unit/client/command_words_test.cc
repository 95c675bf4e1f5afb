// Unknown command words, found the way berth's command tree is built
// (global options with values, groups, a group with a positional), and the
// nearest command suggested.
#include "client/command_words.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

class CommandWordsTest : public ::testing::Test {
 protected:
  CommandWordsTest() : app_("test", "berth") {
    app_.fallthrough();
    app_.add_option("--address", address_);
    app_.add_option("-o,--output", output_);
    app_.add_subcommand("nodes");
    app_.add_subcommand("status");
    app_.add_subcommand("start");
    app_.add_subcommand("submit")->add_option("FILE", file_);
    app_.add_subcommand("logs")->add_flag("-f,--follow");
    CLI::App* pg = app_.add_subcommand("pg");
    pg->add_subcommand("create")->add_option("--bundle", bundle_);
    pg->add_subcommand("list");
    CLI::App* job = app_.add_subcommand("job");
    job->add_option("ID", id_);
    job->add_subcommand("get");
    job->add_subcommand("watch");
  }
  std::optional<std::string> Unknown(std::vector<std::string> args) {
    return UnknownCommand(app_, args);
  }

  CLI::App app_;
  std::string address_, output_, file_, bundle_, id_;
};

TEST(NearestNameTest, PrefersAPrefixThenTheFewestEdits) {
  const std::vector<std::string> names = {"nodes", "status", "start", "submit",
                                          "logs",  "pg",     "job"};
  EXPECT_THAT(NearestName("sumbit", names), Optional(std::string("submit")));
  EXPECT_THAT(NearestName("lgos", names), Optional(std::string("logs")));
  EXPECT_THAT(NearestName("stat", names), Optional(std::string("status")));
  EXPECT_THAT(NearestName("jbo", names), Optional(std::string("job")));
  EXPECT_THAT(NearestName("nods", names), Optional(std::string("nodes")));
  EXPECT_EQ(NearestName("foo", names), std::nullopt);
  EXPECT_EQ(NearestName("xyzzy", names), std::nullopt);
  EXPECT_EQ(NearestName("kubectl", names), std::nullopt);
}

TEST_F(CommandWordsTest, AnUnknownCommandIsNamedWithTheNearest) {
  std::optional<std::string> message = Unknown({"sumbit", "job.yaml"});
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, HasSubstr("unknown command \"sumbit\" for \"berth\""));
  EXPECT_THAT(*message, HasSubstr("Did you mean \"berth submit\"?"));
  EXPECT_THAT(*message, HasSubstr("berth --help"));
}

TEST_F(CommandWordsTest, AFarOffWordGetsNoSuggestion) {
  std::optional<std::string> message = Unknown({"xyzzy"});
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, HasSubstr("unknown command \"xyzzy\""));
  EXPECT_THAT(*message, Not(HasSubstr("Did you mean")));
}

TEST_F(CommandWordsTest, HelpAfterAnUnknownCommandIsStillAnError) {
  EXPECT_TRUE(Unknown({"foo", "--help"}).has_value());
}

TEST_F(CommandWordsTest, SubcommandsOfAGroupAreCheckedToo) {
  std::optional<std::string> message = Unknown({"pg", "lsit"});
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, HasSubstr("unknown command \"lsit\" for \"berth pg\""));
  EXPECT_THAT(*message, HasSubstr("Did you mean \"berth pg list\"?"));
}

TEST_F(CommandWordsTest, OptionValuesAndPositionalsAreNotCommands) {
  EXPECT_EQ(Unknown({"--address", "foo", "pg", "list"}), std::nullopt);
  EXPECT_EQ(Unknown({"--address=foo:1", "nodes"}), std::nullopt);
  EXPECT_EQ(Unknown({"pg", "list", "-o", "json"}), std::nullopt);
  EXPECT_EQ(Unknown({"pg", "create", "--bundle", "GPU=1"}), std::nullopt);
  EXPECT_EQ(Unknown({"job", "job-1234"}), std::nullopt);
  EXPECT_EQ(Unknown({"job", "watch", "job-1234"}), std::nullopt);
  EXPECT_EQ(Unknown({"submit", "job.yaml"}), std::nullopt);
  EXPECT_EQ(Unknown({"logs", "-f", "job-1"}), std::nullopt);
  EXPECT_EQ(Unknown({}), std::nullopt);
}

TEST(WithWaitValuesTest, WaitTakesAnOptionalDurationAndLeavesTheCommandAlone) {
  using Args = std::vector<std::string>;
  EXPECT_EQ(WithWaitValues({"submit", "job.yaml", "--wait"}),
            (Args{"submit", "job.yaml", "--wait=until-end"}));
  EXPECT_EQ(WithWaitValues({"submit", "job.yaml", "--wait", "10m", "-o", "json"}),
            (Args{"submit", "job.yaml", "--wait=10m", "-o", "json"}));
  EXPECT_EQ(WithWaitValues({"job", "submit", "--wait", "300", "--", "python3", "t.py", "--wait"}),
            (Args{"job", "submit", "--wait=300", "--", "python3", "t.py", "--wait"}));
  EXPECT_EQ(WithWaitValues({"job", "submit", "--wait", "--", "sh", "-c", "exit 0"}),
            (Args{"job", "submit", "--wait=until-end", "--", "sh", "-c", "exit 0"}));
  EXPECT_EQ(WithWaitValues({"pg", "create", "--wait=5", "--bundle", "GPU=1"}),
            (Args{"pg", "create", "--wait=5", "--bundle", "GPU=1"}));
}

}  // namespace
}  // namespace berth
