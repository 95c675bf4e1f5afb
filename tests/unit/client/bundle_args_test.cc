#include "client/bundle_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

double Amount(const v1::Bundle& bundle, const std::string& name) {
  return bundle.resources().amounts().at(name);
}

TEST(BundleArgsTest, ParsesResourcesWithSuffixesAndFractions) {
  absl::StatusOr<v1::Bundle> bundle = ParseBundleArg("GPU=1, CPU=0.5,memory=16Gi", "--bundle[0]");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ(bundle->resources().amounts_size(), 3);
  EXPECT_EQ(Amount(*bundle, "GPU"), 1);
  EXPECT_EQ(Amount(*bundle, "CPU"), 0.5);
  EXPECT_EQ(Amount(*bundle, "memory"), 16.0 * (1 << 30));
  EXPECT_EQ(bundle->selector().requirements_size(), 0);
}

TEST(BundleArgsTest, ParsesSelectorAfterSemicolon) {
  absl::StatusOr<v1::Bundle> bundle = ParseBundleArg("GPU=1;zone in (b,a), !spot", "--bundle[0]");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  ASSERT_EQ(bundle->selector().requirements_size(), 2);
  const v1::LabelSelectorRequirement& in = bundle->selector().requirements(0);
  EXPECT_EQ(in.key(), "zone");
  EXPECT_EQ(in.op(), v1::LABEL_OPERATOR_IN);
  EXPECT_THAT(in.values(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(bundle->selector().requirements(1).key(), "spot");
  EXPECT_EQ(bundle->selector().requirements(1).op(), v1::LABEL_OPERATOR_DOES_NOT_EXIST);
}

TEST(BundleArgsTest, EmptySelectorAfterSemicolonMatchesAnyNode) {
  absl::StatusOr<v1::Bundle> bundle = ParseBundleArg("CPU=1;", "--bundle[0]");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ(bundle->selector().requirements_size(), 0);
}

TEST(BundleArgsTest, BadSpecsNameTheFlagAndIndex) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"GPU=x", "--bundle[2][\"GPU\"]: 'x' is not a quantity"},
      {"GPU", "--bundle[2]: 'GPU' is not NAME=QUANTITY"},
      {"", "--bundle[2]: no resources"},
      {";zone in (a)", "--bundle[2]: no resources"},
      {"GPU=0", "--bundle[2]: a bundle needs at least one non-zero resource"},
      {"GPU=-1", "--bundle[2][\"GPU\"]: '-1' is not a quantity"},
      {"G PU=1", "--bundle[2][\"G PU\"]: resource names may use only"},
      {"=1", "--bundle[2]: empty resource name"},
      {"GPU=1,GPU=2", "--bundle[2]: GPU given twice"},
      {"GPU=1,", "--bundle[2]: '' is not NAME=QUANTITY"},
      {"accelerator_type:A10G=1",
       "select the accelerator with \";berth.io/accelerator-type in (A10G)\""},
      {"GPU=1;zone in a", "--bundle[2].selector: cannot parse 'zone in a'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<v1::Bundle> bundle = ParseBundleArg(c.text, "--bundle[2]");
    ASSERT_FALSE(bundle.ok()) << c.text;
    EXPECT_EQ(bundle.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(bundle.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(std::string(bundle.status().message()), StartsWith("--bundle[2]")) << c.text;
  }
}

TEST(BundleArgsTest, ReplicasRepeatTheWholeList) {
  absl::StatusOr<std::vector<v1::Bundle>> bundles = ParseBundleArgs({"CPU=8", "GPU=1"}, 3);
  ASSERT_TRUE(bundles.ok()) << bundles.status();
  ASSERT_EQ(bundles->size(), 6u);
  for (size_t i = 0; i < bundles->size(); ++i) {
    EXPECT_EQ((*bundles)[i].resources().amounts().count(i % 2 == 0 ? "CPU" : "GPU"), 1u) << i;
  }
}

TEST(BundleArgsTest, ListErrorsNameTheIndexAndTheFlag) {
  absl::StatusOr<std::vector<v1::Bundle>> bad = ParseBundleArgs({"GPU=1", "CPU=2", "GPU=x"}, 1);
  EXPECT_THAT(std::string(bad.status().message()),
              StartsWith("--bundle[2][\"GPU\"]: 'x' is not a quantity"));
  EXPECT_THAT(std::string(ParseBundleArgs({}, 1).status().message()),
              StartsWith("--bundle: at least one"));
  EXPECT_THAT(std::string(ParseBundleArgs({"GPU=1"}, 0).status().message()),
              StartsWith("--replicas: 0"));
  EXPECT_THAT(std::string(ParseBundleArgs({"GPU=1", "CPU=1"}, 4000).status().message()),
              StartsWith("--replicas: 4000 x 2 bundles is more than 4096"));
}

TEST(BundleArgsTest, StrategyIsCaseInsensitive) {
  EXPECT_EQ(*ParseStrategyArg("strict_spread"), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  EXPECT_EQ(*ParseStrategyArg("Pack"), v1::PLACEMENT_STRATEGY_PACK);
  absl::StatusOr<v1::PlacementStrategy> bad = ParseStrategyArg("tight");
  EXPECT_THAT(std::string(bad.status().message()),
              StartsWith("--strategy: unknown strategy 'tight'"));
}

TEST(BundleArgsTest, PlacementGroupStateIsCaseInsensitive) {
  EXPECT_EQ(*ParsePlacementGroupStateArg("created"), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(*ParsePlacementGroupStateArg("RESCHEDULING"), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(std::string(ParsePlacementGroupStateArg("unspecified").status().message()),
              StartsWith("--state: unknown state 'unspecified'"));
  EXPECT_THAT(std::string(ParsePlacementGroupStateArg("ready").status().message()),
              StartsWith("--state: unknown state 'ready'"));
}

}  // namespace
}  // namespace berth
