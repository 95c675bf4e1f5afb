#include "client/job_file.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/job_args.h"
#include "client/yaml_reader.h"
#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"
#include "placement/resource_set.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

constexpr uint32_t kMaxUint32 = std::numeric_limits<uint32_t>::max();

// The job file's schema: which keys each section has and how they fill a
// TrainJobSpec. Where a section's keys are not its message's field names
// (FieldKeys), the comment above its list says how they differ.
class JobFileReader {
 public:
  explicit JobFileReader(const YamlReader& yaml) : yaml_(yaml) {}

  absl::Status Read(const YAML::Node& root, v1::TrainJobSpec* spec, JobRuntimeEnv* env) const {
    std::optional<YAML::Node> runtime_env;
    JobRuntimeEnv parsed_env;
    if (absl::Status s = TopLevel(root, spec, &runtime_env, &parsed_env); !s.ok()) return s;
    if (runtime_env && !spec->entrypoint().has_command()) {
      return yaml_.Error(*runtime_env, "runtime_env", "only with entrypoint.command");
    }
    if (runtime_env && !spec->entrypoint().command().working_dir().empty()) {
      return yaml_.Error(*runtime_env, "runtime_env.working_dir",
                         "give either entrypoint.working_dir (a folder on every node) or "
                         "runtime_env.working_dir (uploaded), not both");
    }
    if (env != nullptr) *env = std::move(parsed_env);
    // The world size is the one setting without a safe default.
    if (!spec->has_scaling_config()) {
      return yaml_.Error(root, "scaling", "required (with at least scaling.num_workers)");
    }
    // As `berth job submit` without a command: the built-in trainer, and
    // the same explicit defaults, so both ways of writing a job agree.
    if (!spec->has_entrypoint()) {
      spec->mutable_entrypoint()->mutable_builtin_trainer()->set_steps(kDefaultTrainSteps);
    }
    spec->mutable_failure_config();
    return absl::OkStatus();
  }

 private:
  // TrainJobSpec's fields, in the order errors have always listed them and
  // named as Ray Train's and Slurm's users know them: scaling
  // (scaling_config), failure (failure_config), checkpoint_dir
  // (storage_path), time_limit and stop_grace_period (time_limit_s and
  // stop_grace_period_s, written as durations). And
  // runtime_env, the client's own: it uploads the folder (`runtime_env`,
  // the node where it was written, is for errors about it).
  absl::Status TopLevel(const YAML::Node& root, v1::TrainJobSpec* spec,
                        std::optional<YAML::Node>* runtime_env, JobRuntimeEnv* env) const {
    return yaml_.ForEachKey(
        root, "",
        {"name", "queue", "priority", "priority_class", "time_limit", "stop_grace_period",
         "scaling", "entrypoint", "failure", "checkpoint_dir", "labels", "runtime_env"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          if (key == "name") return yaml_.String(value, key, spec->mutable_name());
          if (key == "queue") return yaml_.String(value, key, spec->mutable_queue());
          if (key == "priority_class") {
            return yaml_.String(value, key, spec->mutable_priority_class());
          }
          if (key == "priority") {
            return yaml_.SetInteger(value, key, std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max(), [&](int64_t p) {
                                      spec->set_priority(static_cast<int32_t>(p));
                                    });
          }
          if (key == "time_limit") {
            return Seconds(value, key, 1, [&](int64_t s) { spec->set_time_limit_s(s); });
          }
          if (key == "stop_grace_period") {
            return Seconds(value, key, 0, [&](int64_t s) { spec->set_stop_grace_period_s(s); });
          }
          if (key == "scaling") return Scaling(value, key, spec->mutable_scaling_config());
          if (key == "entrypoint") return Entrypoint(value, key, spec->mutable_entrypoint());
          if (key == "failure") return Failure(value, key, spec->mutable_failure_config());
          if (key == "checkpoint_dir")
            return yaml_.String(value, key, spec->mutable_storage_path());
          if (key == "runtime_env") {
            *runtime_env = value;
            return RuntimeEnv(value, key, env);
          }
          return yaml_.StringMap(value, key, spec->mutable_labels());
        });
  }

  // A duration ("30s", "1h30m") of at least `min_seconds`, given to `set`.
  absl::Status Seconds(const YAML::Node& node, const std::string& path, int64_t min_seconds,
                       const std::function<void(int64_t)>& set) const {
    absl::StatusOr<int64_t> seconds = yaml_.DurationSeconds(node, path, min_seconds);
    if (!seconds.ok()) return seconds.status();
    set(*seconds);
    return absl::OkStatus();
  }

