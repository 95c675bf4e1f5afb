// Reading one YAML document into typed values, for the client's file
// schemas (job files and queue files, client/job_file.h and
// client/queue_file.h).
//
// A YamlReader reads the nodes of one file and promises errors a person can
// act on: each is INVALID_ARGUMENT "<file>:<line>: <key path>: <what is
// wrong>", e.g. `job.yaml:7: scaling.num_workers: expected an integer, got
// the string "4"`. Key paths join a schema's own keys with dots
// (ChildPath: `scaling.num_workers`), put keys the user chooses in quoted
// brackets (EntryPath: `env["PATH"]`) and list items in brackets
// (`args[1]`). Types follow YAML's core schema: a quoted scalar is a string
// even when it looks like a number, and any scalar reads as a string. Maps
// must have scalar, unique keys and no empty values (`key:` or `key: ~`).
#ifndef BERTH_CLIENT_YAML_READER_H_
#define BERTH_CLIENT_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/map.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace berth {

// `scaling.num_workers`; a key at the root (empty `path`) has no parent.
std::string ChildPath(absl::string_view path, absl::string_view key);
// `scaling.trainer_resources["memory"]`: a key the user chose.
std::string EntryPath(absl::string_view path, absl::string_view key);

// The keys of a map that fills the proto message `message`: its field
// names, in declaration order, each spelled as `renamed` says where the
// file's word differs from the field's.
std::vector<std::string> FieldKeys(const google::protobuf::Descriptor& message,
                                   const std::map<std::string, std::string>& renamed = {});

// The text of the file at `path`; NOT_FOUND if there is none, else
// INVALID_ARGUMENT, both "<path>: <reason>".
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

class YamlReader {
 public:
  // Called with each entry of a map: the key as text, its value, and the
  // key's node (for the line of errors about the key itself).
  using EntryFn = std::function<absl::Status(const std::string& key, const YAML::Node& value,
                                             const YAML::Node& key_node)>;
  // Called with each item of a list and its path (`queues[2]`).
  using ItemFn = std::function<absl::Status(const YAML::Node& item, const std::string& path)>;

  // `file` names the file in every error; `root` names the document in
  // errors about the root node itself (`job file: expected a map`).
  YamlReader(std::string file, std::string root) : file_(std::move(file)), root_(std::move(root)) {}

  // Hands the one YAML document of `text` to `read`. A syntax error is
  // "YAML: <what yaml-cpp says>"; a second document is "a <kind> holds one
  // YAML document, not several".
  absl::Status ReadOneDocument(const std::string& text, absl::string_view kind,
                               const std::function<absl::Status(const YAML::Node&)>& read) const;

  // "<file>:<line>: " before `status`'s message, which names the key path.
  absl::Status At(const YAML::Mark& mark, const absl::Status& status) const;
  // INVALID_ARGUMENT "<file>:<line of node>: <path>: <what>".
  absl::Status Error(const YAML::Node& node, absl::string_view path, absl::string_view what) const;
  // Error(): "expected <type>, got <what node is>".
  absl::Status Expected(const YAML::Node& node, absl::string_view path,
                        absl::string_view type) const;

  // Calls `fn` for each entry of the map `node`, whose keys must be among
  // `allowed` (errors list them in that order). Stops at the first error.
  absl::Status ForEachKey(const YAML::Node& node, absl::string_view path,
                          const std::vector<std::string>& allowed, const EntryFn& fn) const;
  // The same for a map whose keys the user chooses (resource names, env
  // variables): any key, its path in brackets.
  absl::Status ForEachEntry(const YAML::Node& node, absl::string_view path,
                            const EntryFn& fn) const;
  // Calls `fn` for each item of the list `node`.
  absl::Status ForEachItem(const YAML::Node& node, absl::string_view path, const ItemFn& fn) const;

  // Any scalar: `name: 7` is the name "7".
  absl::Status String(const YAML::Node& node, absl::string_view path, std::string* out) const;
  // A duration as people write one ("30s", "1h30m"; ParseDurationSeconds),
  // whole seconds of at least `min_seconds`.
  absl::StatusOr<int64_t> DurationSeconds(const YAML::Node& node, absl::string_view path,
                                          int64_t min_seconds) const;
  // A list of scalars, each read as String().
  absl::Status StringList(const YAML::Node& node, absl::string_view path,
                          google::protobuf::RepeatedPtrField<std::string>* out) const;
  // A map of user-chosen, non-empty keys to scalars read as String().
  absl::Status StringMap(const YAML::Node& node, absl::string_view path,
                         google::protobuf::Map<std::string, std::string>* out) const;
  // A plain (unquoted) integer in [min, max].
  absl::StatusOr<int64_t> Integer(const YAML::Node& node, absl::string_view path, int64_t min,
                                  int64_t max) const;
  // A plain number, as absl::SimpleAtod reads it (inf and nan included).
  absl::StatusOr<double> Number(const YAML::Node& node, absl::string_view path) const;
  // YAML 1.2's core schema: true/True/TRUE, false/False/FALSE, unquoted.
  absl::StatusOr<bool> Bool(const YAML::Node& node, absl::string_view path) const;
  // A resource quantity, number or string, as Quantity::Parse reads it
  // (2, 0.5, "200Gi"), in base units.
  absl::StatusOr<double> ResourceQuantity(const YAML::Node& node, absl::string_view path) const;

  // Integer() or Bool(), handed to `set` (a proto setter).
  template <typename Setter>
  absl::Status SetInteger(const YAML::Node& node, absl::string_view path, int64_t min, int64_t max,
                          Setter set) const {
    absl::StatusOr<int64_t> value = Integer(node, path, min, max);
    if (!value.ok()) return value.status();
    set(*value);
    return absl::OkStatus();
  }
  template <typename Setter>
  absl::Status SetBool(const YAML::Node& node, absl::string_view path, Setter set) const {
    absl::StatusOr<bool> value = Bool(node, path);
    if (!value.ok()) return value.status();
    set(*value);
    return absl::OkStatus();
  }

 private:
  // ForEachKey() with `allowed` == nullptr is ForEachEntry().
  absl::Status ForEachMapEntry(const YAML::Node& node, absl::string_view path,
                               const std::vector<std::string>* allowed, const EntryFn& fn) const;

  std::string file_;
  std::string root_;
};

}  // namespace berth

#endif  // BERTH_CLIENT_YAML_READER_H_
