#include "client/yaml_reader.h"

#include <string>
#include <vector>

#include "berth/v1/train.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Reads `text` as "f.yaml" with `read`; the error message, or "" if none.
std::string ErrorOf(const std::string& text,
                    const std::function<absl::Status(const YamlReader&, const YAML::Node&)>& read) {
  const YamlReader yaml("f.yaml", "test file");
  absl::Status status = yaml.ReadOneDocument(
      text, "test file", [&](const YAML::Node& root) { return read(yaml, root); });
  if (status.ok()) return "";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

// The value of `key` in the root map of `text`, read by `read`.
template <typename Read>
std::string ValueError(const std::string& text, Read read) {
  return ErrorOf(text, [&](const YamlReader& yaml, const YAML::Node& root) {
    return yaml.ForEachKey(root, "", {"a"},
                           [&](const std::string& key, const YAML::Node& value, const YAML::Node&) {
                             return read(yaml, value, key);
                           });
  });
}

TEST(YamlReaderTest, PathsJoinKeysAndBracketUserKeys) {
  EXPECT_EQ(ChildPath("", "scaling"), "scaling");
  EXPECT_EQ(ChildPath("scaling", "num_workers"), "scaling.num_workers");
  EXPECT_EQ(EntryPath("env", "PATH"), "env[\"PATH\"]");
}

TEST(YamlReaderTest, FieldKeysAreTheFieldNamesInOrderRenamedWhereAsked) {
  EXPECT_THAT(FieldKeys(*v1::FailureConfig::descriptor()),
              ElementsAre("max_failures", "count_node_failures", "progress_timeout_s"));
  EXPECT_THAT(FieldKeys(*v1::FailureConfig::descriptor(), {{"max_failures", "retries"}}),
              ElementsAre("retries", "count_node_failures", "progress_timeout_s"));
}

TEST(YamlReaderTest, MapsNameUnknownRepeatedAndEmptyKeys) {
  auto keys = [](const YamlReader& yaml, const YAML::Node& root) {
    return yaml.ForEachKey(
        root, "", {"a", "b"},
        [](const std::string&, const YAML::Node&, const YAML::Node&) { return absl::OkStatus(); });
  };
  EXPECT_EQ(ErrorOf("a: 1\nb: 2\n", keys), "");
  EXPECT_EQ(ErrorOf("a: 1\nc: 2\n", keys), "f.yaml:2: c: unknown key (allowed: a, b)");
  EXPECT_EQ(ErrorOf("a: 1\na: 2\n", keys), "f.yaml:2: a: given twice");
  EXPECT_EQ(ErrorOf("a:\nb: 2\n", keys), "f.yaml:1: a: no value");
  EXPECT_EQ(ErrorOf("[a]: 1\n", keys), "f.yaml:1: test file: expected scalar keys, got a list");
  EXPECT_EQ(ErrorOf("- a\n", keys), "f.yaml:1: test file: expected a map, got a list");
  EXPECT_EQ(ErrorOf("", keys), "f.yaml:1: test file: expected a map, got nothing");
}

TEST(YamlReaderTest, UserKeysAreBracketedAndListItemsIndexed) {
  EXPECT_EQ(ValueError("a: {X: 1, Y: [2]}\n",
                       [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
                         google::protobuf::Map<std::string, std::string> out;
                         return yaml.StringMap(value, key, &out);
                       }),
            "f.yaml:1: a[\"Y\"]: expected a string, got a list");
  EXPECT_EQ(ValueError("a: [x, {y: 1}]\n",
                       [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
                         google::protobuf::RepeatedPtrField<std::string> out;
                         return yaml.StringList(value, key, &out);
                       }),
            "f.yaml:1: a[1]: expected a string, got a map");
  EXPECT_EQ(ValueError("a: x\n",
                       [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
                         return yaml.ForEachItem(value, key,
                                                 [](const YAML::Node&, const std::string&) {
                                                   return absl::OkStatus();
                                                 });
                       }),
            "f.yaml:1: a: expected a list, got 'x'");
}

TEST(YamlReaderTest, ScalarsFollowYamlTypes) {
  auto integer = [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
    return yaml.Integer(value, key, 1, 10).status();
  };
  EXPECT_EQ(ValueError("a: 3\n", integer), "");
  EXPECT_EQ(ValueError("a: \"3\"\n", integer),
            "f.yaml:1: a: expected an integer, got the string \"3\"");
  EXPECT_EQ(ValueError("a: 11\n", integer), "f.yaml:1: a: 11 is not in 1..10");
  auto boolean = [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
    return yaml.Bool(value, key).status();
  };
  EXPECT_EQ(ValueError("a: TRUE\n", boolean), "");
  EXPECT_EQ(ValueError("a: yes\n", boolean), "f.yaml:1: a: expected true or false, got 'yes'");
  auto number = [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
    return yaml.Number(value, key).status();
  };
  EXPECT_EQ(ValueError("a: 0.5\n", number), "");
  EXPECT_EQ(ValueError("a: \"0.5\"\n", number),
            "f.yaml:1: a: expected a number, got the string \"0.5\"");
  auto quantity = [](const YamlReader& yaml, const YAML::Node& value, const std::string& key) {
    absl::StatusOr<double> amount = yaml.ResourceQuantity(value, key);
    if (amount.ok()) {
      EXPECT_EQ(*amount, 2048);
    }
    return amount.status();
  };
  EXPECT_EQ(ValueError("a: 2Ki\n", quantity), "");
  EXPECT_EQ(ValueError("a: \"2Ki\"\n", quantity), "");
  EXPECT_EQ(ValueError("a: [1]\n", quantity), "f.yaml:1: a: expected a quantity, got a list");
  EXPECT_THAT(ValueError("a: lots\n", quantity),
              HasSubstr("f.yaml:1: a: 'lots' is not a quantity"));
}

TEST(YamlReaderTest, OneDocumentOnly) {
  auto any = [](const YamlReader&, const YAML::Node&) { return absl::OkStatus(); };
  EXPECT_EQ(ErrorOf("a: 1\n---\nb: 2\n", any),
            "f.yaml:3: a test file holds one YAML document, not several");
  EXPECT_EQ(ErrorOf(",", any), "f.yaml:1: YAML: unexpected ','");
  EXPECT_THAT(ErrorOf("a: [1, 2\n", any), HasSubstr("f.yaml:2: YAML: "));
}

TEST(YamlReaderTest, ReadTextFileSaysWhatIsMissing) {
  absl::StatusOr<std::string> missing = ReadTextFile("/nonexistent/f.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/f.yaml: "));
}

}  // namespace
}  // namespace berth
