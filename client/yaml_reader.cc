#include "client/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_args.h"
#include "placement/quantity.h"

namespace berth {
namespace {

// A YAML value as an error shows it. Quoted scalars are strings in YAML even
// when they look like numbers, hence "the string".
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? absl::StrCat("the string \"", node.Scalar(), "\"")
                               : absl::StrCat("'", node.Scalar(), "'");
    default:
      return "nothing";
  }
}

// A plain (unquoted) scalar: what YAML reads as a number or a boolean.
bool IsPlainScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

// Records where each YAML document starts and where its root node is.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts, roots;
  void Root(const YAML::Mark& mark) {
    if (roots.size() < starts.size()) roots.push_back(mark);
  }
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Root(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Root(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Root(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Root(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Root(mark);
  }
  void OnMapEnd() override {}
};

}  // namespace

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string EntryPath(absl::string_view path, absl::string_view key) {
  return absl::StrCat(path, "[\"", key, "\"]");
}

std::vector<std::string> FieldKeys(const google::protobuf::Descriptor& message,
                                   const std::map<std::string, std::string>& renamed) {
  std::vector<std::string> keys;
  for (int i = 0; i < message.field_count(); ++i) {
    const std::string& name = message.field(i)->name();
    const auto file_word = renamed.find(name);
    keys.push_back(file_word == renamed.end() ? name : file_word->second);
  }
  return keys;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    const std::string message = absl::StrCat(path, ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  std::string text;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(error)));
  }
  return text;
}

absl::Status YamlReader::ReadOneDocument(
    const std::string& text, absl::string_view kind,
    const std::function<absl::Status(const YAML::Node&)>& read) const {
  // yaml-cpp reports syntax errors (and nothing else here) as exceptions.
  try {
    // Count documents with the event parser, at most two. Not LoadAll:
    // yaml-cpp 0.7 never consumes a stray block-level ',' and LoadAll then
    // loops forever, adding empty documents until memory runs out. A
    // document that starts where the previous one did is that token.
    std::istringstream stream(text);
    YAML::Parser events(stream);
    DocumentStarts docs;
    if (events.HandleNextDocument(docs) && events.HandleNextDocument(docs)) {
      const YAML::Mark& second = docs.starts[1];
      if (second.pos <= docs.starts[0].pos) {
        const char c = static_cast<size_t>(second.pos) < text.size() ? text[second.pos] : ' ';
        return At(second, absl::InvalidArgumentError(
                              absl::StrCat("YAML: unexpected '", absl::string_view(&c, 1), "'")));
      }
      return At(docs.roots.size() > 1 ? docs.roots[1] : second,
                absl::InvalidArgumentError(
                    absl::StrCat("a ", kind, " holds one YAML document, not several")));
    }
    return read(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return At(e.mark, absl::InvalidArgumentError(absl::StrCat("YAML: ", e.msg)));
  }
}

absl::Status YamlReader::At(const YAML::Mark& mark, const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat(file_, ":", std::max(mark.line, 0) + 1, ": ", status.message()));
}

absl::Status YamlReader::Error(const YAML::Node& node, absl::string_view path,
                               absl::string_view what) const {
  return At(node.Mark(), absl::InvalidArgumentError(absl::StrCat(path, ": ", what)));
}

absl::Status YamlReader::Expected(const YAML::Node& node, absl::string_view path,
                                  absl::string_view type) const {
  return Error(node, path, absl::StrCat("expected ", type, ", got ", Describe(node)));
}

absl::Status YamlReader::ForEachKey(const YAML::Node& node, absl::string_view path,
                                    const std::vector<std::string>& allowed,
                                    const EntryFn& fn) const {
  return ForEachMapEntry(node, path, &allowed, fn);
}

absl::Status YamlReader::ForEachEntry(const YAML::Node& node, absl::string_view path,
                                      const EntryFn& fn) const {
  return ForEachMapEntry(node, path, nullptr, fn);
}

