#include "common/help_json.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace berth {
namespace {

TEST(HelpJsonTest, ListsEveryLongFlagWithWhatItTakes) {
  CLI::App app("test", "berth-test");
  std::string listen = "127.0.0.1:6380";
  bool verbose = false;
  app.add_option("--listen", listen, "where to serve")->capture_default_str();
  app.add_option("--head", listen, "the head")->required()->envname("BERTH_HEAD");
  app.add_flag("-v,--verbose", verbose, "say more");
  app.add_subcommand("train")->add_option("--steps", listen, "steps");
  const nlohmann::json json = nlohmann::json::parse(FlagsJson(app));
  EXPECT_EQ(json["program"], "berth-test");
  std::map<std::string, nlohmann::json> flags;
  for (const auto& flag : json["flags"]) flags[flag["name"]] = flag;
  ASSERT_TRUE(flags.count("listen"));
  EXPECT_EQ(flags["listen"]["takes_value"], true);
  EXPECT_EQ(flags["listen"]["default"], "127.0.0.1:6380");
  EXPECT_EQ(flags["head"]["required"], true);
  EXPECT_EQ(flags["head"]["env"], "BERTH_HEAD");
  EXPECT_EQ(flags["verbose"]["takes_value"], false);
  EXPECT_EQ(flags.count("help"), 0u);
  EXPECT_EQ(json["subcommands"]["train"]["flags"][0]["name"], "steps");
}

TEST(HelpJsonTest, TheFlagPrintsAndExitsBeforeRequiredFlagsAreChecked) {
  CLI::App app("test", "berth-test");
  std::string head;
  app.add_option("--head", head)->required();
  AddHelpJsonFlag(app);
  const char* argv[] = {"berth-test", "--help-json"};
  testing::internal::CaptureStdout();
  int code = -1;
  try {
    app.parse(2, const_cast<char**>(argv));
  } catch (const CLI::ParseError& e) {
    code = e.get_exit_code();
  }
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  EXPECT_EQ(nlohmann::json::parse(out)["flags"][0]["name"], "head");
}

}  // namespace
}  // namespace berth
