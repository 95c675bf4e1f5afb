#include "client/job_file.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/job_args.h"
#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"
#include "placement/quantity.h"
#include "placement/resource_set.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

using StringMap = google::protobuf::Map<std::string, std::string>;
// Called with each entry of a YAML map: the key as text, its value, and the
// key node (for the line of errors about the key itself).
using EntryFn =
    std::function<absl::Status(const std::string&, const YAML::Node&, const YAML::Node&)>;

constexpr uint32_t kMaxUint32 = std::numeric_limits<uint32_t>::max();

// `scaling.num_workers`; the top-level keys have no parent.
std::string Child(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// Keys the user chooses (resource names, env variables, labels) are quoted,
// as --bundle errors write them: `scaling.trainer_resources["memory"]`.
std::string Entry(absl::string_view path, absl::string_view key) {
  return absl::StrCat(path, "[\"", key, "\"]");
}

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

class JobFileParser {
 public:
  explicit JobFileParser(absl::string_view file) : file_(file) {}

  absl::StatusOr<v1::TrainJobSpec> Parse(const YAML::Node& root, JobRuntimeEnv* env) const {
    v1::TrainJobSpec spec;
    bool has_scaling = false;
    bool has_entrypoint = false;
    std::optional<YAML::Node> runtime_env;
    JobRuntimeEnv parsed_env;
    absl::Status status = ForEachKey(
        root, "",
        {"name", "queue", "priority", "priority_class", "time_limit", "scaling", "entrypoint",
         "failure", "checkpoint_dir", "labels", "runtime_env"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          if (key == "name") return String(value, key, spec.mutable_name());
          if (key == "queue") return String(value, key, spec.mutable_queue());
          if (key == "priority_class") return String(value, key, spec.mutable_priority_class());
          if (key == "priority") {
            return SetInteger(value, key, std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max(),
                              [&](int64_t p) { spec.set_priority(static_cast<int32_t>(p)); });
          }
          if (key == "time_limit") {
            std::string text;
            if (absl::Status s = String(value, key, &text); !s.ok()) return s;
            absl::StatusOr<int64_t> limit = ParseTimeLimitSeconds(text, key);
            if (!limit.ok()) return At(value.Mark(), limit.status());
            spec.set_time_limit_s(*limit);
            return absl::OkStatus();
          }
          if (key == "scaling") {
            has_scaling = true;
            return Scaling(value, key, spec.mutable_scaling_config());
          }
          if (key == "entrypoint") {
            has_entrypoint = true;
            return EntrypointSection(value, key, spec.mutable_entrypoint());
          }
          if (key == "failure") return Failure(value, key, spec.mutable_failure_config());
          if (key == "checkpoint_dir") return String(value, key, spec.mutable_storage_path());
          if (key == "runtime_env") {
            runtime_env = value;
            return RuntimeEnv(value, key, &parsed_env);
          }
          return Strings(value, key, spec.mutable_labels());
        });
    if (!status.ok()) return status;
    if (runtime_env && !spec.entrypoint().has_command()) {
      return Error(*runtime_env, "runtime_env", "only with entrypoint.command");
    }
    if (runtime_env && !spec.entrypoint().command().working_dir().empty()) {
      return Error(*runtime_env, "runtime_env.working_dir",
                   "give either entrypoint.working_dir (a folder on every node) or "
                   "runtime_env.working_dir (uploaded), not both");
    }
    if (env != nullptr) *env = std::move(parsed_env);
    // The world size is the one setting without a safe default.
    if (!has_scaling) {
      return Error(root, "scaling", "required (with at least scaling.num_workers)");
    }
    // As `berth job submit` without a command: the built-in trainer, and
    // the same explicit defaults, so both ways of writing a job agree.
    if (!has_entrypoint) {
      spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(kDefaultTrainSteps);
    }
    spec.mutable_failure_config();
    return spec;
  }

  // "<file>:<line>: " before a message that already names the key path.
  absl::Status At(const YAML::Mark& mark, const absl::Status& status) const {
    return absl::Status(status.code(), absl::StrCat(file_, ":", std::max(mark.line, 0) + 1, ": ",
                                                    status.message()));
  }

 private:
  absl::Status Error(const YAML::Node& node, absl::string_view path, absl::string_view what) const {
    return At(node.Mark(), absl::InvalidArgumentError(absl::StrCat(path, ": ", what)));
  }

  absl::Status Expected(const YAML::Node& node, absl::string_view path,
                        absl::string_view type) const {
    return Error(node, path, absl::StrCat("expected ", type, ", got ", Describe(node)));
  }

  // Calls `fn` for each entry of the map `node`. Keys must be scalars and
  // unique (yaml-cpp keeps both of a repeated key; the second would silently
  // lose), and, unless `allowed` is empty, one of `allowed`. No value may be
  // empty (`key:` or `key: ~`).
  absl::Status ForEachKey(const YAML::Node& node, absl::string_view path,
                          const std::vector<absl::string_view>& allowed, const EntryFn& fn) const {
    if (!node.IsMap()) return Expected(node, path.empty() ? "job file" : path, "a map");
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) return Expected(key, path.empty() ? "job file" : path, "scalar keys");
      const std::string& name = key.Scalar();
      const std::string key_path = allowed.empty() ? Entry(path, name) : Child(path, name);
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        return Error(key, key_path,
                     absl::StrCat("unknown key (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
      if (!seen.insert(name).second) return Error(key, key_path, "given twice");
      // Checked here, at the key: an empty value's own line is the next one.
      if (entry.second.IsNull()) return Error(key, key_path, "no value");
      if (absl::Status s = fn(name, entry.second, key); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Any scalar is a string: `name: 7` is the name "7".
  absl::Status String(const YAML::Node& node, absl::string_view path, std::string* out) const {
    if (!node.IsScalar()) return Expected(node, path, "a string");
    *out = node.Scalar();
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Integer(const YAML::Node& node, absl::string_view path, int64_t min,
                                  int64_t max) const {
    int64_t value = 0;
    if (!IsPlainScalar(node) || !absl::SimpleAtoi(node.Scalar(), &value)) {
      return Expected(node, path, "an integer");
    }
    if (value < min || value > max) {
      return Error(node, path, absl::StrCat(value, " is not in ", min, "..", max));
    }
    return value;
  }

  // Integer() in [min, max], handed to `set` (a proto setter).
  template <typename Setter>
  absl::Status SetInteger(const YAML::Node& node, absl::string_view path, int64_t min, int64_t max,
                          Setter set) const {
    absl::StatusOr<int64_t> value = Integer(node, path, min, max);
    if (!value.ok()) return value.status();
    set(*value);
    return absl::OkStatus();
  }

  // YAML 1.2's core schema: true/True/TRUE, false/False/FALSE.
  template <typename Setter>
  absl::Status SetBool(const YAML::Node& node, absl::string_view path, Setter set) const {
    const std::string text = IsPlainScalar(node) ? absl::AsciiStrToLower(node.Scalar()) : "";
    if (text != "true" && text != "false") return Expected(node, path, "true or false");
    set(text == "true");
    return absl::OkStatus();
  }

  // Numbers and strings alike go through Quantity::Parse: 2, 0.5, "200Gi".
  absl::Status Resources(const YAML::Node& node, absl::string_view path,
                         v1::ResourceSet* out) const {
    return ForEachKey(
        node, path, {},
        [&](const std::string& name, const YAML::Node& value, const YAML::Node& key) {
          if (absl::Status s = ValidateResourceName(name, path); !s.ok()) return At(key.Mark(), s);
          if (absl::StartsWith(name, kAcceleratorResourcePrefix)) {
            return Error(key, Entry(path, name),
                         absl::StrCat("is internal; write scaling.accelerator_type: ",
                                      name.substr(kAcceleratorResourcePrefix.size())));
          }
          if (!value.IsScalar()) return Expected(value, Entry(path, name), "a quantity");
          absl::StatusOr<Quantity> amount = Quantity::Parse(value.Scalar(), Entry(path, name));
          if (!amount.ok()) return At(value.Mark(), amount.status());
          (*out->mutable_amounts())[name] = amount->ToDouble();
          return absl::OkStatus();
        });
  }

 public:
  // A queue file (berth queue apply): cohorts, priority classes, queues.
  absl::StatusOr<v1::ApplyQueuesRequest> Queues(const YAML::Node& root) const {
    v1::ApplyQueuesRequest request;
    absl::Status status = ForEachKey(
        root, "", {"cohorts", "priority_classes", "queues"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          if (key == "cohorts") {
            return ForEachItem(value, key, [&](const YAML::Node& item, const std::string& path) {
              return String(item, path, request.add_cohorts());
            });
          }
          if (key == "priority_classes") {
            return ForEachItem(value, key, [&](const YAML::Node& item, const std::string& path) {
              v1::PriorityClass* c = request.add_priority_classes();
              return ForEachKey(item, path, {"name", "value"},
                                [&](const std::string& k, const YAML::Node& v, const YAML::Node&) {
                                  if (k == "name")
                                    return String(v, Child(path, k), c->mutable_name());
                                  return SetInteger(v, Child(path, k),
                                                    std::numeric_limits<int32_t>::min(),
                                                    std::numeric_limits<int32_t>::max(),
                                                    [&](int64_t n) { c->set_value(n); });
                                });
            });
          }
          return ForEachItem(value, key, [&](const YAML::Node& item, const std::string& path) {
            return Queue(item, path, request.add_queues());
          });
        });
    if (!status.ok()) return status;
    return request;
  }

 private:
  // env and labels: string keys to any scalar, written as text.
  absl::Status Strings(const YAML::Node& node, absl::string_view path, StringMap* out) const {
    return ForEachKey(node, path, {},
                      [&](const std::string& name, const YAML::Node& value, const YAML::Node& key) {
                        if (name.empty()) return Error(key, path, "empty key");
                        return String(value, Entry(path, name), &(*out)[name]);
                      });
  }

  // Calls `fn` with each item of the list `node` and its path (`queues[2]`).
  absl::Status ForEachItem(
      const YAML::Node& node, absl::string_view path,
      const std::function<absl::Status(const YAML::Node&, const std::string&)>& fn) const {
    if (!node.IsSequence()) return Expected(node, path, "a list");
    for (size_t i = 0; i < node.size(); ++i) {
      if (absl::Status s = fn(node[i], absl::StrCat(path, "[", i, "]")); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Quotas and limits: resource names as the head checks them (`GPU:A10G`
  // included), amounts through Quantity::Parse.
  absl::Status Amounts(const YAML::Node& node, absl::string_view path,
                       google::protobuf::Map<std::string, double>* out) const {
    return ForEachKey(
        node, path, {},
        [&](const std::string& name, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          if (!value.IsScalar()) return Expected(value, Entry(path, name), "a quantity");
          absl::StatusOr<Quantity> amount = Quantity::Parse(value.Scalar(), Entry(path, name));
          if (!amount.ok()) return At(value.Mark(), amount.status());
          (*out)[name] = amount->ToDouble();
          return absl::OkStatus();
        });
  }

  absl::Status Queue(const YAML::Node& node, const std::string& path, v1::Queue* out) const {
    return ForEachKey(
        node, path,
        {"name", "cohort", "team", "quota", "borrowing_limit", "lending_limit", "weight",
         "within_queue_preemption"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string at = Child(path, key);
          if (key == "name") return String(value, at, out->mutable_name());
          if (key == "cohort") return String(value, at, out->mutable_cohort());
          if (key == "team") return String(value, at, out->mutable_team());
          if (key == "within_queue_preemption")
            return String(value, at, out->mutable_within_queue_preemption());
          if (key == "quota") return Amounts(value, at, out->mutable_nominal_quota());
          if (key == "borrowing_limit") return Amounts(value, at, out->mutable_borrowing_limit());
          if (key == "lending_limit") return Amounts(value, at, out->mutable_lending_limit());
          double weight = 0;
          if (!IsPlainScalar(value) || !absl::SimpleAtod(value.Scalar(), &weight)) {
            return Expected(value, at, "a number");
          }
          out->set_weight(weight);
          return absl::OkStatus();
        });
  }

  absl::Status Scaling(const YAML::Node& node, absl::string_view path,
                       v1::ScalingConfig* out) const {
    bool has_num_workers = false;
    out->set_placement_strategy(v1::PLACEMENT_STRATEGY_PACK);
    absl::Status status = ForEachKey(
        node, path,
        {"num_workers", "use_gpu", "resources_per_worker", "trainer_resources", "rank_resources",
         "label_selector", "accelerator_type", "placement_strategy", "topology"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = Child(path, key);
          if (key == "num_workers") {
            has_num_workers = true;
            // {min: M, max: N}: elastic (Ray Train V2's num_workers=(M, N)).
            if (value.IsMap()) return ElasticWorkers(value, key_path, out);
            // One bundle per worker, so the placement group's limit is the job's.
            return SetInteger(value, key_path, 1, PlacementGroupSpec::kMaxBundles,
                              [&](int64_t n) { out->set_num_workers(n); });
          }
          if (key == "use_gpu") {
            return SetBool(value, key_path, [&](bool b) { out->set_use_gpu(b); });
          }
          if (key == "resources_per_worker") {
            // A list gives each rank its own: rank i's is entry i.
            if (value.IsSequence()) {
              return ForEachItem(
                  value, key_path, [&](const YAML::Node& item, const std::string& item_path) {
                    return Resources(item, item_path, out->add_resources_per_worker_list());
                  });
            }
            return Resources(value, key_path, out->mutable_resources_per_worker());
          }
          if (key == "rank_resources") return RankResources(value, key_path, out);
          if (key == "label_selector") {
            if (!value.IsSequence()) return Selector(value, key_path, out->add_label_selector());
            return ForEachItem(value, key_path,
                               [&](const YAML::Node& item, const std::string& item_path) {
                                 return Selector(item, item_path, out->add_label_selector());
                               });
          }
          if (key == "trainer_resources") {
            // Ray's trainer_resources={} is "none"; an empty map on the wire
            // is "unset" (CPU: 1), so none is {CPU: 0} there.
            if (value.IsMap() && value.size() == 0) {
              (*out->mutable_trainer_resources()->mutable_amounts())[std::string(kCpu)] = 0;
              return absl::OkStatus();
            }
            return Resources(value, key_path, out->mutable_trainer_resources());
          }
          if (key == "accelerator_type") {
            return String(value, key_path, out->mutable_accelerator_type());
          }
          if (key == "topology") return TopologyOf(value, key_path, out->mutable_topology());
          if (!value.IsScalar()) return Expected(value, key_path, "a strategy name");
          absl::StatusOr<PlacementStrategy> strategy =
              ParsePlacementStrategy(value.Scalar(), key_path);
          if (!strategy.ok()) return At(value.Mark(), strategy.status());
          out->set_placement_strategy(StrategyToProto(*strategy));
          return absl::OkStatus();
        });
    if (!status.ok()) return status;
    if (!has_num_workers) return Error(node, Child(path, "num_workers"), "required");
    return absl::OkStatus();
  }

  absl::Status ElasticWorkers(const YAML::Node& node, absl::string_view path,
                              v1::ScalingConfig* out) const {
    bool has_min = false, has_max = false;
    absl::Status status = ForEachKey(
        node, path, {"min", "max"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          (key == "min" ? has_min : has_max) = true;
          return SetInteger(value, Child(path, key), 1, PlacementGroupSpec::kMaxBundles,
                            [&](int64_t n) {
                              if (key == "min") {
                                out->set_min_workers(n);
                              } else {
                                out->set_num_workers(n);
                              }
                            });
        });
    if (!status.ok()) return status;
    if (!has_min || !has_max) {
      return Error(node, Child(path, has_min ? "max" : "min"), "required with the other");
    }
    if (out->min_workers() > out->num_workers()) {
      return Error(
          node, path,
          absl::StrCat("min ", out->min_workers(), " is more than max ", out->num_workers()));
    }
    return absl::OkStatus();
  }

  // `topology: {required: berth.io/topology-rack}` or `{preferred: [a, b]}`
  // (or one key for preferred). The keys are checked where they are used.
  absl::Status TopologyOf(const YAML::Node& node, absl::string_view path, v1::Topology* out) const {
    return ForEachKey(
        node, path, {"required", "preferred"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = Child(path, key);
          if (key == "required") return String(value, key_path, out->mutable_required());
          if (!value.IsSequence()) return String(value, key_path, out->add_preferred());
          return ForEachItem(value, key_path,
                             [&](const YAML::Node& item, const std::string& item_path) {
                               return String(item, item_path, out->add_preferred());
                             });
        });
  }

  // `rank_resources: {0: {memory: 200Gi}}`: ranks as integer keys.
  absl::Status RankResources(const YAML::Node& node, absl::string_view path,
                             v1::ScalingConfig* out) const {
    return ForEachKey(
        node, path, {},
        [&](const std::string&, const YAML::Node& value, const YAML::Node& key) -> absl::Status {
          absl::StatusOr<int64_t> rank =
              Integer(key, absl::StrCat(path, " key"), 0, PlacementGroupSpec::kMaxBundles - 1);
          if (!rank.ok()) return rank.status();
          return Resources(value, absl::StrCat(path, "[", *rank, "]"),
                           &(*out->mutable_rank_resources())[static_cast<uint32_t>(*rank)]);
        });
  }

  // A selector in berth's set-based text: "zone in (a,b), !spot".
  absl::Status Selector(const YAML::Node& node, const std::string& path,
                        v1::LabelSelector* out) const {
    if (!node.IsScalar()) return Expected(node, path, "a selector such as \"zone in (a,b)\"");
    absl::StatusOr<LabelSelector> selector = LabelSelector::Parse(node.Scalar(), path);
    if (!selector.ok()) return At(node.Mark(), selector.status());
    LabelSelectorToProto(*selector, out);
    return absl::OkStatus();
  }

  absl::Status EntrypointSection(const YAML::Node& node, absl::string_view path,
                                 v1::Entrypoint* out) const {
    // Key nodes as seen, for errors about the combination. args, env and
    // working_dir go to `rest` until the program is known, since they may
    // come before `command:`.
    std::optional<YAML::Node> builtin, command, command_only;
    std::string command_only_path, program;
    v1::Entrypoint::Command rest;
    absl::Status status = ForEachKey(
        node, path, {"builtin", "command", "args", "env", "working_dir", "per_node", "launcher"},
        [&](const std::string& key, const YAML::Node& value,
            const YAML::Node& key_node) -> absl::Status {
          const std::string key_path = Child(path, key);
          if (key == "builtin") {
            builtin = key_node;
            return Builtin(value, key_path, out->mutable_builtin_trainer());
          }
          if (key == "command") {
            command = key_node;
            if (absl::Status s = String(value, key_path, &program); !s.ok()) return s;
            if (absl::StripAsciiWhitespace(program).empty()) {
              return Error(value, key_path, "empty program");
            }
            return absl::OkStatus();
          }
          if (!command_only) {
            command_only = key_node;
            command_only_path = key_path;
          }
          if (key == "args") return Args(value, key_path, rest.mutable_argv());
          if (key == "env") return Strings(value, key_path, rest.mutable_env());
          if (key == "per_node")
            return SetBool(value, key_path, [&](bool b) { rest.set_per_node(b); });
          if (key == "launcher") {
            std::string name;
            if (absl::Status s = String(value, key_path, &name); !s.ok()) return s;
            if (name == "torchrun") {
              rest.set_launcher(v1::Entrypoint::LAUNCHER_TORCHRUN);
            } else if (name == "accelerate") {
              rest.set_launcher(v1::Entrypoint::LAUNCHER_ACCELERATE);
            } else {
              return Error(value, key_path, "torchrun or accelerate");
            }
            return absl::OkStatus();
          }
          return String(value, key_path, rest.mutable_working_dir());
        });
    if (!status.ok()) return status;
    if (builtin && command) {
      return Error(*command, Child(path, "command"),
                   "give either entrypoint.builtin or entrypoint.command, not both");
    }
    if (!command && command_only) {
      return Error(*command_only, command_only_path, "only with entrypoint.command");
    }
    if (!command && !builtin) {
      return Error(node, path, "needs entrypoint.builtin or entrypoint.command");
    }
    if (command) {
      v1::Entrypoint::Command* cmd = out->mutable_command();
      cmd->add_argv(program);
      cmd->MergeFrom(rest);
    }
    return absl::OkStatus();
  }

  // runtime_env: {working_dir: DIR, excludes: [glob, ...]}, as Ray's.
  absl::Status RuntimeEnv(const YAML::Node& node, absl::string_view path,
                          JobRuntimeEnv* out) const {
    absl::Status status = ForEachKey(
        node, path, {"working_dir", "excludes"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = Child(path, key);
          if (key == "working_dir") return String(value, key_path, &out->working_dir);
          google::protobuf::RepeatedPtrField<std::string> excludes;
          if (absl::Status s = Args(value, key_path, &excludes); !s.ok()) return s;
          out->excludes.assign(excludes.begin(), excludes.end());
          return absl::OkStatus();
        });
    if (status.ok() && out->working_dir.empty()) {
      return Error(node, Child(path, "working_dir"), "required (the folder to upload)");
    }
    return status;
  }

  absl::Status Args(const YAML::Node& node, absl::string_view path,
                    google::protobuf::RepeatedPtrField<std::string>* out) const {
    if (!node.IsSequence()) return Expected(node, path, "a list of strings");
    for (size_t i = 0; i < node.size(); ++i) {
      if (absl::Status s = String(node[i], absl::StrCat(path, "[", i, "]"), out->Add()); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Builtin(const YAML::Node& node, absl::string_view path,
                       v1::Entrypoint::BuiltinTrainer* out) const {
    out->set_steps(kDefaultTrainSteps);
    return ForEachKey(
        node, path, {"model", "steps", "learning_rate", "batch_size", "checkpoint_every"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = Child(path, key);
          if (key == "model") return String(value, key_path, out->mutable_model());
          if (key == "steps") {
            return SetInteger(value, key_path, 1, kMaxUint32,
                              [&](int64_t n) { out->set_steps(n); });
          }
          if (key == "batch_size") {
            return SetInteger(value, key_path, 1, kMaxUint32,
                              [&](int64_t n) { out->set_batch_size(n); });
          }
          if (key == "checkpoint_every") {
            return SetInteger(value, key_path, 0, kMaxUint32,
                              [&](int64_t n) { out->set_checkpoint_every_steps(n); });
          }
          double lr = 0;
          if (!IsPlainScalar(value) || !absl::SimpleAtod(value.Scalar(), &lr)) {
            return Expected(value, key_path, "a number");
          }
          if (!std::isfinite(lr) || lr <= 0) {
            return Error(value, key_path,
                         absl::StrCat(value.Scalar(), " is not a finite number > 0"));
          }
          out->set_learning_rate(lr);
          return absl::OkStatus();
        });
  }

  absl::Status Failure(const YAML::Node& node, absl::string_view path,
                       v1::FailureConfig* out) const {
    return ForEachKey(node, path, {"max_failures", "count_node_failures"},
                      [&](const std::string& key, const YAML::Node& value, const YAML::Node&) {
                        if (key == "count_node_failures") {
                          return SetBool(value, Child(path, key),
                                         [&](bool b) { out->set_count_node_failures(b); });
                        }
                        // -1 = unlimited, as in Ray.
                        return SetInteger(value, Child(path, key), -1,
                                          std::numeric_limits<int32_t>::max(),
                                          [&](int64_t n) { out->set_max_failures(n); });
                      });
  }

  std::string file_;
};

}  // namespace

namespace {

// The one YAML document of `text` (file `name`), handed to `parse`.
template <typename Result>
absl::StatusOr<Result> ParseOneDocument(
    const std::string& text, const std::string& name, absl::string_view what,
    const std::function<absl::StatusOr<Result>(const JobFileParser&, const YAML::Node&)>& parse) {
  JobFileParser parser(name);
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
        return parser.At(second, absl::InvalidArgumentError(absl::StrCat(
                                     "YAML: unexpected '", absl::string_view(&c, 1), "'")));
      }
      return parser.At(docs.roots.size() > 1 ? docs.roots[1] : second,
                       absl::InvalidArgumentError(
                           absl::StrCat("a ", what, " holds one YAML document, not several")));
    }
    return parse(parser, YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return parser.At(e.mark, absl::InvalidArgumentError(absl::StrCat("YAML: ", e.msg)));
  }
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

}  // namespace

absl::StatusOr<v1::TrainJobSpec> ParseJobFile(const std::string& text, const std::string& name,
                                              JobRuntimeEnv* runtime_env) {
  return ParseOneDocument<v1::TrainJobSpec>(
      text, name, "job file", [runtime_env](const JobFileParser& parser, const YAML::Node& root) {
        return parser.Parse(root, runtime_env);
      });
}

absl::StatusOr<v1::ApplyQueuesRequest> ParseQueueFile(const std::string& text,
                                                      const std::string& name) {
  return ParseOneDocument<v1::ApplyQueuesRequest>(
      text, name, "queue file",
      [](const JobFileParser& parser, const YAML::Node& root) { return parser.Queues(root); });
}

absl::StatusOr<v1::ApplyQueuesRequest> LoadQueueFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseQueueFile(*text, path);
}

absl::StatusOr<v1::TrainJobSpec> LoadJobFile(const std::string& path, JobRuntimeEnv* runtime_env) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  JobRuntimeEnv env;
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(*text, path, &env);
  // As a person reads the file: `~/` is their home (a venv's python in
  // ~/.venvs), and a relative working_dir is the job file's folder's
  // (`working_dir: .` beside train.py).
  if (spec.ok() && spec->entrypoint().has_command()) {
    const char* home = std::getenv("HOME");
    v1::Entrypoint::Command* command = spec->mutable_entrypoint()->mutable_command();
    for (std::string* path :
         {command->mutable_argv(0), command->mutable_working_dir(), &env.working_dir}) {
      if (home != nullptr && absl::StartsWith(*path, "~/"))
        *path = absl::StrCat(home, path->substr(1));
    }
    for (std::string* dir : {command->mutable_working_dir(), &env.working_dir}) {
      if (!dir->empty() && !std::filesystem::path(*dir).is_absolute()) {
        std::error_code ignored;
        *dir = std::filesystem::weakly_canonical(
                   std::filesystem::absolute(std::filesystem::path(path).parent_path() / *dir),
                   ignored)
                   .string();
      }
    }
  }
  if (runtime_env != nullptr) *runtime_env = std::move(env);
  return spec;
}

}  // namespace berth