  // Numbers and strings alike are quantities: 2, 0.5, "200Gi".
  absl::Status Resources(const YAML::Node& node, absl::string_view path,
                         v1::ResourceSet* out) const {
    return yaml_.ForEachEntry(
        node, path, [&](const std::string& name, const YAML::Node& value, const YAML::Node& key) {
          if (absl::Status s = ValidateResourceName(name, path); !s.ok()) {
            return yaml_.At(key.Mark(), s);
          }
          if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
            return yaml_.Error(
                key, EntryPath(path, name),
                InternalAcceleratorResourceText(*type, "write scaling.accelerator_type: $0"));
          }
          absl::StatusOr<double> amount = yaml_.ResourceQuantity(value, EntryPath(path, name));
          if (!amount.ok()) return amount.status();
          (*out->mutable_amounts())[name] = *amount;
          return absl::OkStatus();
        });
  }

  // ScalingConfig's fields, in the order errors have always listed them,
  // except the two the file writes inside others: min_workers
  // (`num_workers: {min, max}`) and resources_per_worker_list
  // (`resources_per_worker` as a list).
  absl::Status Scaling(const YAML::Node& node, absl::string_view path,
                       v1::ScalingConfig* out) const {
    bool has_num_workers = false;
    out->set_placement_strategy(v1::PLACEMENT_STRATEGY_PACK);
    absl::Status status = yaml_.ForEachKey(
        node, path,
        {"num_workers", "use_gpu", "resources_per_worker", "trainer_resources", "rank_resources",
         "label_selector", "accelerator_type", "placement_strategy", "topology"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = ChildPath(path, key);
          if (key == "num_workers") {
            has_num_workers = true;
            return NumWorkers(value, key_path, out);
          }
          if (key == "use_gpu") {
            return yaml_.SetBool(value, key_path, [&](bool b) { out->set_use_gpu(b); });
          }
          if (key == "resources_per_worker") return ResourcesPerWorker(value, key_path, out);
          if (key == "rank_resources") return RankResources(value, key_path, out);
          if (key == "label_selector") return LabelSelectors(value, key_path, out);
          if (key == "trainer_resources") return TrainerResources(value, key_path, out);
          if (key == "accelerator_type") {
            return yaml_.String(value, key_path, out->mutable_accelerator_type());
          }
          if (key == "topology") return Topology(value, key_path, out->mutable_topology());
          return Strategy(value, key_path, out);
        });
    if (!status.ok()) return status;
    if (!has_num_workers) return yaml_.Error(node, ChildPath(path, "num_workers"), "required");
    return absl::OkStatus();
  }

  absl::Status NumWorkers(const YAML::Node& node, const std::string& path,
                          v1::ScalingConfig* out) const {
    // {min: M, max: N}: elastic (Ray Train V2's num_workers=(M, N)).
    if (node.IsMap()) return ElasticWorkers(node, path, out);
    // One bundle per worker, so the placement group's limit is the job's.
    return yaml_.SetInteger(node, path, 1, PlacementGroupSpec::kMaxBundles,
                            [&](int64_t n) { out->set_num_workers(n); });
  }

  // Not a message of its own: min is ScalingConfig.min_workers, max its
  // num_workers.
  absl::Status ElasticWorkers(const YAML::Node& node, absl::string_view path,
                              v1::ScalingConfig* out) const {
    bool has_min = false, has_max = false;
    absl::Status status = yaml_.ForEachKey(
        node, path, {"min", "max"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          (key == "min" ? has_min : has_max) = true;
          return yaml_.SetInteger(value, ChildPath(path, key), 1, PlacementGroupSpec::kMaxBundles,
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
      return yaml_.Error(node, ChildPath(path, has_min ? "max" : "min"), "required with the other");
    }
    if (out->min_workers() > out->num_workers()) {
      return yaml_.Error(
          node, path,
          absl::StrCat("min ", out->min_workers(), " is more than max ", out->num_workers()));
    }
    return absl::OkStatus();
  }

  // A list gives each rank its own: rank i's is entry i.
  absl::Status ResourcesPerWorker(const YAML::Node& node, const std::string& path,
                                  v1::ScalingConfig* out) const {
    if (!node.IsSequence()) return Resources(node, path, out->mutable_resources_per_worker());
    return yaml_.ForEachItem(node, path, [&](const YAML::Node& item, const std::string& item_path) {
      return Resources(item, item_path, out->add_resources_per_worker_list());
    });
  }

  absl::Status TrainerResources(const YAML::Node& node, const std::string& path,
                                v1::ScalingConfig* out) const {
    // Ray's trainer_resources={} is "none"; an empty map on the wire is
    // "unset" (CPU: 1), so none is {CPU: 0} there.
    if (node.IsMap() && node.size() == 0) {
      (*out->mutable_trainer_resources()->mutable_amounts())[std::string(kCpu)] = 0;
      return absl::OkStatus();
    }
    return Resources(node, path, out->mutable_trainer_resources());
  }

  // `topology: {required: berth.io/topology-rack}` or `{preferred: [a, b]}`
  // (or one key for preferred). The keys are checked where they are used.
  absl::Status Topology(const YAML::Node& node, absl::string_view path, v1::Topology* out) const {
    return yaml_.ForEachKey(
        node, path, FieldKeys(*v1::Topology::descriptor()),
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = ChildPath(path, key);
          if (key == "required") return yaml_.String(value, key_path, out->mutable_required());
          if (!value.IsSequence()) return yaml_.String(value, key_path, out->add_preferred());
          return yaml_.ForEachItem(value, key_path,
                                   [&](const YAML::Node& item, const std::string& item_path) {
                                     return yaml_.String(item, item_path, out->add_preferred());
                                   });
        });
  }

  absl::Status Strategy(const YAML::Node& node, const std::string& path,
                        v1::ScalingConfig* out) const {
    if (!node.IsScalar()) return yaml_.Expected(node, path, "a strategy name");
    absl::StatusOr<PlacementStrategy> strategy = ParsePlacementStrategy(node.Scalar(), path);
    if (!strategy.ok()) return yaml_.At(node.Mark(), strategy.status());
    out->set_placement_strategy(StrategyToProto(*strategy));
    return absl::OkStatus();
  }

  // `rank_resources: {0: {memory: 200Gi}}`: ranks as integer keys.
  absl::Status RankResources(const YAML::Node& node, absl::string_view path,
                             v1::ScalingConfig* out) const {
    return yaml_.ForEachEntry(
        node, path,
        [&](const std::string&, const YAML::Node& value, const YAML::Node& key) -> absl::Status {
          absl::StatusOr<int64_t> rank = yaml_.Integer(key, absl::StrCat(path, " key"), 0,
                                                       PlacementGroupSpec::kMaxBundles - 1);
          if (!rank.ok()) return rank.status();
          return Resources(value, absl::StrCat(path, "[", *rank, "]"),
                           &(*out->mutable_rank_resources())[static_cast<uint32_t>(*rank)]);
        });
  }

  // One selector for every rank, or a list of one per rank.
  absl::Status LabelSelectors(const YAML::Node& node, const std::string& path,
                              v1::ScalingConfig* out) const {
    if (!node.IsSequence()) return Selector(node, path, out->add_label_selector());
    return yaml_.ForEachItem(node, path, [&](const YAML::Node& item, const std::string& item_path) {
      return Selector(item, item_path, out->add_label_selector());
    });
  }

  // A selector in berth's set-based text: "zone in (a,b), !spot".
  absl::Status Selector(const YAML::Node& node, const std::string& path,
                        v1::LabelSelector* out) const {
    if (!node.IsScalar()) {
      return yaml_.Expected(node, path, "a selector such as \"zone in (a,b)\"");
    }
    absl::StatusOr<LabelSelector> selector = LabelSelector::Parse(node.Scalar(), path);
    if (!selector.ok()) return yaml_.At(node.Mark(), selector.status());
    LabelSelectorToProto(*selector, out);
    return absl::OkStatus();
  }

  // The Entrypoint's kinds, builtin (builtin_trainer) and command, and
  // beside `command:` the Command's fields, its argv's arguments as `args`;
  // its working_dir_package is the client's to set, from runtime_env.
  absl::Status Entrypoint(const YAML::Node& node, absl::string_view path,
                          v1::Entrypoint* out) const {
    // Key nodes as seen, for errors about the combination. args, env and
    // working_dir go to `rest` until the program is known, since they may
    // come before `command:`.
    std::optional<YAML::Node> builtin, command, command_only;
    std::string command_only_path, program;
    v1::Entrypoint::Command rest;
    absl::Status status = yaml_.ForEachKey(
        node, path, {"builtin", "command", "args", "env", "working_dir", "per_node", "launcher"},
        [&](const std::string& key, const YAML::Node& value,
            const YAML::Node& key_node) -> absl::Status {
          const std::string key_path = ChildPath(path, key);
          if (key == "builtin") {
            builtin = key_node;
            return Builtin(value, key_path, out->mutable_builtin_trainer());
          }
          if (key == "command") {
            command = key_node;
            return Program(value, key_path, &program);
          }
          if (!command_only) {
            command_only = key_node;
            command_only_path = key_path;
          }
          return CommandField(key, value, key_path, &rest);
        });
    if (!status.ok()) return status;
    if (builtin && command) {
      return yaml_.Error(*command, ChildPath(path, "command"),
                         "give either entrypoint.builtin or entrypoint.command, not both");
    }
    if (!command && command_only) {
      return yaml_.Error(*command_only, command_only_path, "only with entrypoint.command");
    }
    if (!command && !builtin) {
      return yaml_.Error(node, path, "needs entrypoint.builtin or entrypoint.command");
    }
    if (command) {
      v1::Entrypoint::Command* cmd = out->mutable_command();
      cmd->add_argv(program);
      cmd->MergeFrom(rest);
    }
    return absl::OkStatus();
  }

  absl::Status Program(const YAML::Node& node, const std::string& path,
                       std::string* program) const {
    if (absl::Status s = yaml_.String(node, path, program); !s.ok()) return s;
    if (absl::StripAsciiWhitespace(*program).empty()) {
      return yaml_.Error(node, path, "empty program");
    }
    return absl::OkStatus();
  }

  // One of the Command's keys beside `command:`.
  absl::Status CommandField(const std::string& key, const YAML::Node& value,
                            const std::string& path, v1::Entrypoint::Command* out) const {
    if (key == "args") return yaml_.StringList(value, path, out->mutable_argv());
    if (key == "env") return yaml_.StringMap(value, path, out->mutable_env());
    if (key == "per_node") {
      return yaml_.SetBool(value, path, [&](bool b) { out->set_per_node(b); });
    }
    if (key == "launcher") return Launcher(value, path, out);
    return yaml_.String(value, path, out->mutable_working_dir());
  }

  absl::Status Launcher(const YAML::Node& node, const std::string& path,
                        v1::Entrypoint::Command* out) const {
    std::string name;
    if (absl::Status s = yaml_.String(node, path, &name); !s.ok()) return s;
    if (name == "torchrun") {
      out->set_launcher(v1::Entrypoint::LAUNCHER_TORCHRUN);
    } else if (name == "accelerate") {
      out->set_launcher(v1::Entrypoint::LAUNCHER_ACCELERATE);
    } else {
      return yaml_.Error(node, path, "torchrun or accelerate");
    }
    return absl::OkStatus();
  }

  // runtime_env: {working_dir: DIR, excludes: [glob, ...]}, as Ray's; the
  // client's own, no message of the wire.
  absl::Status RuntimeEnv(const YAML::Node& node, absl::string_view path,
                          JobRuntimeEnv* out) const {
    absl::Status status = yaml_.ForEachKey(
        node, path, {"working_dir", "excludes"},
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = ChildPath(path, key);
          if (key == "working_dir") return yaml_.String(value, key_path, &out->working_dir);
          google::protobuf::RepeatedPtrField<std::string> excludes;
          if (absl::Status s = yaml_.StringList(value, key_path, &excludes); !s.ok()) return s;
          out->excludes.assign(excludes.begin(), excludes.end());
          return absl::OkStatus();
        });
    if (status.ok() && out->working_dir.empty()) {
      return yaml_.Error(node, ChildPath(path, "working_dir"), "required (the folder to upload)");
    }
    return status;
  }

  // BuiltinTrainer's fields, checkpoint_every_steps written
  // `checkpoint_every` (as --checkpoint-every).
  absl::Status Builtin(const YAML::Node& node, absl::string_view path,
                       v1::Entrypoint::BuiltinTrainer* out) const {
    out->set_steps(kDefaultTrainSteps);
    return yaml_.ForEachKey(
        node, path,
        FieldKeys(*v1::Entrypoint::BuiltinTrainer::descriptor(),
                  {{"checkpoint_every_steps", "checkpoint_every"}}),
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) -> absl::Status {
          const std::string key_path = ChildPath(path, key);
          if (key == "model") return yaml_.String(value, key_path, out->mutable_model());
          if (key == "steps") {
            return yaml_.SetInteger(value, key_path, 1, kMaxUint32,
                                    [&](int64_t n) { out->set_steps(n); });
          }
          if (key == "batch_size") {
            return yaml_.SetInteger(value, key_path, 1, kMaxUint32,
                                    [&](int64_t n) { out->set_batch_size(n); });
          }
          if (key == "checkpoint_every") {
            return yaml_.SetInteger(value, key_path, 0, kMaxUint32,
                                    [&](int64_t n) { out->set_checkpoint_every_steps(n); });
          }
          return LearningRate(value, key_path, out);
        });
  }

  absl::Status LearningRate(const YAML::Node& node, const std::string& path,
                            v1::Entrypoint::BuiltinTrainer* out) const {
    absl::StatusOr<double> lr = yaml_.Number(node, path);
    if (!lr.ok()) return lr.status();
    if (!std::isfinite(*lr) || *lr <= 0) {
      return yaml_.Error(node, path, absl::StrCat(node.Scalar(), " is not a finite number > 0"));
    }
    out->set_learning_rate(*lr);
    return absl::OkStatus();
  }

  absl::Status Failure(const YAML::Node& node, absl::string_view path,
                       v1::FailureConfig* out) const {
    return yaml_.ForEachKey(
        node, path,
        FieldKeys(*v1::FailureConfig::descriptor(), {{"progress_timeout_s", "progress_timeout"}}),
        [&](const std::string& key, const YAML::Node& value, const YAML::Node&) {
          if (key == "count_node_failures") {
            return yaml_.SetBool(value, ChildPath(path, key),
                                 [&](bool b) { out->set_count_node_failures(b); });
          }
          if (key == "progress_timeout") {
            return Seconds(value, ChildPath(path, key), 1,
                           [&](int64_t s) { out->set_progress_timeout_s(s); });
          }
          // -1 = unlimited, as in Ray.
          return yaml_.SetInteger(value, ChildPath(path, key), -1,
                                  std::numeric_limits<int32_t>::max(),
                                  [&](int64_t n) { out->set_max_failures(n); });
        });
  }

  const YamlReader& yaml_;
};