// Keys must be unique: yaml-cpp keeps both of a repeated key, and the
// second would silently lose.
absl::Status YamlReader::ForEachMapEntry(const YAML::Node& node, absl::string_view path,
                                         const std::vector<std::string>* allowed,
                                         const EntryFn& fn) const {
  const absl::string_view named = path.empty() ? absl::string_view(root_) : path;
  if (!node.IsMap()) return Expected(node, named, "a map");
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) return Expected(key, named, "scalar keys");
    const std::string& name = key.Scalar();
    const std::string key_path = allowed == nullptr ? EntryPath(path, name) : ChildPath(path, name);
    if (allowed != nullptr && std::find(allowed->begin(), allowed->end(), name) == allowed->end()) {
      return Error(key, key_path,
                   absl::StrCat("unknown key (allowed: ", absl::StrJoin(*allowed, ", "), ")"));
    }
    if (!seen.insert(name).second) return Error(key, key_path, "given twice");
    // Checked here, at the key: an empty value's own line is the next one.
    if (entry.second.IsNull()) return Error(key, key_path, "no value");
    if (absl::Status s = fn(name, entry.second, key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status YamlReader::ForEachItem(const YAML::Node& node, absl::string_view path,
                                     const ItemFn& fn) const {
  if (!node.IsSequence()) return Expected(node, path, "a list");
  for (size_t i = 0; i < node.size(); ++i) {
    if (absl::Status s = fn(node[i], absl::StrCat(path, "[", i, "]")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status YamlReader::String(const YAML::Node& node, absl::string_view path,
                                std::string* out) const {
  if (!node.IsScalar()) return Expected(node, path, "a string");
  *out = node.Scalar();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> YamlReader::DurationSeconds(const YAML::Node& node, absl::string_view path,
                                                    int64_t min_seconds) const {
  std::string text;
  if (absl::Status s = String(node, path, &text); !s.ok()) return s;
  absl::StatusOr<int64_t> seconds = ParseDurationSeconds(text, path, min_seconds);
  if (!seconds.ok()) return At(node.Mark(), seconds.status());
  return seconds;
}

absl::Status YamlReader::StringList(const YAML::Node& node, absl::string_view path,
                                    google::protobuf::RepeatedPtrField<std::string>* out) const {
  if (!node.IsSequence()) return Expected(node, path, "a list of strings");
  for (size_t i = 0; i < node.size(); ++i) {
    if (absl::Status s = String(node[i], absl::StrCat(path, "[", i, "]"), out->Add()); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status YamlReader::StringMap(const YAML::Node& node, absl::string_view path,
                                   google::protobuf::Map<std::string, std::string>* out) const {
  return ForEachEntry(node, path,
                      [&](const std::string& name, const YAML::Node& value, const YAML::Node& key) {
                        if (name.empty()) return Error(key, path, "empty key");
                        return String(value, EntryPath(path, name), &(*out)[name]);
                      });
}

absl::StatusOr<int64_t> YamlReader::Integer(const YAML::Node& node, absl::string_view path,
                                            int64_t min, int64_t max) const {
  int64_t value = 0;
  if (!IsPlainScalar(node) || !absl::SimpleAtoi(node.Scalar(), &value)) {
    return Expected(node, path, "an integer");
  }
  if (value < min || value > max) {
    return Error(node, path, absl::StrCat(value, " is not in ", min, "..", max));
  }
  return value;
}

absl::StatusOr<double> YamlReader::Number(const YAML::Node& node, absl::string_view path) const {
  double value = 0;
  if (!IsPlainScalar(node) || !absl::SimpleAtod(node.Scalar(), &value)) {
    return Expected(node, path, "a number");
  }
  return value;
}

absl::StatusOr<bool> YamlReader::Bool(const YAML::Node& node, absl::string_view path) const {
  const std::string text = IsPlainScalar(node) ? absl::AsciiStrToLower(node.Scalar()) : "";
  if (text != "true" && text != "false") return Expected(node, path, "true or false");
  return text == "true";
}

absl::StatusOr<double> YamlReader::ResourceQuantity(const YAML::Node& node,
                                                    absl::string_view path) const {
  if (!node.IsScalar()) return Expected(node, path, "a quantity");
  absl::StatusOr<berth::Quantity> amount = berth::Quantity::Parse(node.Scalar(), path);
  if (!amount.ok()) return At(node.Mark(), amount.status());
  return amount->ToDouble();
}

}  // namespace berth