// As a person reads the file: `~/` is their home (a venv's python in
// ~/.venvs), and a relative working_dir is the job file's folder's
// (`working_dir: .` beside train.py).
void ResolvePaths(const std::string& file, v1::Entrypoint::Command* command, JobRuntimeEnv* env) {
  const char* home = std::getenv("HOME");
  for (std::string* path :
       {command->mutable_argv(0), command->mutable_working_dir(), &env->working_dir}) {
    if (home != nullptr && absl::StartsWith(*path, "~/"))
      *path = absl::StrCat(home, path->substr(1));
  }
  for (std::string* dir : {command->mutable_working_dir(), &env->working_dir}) {
    if (!dir->empty() && !std::filesystem::path(*dir).is_absolute()) {
      std::error_code ignored;
      *dir =
          std::filesystem::weakly_canonical(
              std::filesystem::absolute(std::filesystem::path(file).parent_path() / *dir), ignored)
              .string();
    }
  }
}

}  // namespace

absl::StatusOr<v1::TrainJobSpec> ParseJobFile(const std::string& text, const std::string& name,
                                              JobRuntimeEnv* runtime_env) {
  const YamlReader yaml(name, "job file");
  v1::TrainJobSpec spec;
  absl::Status status = yaml.ReadOneDocument(text, "job file", [&](const YAML::Node& root) {
    return JobFileReader(yaml).Read(root, &spec, runtime_env);
  });
  if (!status.ok()) return status;
  return spec;
}

absl::StatusOr<v1::TrainJobSpec> LoadJobFile(const std::string& path, JobRuntimeEnv* runtime_env) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  JobRuntimeEnv env;
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(*text, path, &env);
  if (spec.ok() && spec->entrypoint().has_command()) {
    ResolvePaths(path, spec->mutable_entrypoint()->mutable_command(), &env);
  }
  if (runtime_env != nullptr) *runtime_env = std::move(env);
  return spec;
}

}  // namespace berth
