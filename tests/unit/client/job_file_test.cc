#include "client/job_file.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/job_args.h"
#include "client/yaml_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace fs = std::filesystem;

const fs::path kExamples = BERTH_EXAMPLES_DIR;

// The .yaml files directly in `dir`, sorted.
std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The error message of parsing `text` as "job.yaml"; "" if it parses.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(text, "job.yaml");
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(QueueFileTest, CohortsClassesAndQueuesParseAndBadOnesNameTheLine) {
  absl::StatusOr<v1::ApplyQueuesRequest> request = ParseQueueFile(R"(cohorts: [org]
priority_classes:
  - {name: high, value: 100}
queues:
  - name: team-a
    cohort: org
    team: team-a
    quota: {GPU: 8, "GPU:A10G": 4, memory: 512Gi}
    borrowing_limit: {GPU: 4}
    weight: 2
    within_queue_preemption: LowerOrNewerEqualPriority
    default_time_limit: 1h
    max_time_limit: 8h
)",
                                                                  "queues.yaml");
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->cohorts_size(), 1);
  EXPECT_EQ(request->cohorts(0), "org");
  ASSERT_EQ(request->priority_classes_size(), 1);
  EXPECT_EQ(request->priority_classes(0).value(), 100);
  ASSERT_EQ(request->queues_size(), 1);
  const v1::Queue& q = request->queues(0);
  EXPECT_EQ(q.team(), "team-a");
  EXPECT_EQ(q.nominal_quota().at("GPU:A10G"), 4);
  EXPECT_EQ(q.nominal_quota().at("memory"), 512.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(q.borrowing_limit().at("GPU"), 4);
  EXPECT_EQ(q.weight(), 2);
  EXPECT_EQ(q.within_queue_preemption(), "LowerOrNewerEqualPriority");
  EXPECT_EQ(q.default_time_limit_s(), 3600);
  EXPECT_EQ(q.max_time_limit_s(), 8 * 3600);

  auto error = [](const std::string& text) {
    absl::StatusOr<v1::ApplyQueuesRequest> r = ParseQueueFile(text, "queues.yaml");
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(error("queues:\n  - name: a\n    quotas: {GPU: 1}\n"),
              StartsWith("queues.yaml:3: queues[0].quotas: unknown key"));
  EXPECT_THAT(error("queues:\n  - name: a\n    weight: heavy\n"),
              StartsWith("queues.yaml:3: queues[0].weight: expected a number"));
  EXPECT_THAT(error("queues:\n  - name: a\n    quota: {GPU: lots}\n"),
              HasSubstr("queues[0].quota[\"GPU\"]"));
  EXPECT_THAT(error("cohorts: org\n"), StartsWith("queues.yaml:1: cohorts: expected a list"));
  EXPECT_THAT(error("queues:\n  - name: a\n    max_time_limit: forever\n"),
              StartsWith("queues.yaml:3: queues[0].max_time_limit: 'forever' is not a duration"));
}

TEST(JobFileTest, APriorityClassAndTheJobsClocksAreRead) {
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(
      "scaling: {num_workers: 1}\npriority_class: high\ntime_limit: 1h30m\n"
      "stop_grace_period: 0s\nfailure: {max_failures: -1, progress_timeout: 5m}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->priority_class(), "high");
  EXPECT_EQ(spec->time_limit_s(), 5400);
  ASSERT_TRUE(spec->has_stop_grace_period_s());  // 0: SIGKILL at once, not the default
  EXPECT_EQ(spec->stop_grace_period_s(), 0);
  EXPECT_EQ(spec->failure_config().progress_timeout_s(), 300);
  EXPECT_FALSE(ParseJobFile("scaling: {num_workers: 1}\n", "job.yaml")->has_stop_grace_period_s());
  EXPECT_THAT(ErrorOf("scaling: {num_workers: 1}\ntime_limit: soon\n"),
              StartsWith("job.yaml:2: time_limit: 'soon' is not a duration"));
  EXPECT_THAT(ErrorOf("scaling: {num_workers: 1}\ntime_limit: 0s\n"),
              StartsWith("job.yaml:2: time_limit: '0s' is not a duration of whole seconds of at "
                         "least 1s"));
  EXPECT_THAT(ErrorOf("scaling: {num_workers: 1}\nstop_grace_period: 1.5s\n"),
              StartsWith("job.yaml:2: stop_grace_period: '1.5s' is not a duration"));
  EXPECT_THAT(ErrorOf("scaling: {num_workers: 1}\nfailure: {progress_timeout: -1m}\n"),
              StartsWith("job.yaml:2: failure.progress_timeout: '-1m' is not a duration"));
}

TEST(JobFileTest, EveryExampleParses) {
  const std::vector<fs::path> files = YamlFiles(kExamples);
  EXPECT_GE(files.size(), 6u);
  for (const fs::path& file : files) {
    absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile(file.string());
    EXPECT_TRUE(spec.ok()) << spec.status();
  }
}

TEST(JobFileTest, EveryBadExampleIsRejectedWithItsLine) {
  const std::vector<fs::path> files = YamlFiles(kExamples / "bad");
  EXPECT_GE(files.size(), 3u);
  for (const fs::path& file : files) {
    absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile(file.string());
    ASSERT_FALSE(spec.ok()) << file;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), StartsWith(file.string() + ":")) << file;
  }
  EXPECT_EQ(LoadJobFile((kExamples / "bad" / "wrong-type.yaml").string()).status().message(),
            (kExamples / "bad" / "wrong-type.yaml").string() +
                ":3: scaling.num_workers: expected an integer, got 'four'");
}

TEST(JobFileTest, SeedBigmemRank0) {
  absl::StatusOr<v1::TrainJobSpec> spec =
      LoadJobFile((kExamples / "seed-bigmem-rank0.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "seed-bigmem-rank0");
  const v1::ScalingConfig& scaling = spec->scaling_config();
  EXPECT_EQ(scaling.num_workers(), 16u);
  EXPECT_TRUE(scaling.use_gpu());
  EXPECT_EQ(scaling.accelerator_type(), "A10G");
  EXPECT_EQ(scaling.placement_strategy(), v1::PLACEMENT_STRATEGY_PACK);
  EXPECT_TRUE(scaling.resources_per_worker().amounts().empty());
  ASSERT_EQ(scaling.trainer_resources().amounts_size(), 2);
  EXPECT_EQ(scaling.trainer_resources().amounts().at("CPU"), 1);
  EXPECT_EQ(scaling.trainer_resources().amounts().at("memory"), 200.0 * (int64_t{1} << 30));
  ASSERT_TRUE(spec->entrypoint().has_builtin_trainer());
  const v1::Entrypoint::BuiltinTrainer& builtin = spec->entrypoint().builtin_trainer();
  EXPECT_EQ(builtin.model(), "mlp");
  EXPECT_EQ(builtin.steps(), 200u);
  EXPECT_EQ(builtin.learning_rate(), 0.05);
  EXPECT_EQ(builtin.batch_size(), 64u);
  EXPECT_EQ(builtin.checkpoint_every_steps(), 50u);
  EXPECT_EQ(spec->failure_config().max_failures(), 2);
  EXPECT_FALSE(spec->failure_config().has_count_node_failures());  // Ray's default: counted
  EXPECT_EQ(spec->storage_path(), "/shared/checkpoints/seed-bigmem-rank0");
  EXPECT_EQ(spec->labels().at("team"), "research");
  EXPECT_EQ(spec->labels().at("seed"), "2");
}

TEST(JobFileTest, PerRankResourcesAndSelectors) {
  absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile((kExamples / "rank-resources.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ScalingConfig& scaling = spec->scaling_config();
  ASSERT_EQ(scaling.rank_resources_size(), 1);
  EXPECT_EQ(scaling.rank_resources().at(0).amounts().at("memory"), 200.0 * (int64_t{1} << 30));
  ASSERT_EQ(scaling.label_selector_size(), 4);
  ASSERT_EQ(scaling.label_selector(1).requirements_size(), 2);
  EXPECT_EQ(scaling.label_selector(1).requirements(1).key(), "disk");
  EXPECT_EQ(scaling.label_selector(1).requirements(1).op(), v1::LABEL_OPERATOR_IN);
  EXPECT_EQ(scaling.label_selector(0).requirements(0).op(), v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  // trainer_resources: {} is Ray's "none".
  EXPECT_EQ(scaling.trainer_resources().amounts().at("CPU"), 0);

  absl::StatusOr<v1::TrainJobSpec> list = ParseJobFile(
      "scaling:\n  num_workers: 2\n  use_gpu: true\n  label_selector: \"zone=a\"\n"
      "  resources_per_worker: [{GPU: 2}, {GPU: 1, CPU: 4}]\n",
      "job.yaml");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->scaling_config().label_selector_size(), 1);
  EXPECT_TRUE(list->scaling_config().resources_per_worker().amounts().empty());
  ASSERT_EQ(list->scaling_config().resources_per_worker_list_size(), 2);
  EXPECT_EQ(list->scaling_config().resources_per_worker_list(1).amounts().at("CPU"), 4);

  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  rank_resources:\n    first: {CPU: 1}\n"),
            "job.yaml:4: scaling.rank_resources key: expected an integer, got 'first'");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  rank_resources: {-1: {CPU: 1}}\n"),
            "job.yaml:3: scaling.rank_resources key: -1 is not in 0..4095");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  rank_resources: {1: {CPU: lots}}\n"),
            "job.yaml:3: scaling.rank_resources[1][\"CPU\"]: 'lots' is not a quantity "
            "(want e.g. 0.5, 8, 200Gi, 1.5G)");
  EXPECT_THAT(ErrorOf("scaling:\n  num_workers: 2\n  label_selector: [\"a\", \"zone in ()\"]\n"),
              StartsWith("job.yaml:3: scaling.label_selector[1]: "));
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  label_selector: {zone: a}\n"),
            "job.yaml:3: scaling.label_selector: expected a selector such as \"zone in (a,b)\", "
            "got a map");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  resources_per_worker: [{GPU: 1}, 3]\n"),
            "job.yaml:3: scaling.resources_per_worker[1]: expected a map, got '3'");
}

TEST(JobFileTest, ElasticNumWorkers) {
  absl::StatusOr<v1::TrainJobSpec> spec =
      ParseJobFile("scaling:\n  num_workers: {min: 2, max: 4}\n  use_gpu: true\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scaling_config().num_workers(), 4u);
  EXPECT_EQ(spec->scaling_config().min_workers(), 2u);
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: {min: 5, max: 4}\n"),
            "job.yaml:2: scaling.num_workers: min 5 is more than max 4");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: {min: 2}\n"),
            "job.yaml:2: scaling.num_workers.max: required with the other");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: {min: 0, max: 4}\n"),
            "job.yaml:2: scaling.num_workers.min: 0 is not in 1..4096");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: {least: 1, max: 4}\n"),
            "job.yaml:2: scaling.num_workers.least: unknown key (allowed: min, max)");
}

TEST(JobFileTest, Topology) {
  absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile((kExamples / "rack-gang.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scaling_config().topology().required(), "berth.io/topology-rack");
  absl::StatusOr<v1::TrainJobSpec> preferred = ParseJobFile(
      "scaling:\n  num_workers: 2\n  topology: {preferred: [berth.io/nvlink-domain, "
      "berth.io/topology-rack]}\n",
      "job.yaml");
  ASSERT_TRUE(preferred.ok()) << preferred.status();
  EXPECT_EQ(preferred->scaling_config().topology().preferred_size(), 2);
  absl::StatusOr<v1::TrainJobSpec> one =
      ParseJobFile("scaling:\n  num_workers: 2\n  topology: {preferred: rack}\n", "job.yaml");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->scaling_config().topology().preferred(0), "rack");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  topology: {rack: a}\n"),
            "job.yaml:3: scaling.topology.rack: unknown key (allowed: required, preferred)");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 2\n  topology: {required: [a]}\n"),
            "job.yaml:3: scaling.topology.required: expected a string, got a list");
}

TEST(JobFileTest, SeedA10gDoesNotCountALostNode) {
  absl::StatusOr<v1::TrainJobSpec> spec = LoadJobFile((kExamples / "seed-a10g.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->failure_config().max_failures(), 2);
  ASSERT_TRUE(spec->failure_config().has_count_node_failures());
  EXPECT_FALSE(spec->failure_config().count_node_failures());
}

TEST(JobFileTest, CommandTakesArgsEnvAndWorkingDirInAnyOrder) {
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(R"(
scaling: {num_workers: 2}
entrypoint:
  args: [train.py, --epochs, 3]
  env: {NCCL_DEBUG: INFO, OMP_NUM_THREADS: 8}
  command: python3
  working_dir: /srv/train
)",
                                                       "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::Entrypoint::Command& command = spec->entrypoint().command();
  EXPECT_THAT(command.argv(), testing::ElementsAre("python3", "train.py", "--epochs", "3"));
  EXPECT_EQ(command.env().at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(command.env().at("OMP_NUM_THREADS"), "8");
  EXPECT_EQ(command.working_dir(), "/srv/train");
}

TEST(JobFileTest, RuntimeEnvNamesTheFolderToUploadAndItsExcludes) {
  JobRuntimeEnv env;
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(R"(
scaling: {num_workers: 2}
entrypoint: {command: python3, args: [train.py]}
runtime_env:
  working_dir: /home/me/project
  excludes: ["*.ckpt", data]
)",
                                                       "job.yaml", &env);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(env.working_dir, "/home/me/project");
  EXPECT_THAT(env.excludes, testing::ElementsAre("*.ckpt", "data"));
  EXPECT_TRUE(spec->entrypoint().command().working_dir().empty());

  const auto error = [](const std::string& text) {
    return std::string(ParseJobFile(text, "job.yaml").status().message());
  };
  EXPECT_EQ(error("scaling: {num_workers: 1}\nruntime_env: {working_dir: .}\n"),
            "job.yaml:2: runtime_env: only with entrypoint.command");
  EXPECT_EQ(error("scaling: {num_workers: 1}\nentrypoint: {command: x, working_dir: /srv}\n"
                  "runtime_env: {working_dir: .}\n"),
            "job.yaml:3: runtime_env.working_dir: give either entrypoint.working_dir (a folder on "
            "every node) or runtime_env.working_dir (uploaded), not both");
  EXPECT_EQ(
      error("scaling: {num_workers: 1}\nentrypoint: {command: x}\nruntime_env: {excludes: [a]}\n"),
      "job.yaml:3: runtime_env.working_dir: required (the folder to upload)");
  EXPECT_THAT(
      error("scaling: {num_workers: 1}\nentrypoint: {command: x}\nruntime_env: {pip: [a]}\n"),
      testing::HasSubstr("runtime_env.pip"));
}

TEST(JobFileTest, DefaultsMatchTheCommandLine) {
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile("scaling:\n  num_workers: 3\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scaling_config().num_workers(), 3u);
  EXPECT_FALSE(spec->scaling_config().use_gpu());
  EXPECT_EQ(spec->scaling_config().placement_strategy(), v1::PLACEMENT_STRATEGY_PACK);
  ASSERT_TRUE(spec->entrypoint().has_builtin_trainer());
  EXPECT_EQ(spec->entrypoint().builtin_trainer().steps(), kDefaultTrainSteps);
  EXPECT_TRUE(spec->has_failure_config());
  EXPECT_EQ(spec->failure_config().max_failures(), 0);

  spec = ParseJobFile(
      "scaling: {num_workers: 1, use_gpu: True, placement_strategy: Spread}\n"
      "entrypoint: {builtin: {}}\nfailure: {max_failures: -1}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->scaling_config().use_gpu());
  EXPECT_EQ(spec->scaling_config().placement_strategy(), v1::PLACEMENT_STRATEGY_SPREAD);
  EXPECT_EQ(spec->entrypoint().builtin_trainer().steps(), kDefaultTrainSteps);
  EXPECT_EQ(spec->failure_config().max_failures(), -1);
}

TEST(JobFileTest, AJobNamesItsQueue) {
  absl::StatusOr<v1::TrainJobSpec> spec =
      ParseJobFile("queue: team-a\nscaling: {num_workers: 2}\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->queue(), "team-a");
  EXPECT_EQ(ErrorOf("queue: [a, b]\nscaling: {num_workers: 1}\n").rfind("job.yaml:1: queue", 0),
            0u);
}

TEST(JobFileTest, QuantitiesAsNumbersOrStrings) {
  absl::StatusOr<v1::TrainJobSpec> spec = ParseJobFile(
      "scaling:\n  num_workers: 1\n  resources_per_worker: {CPU: 0.5, GPU: \"1\", memory: 1Ki}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& amounts = spec->scaling_config().resources_per_worker().amounts();
  EXPECT_EQ(amounts.at("CPU"), 0.5);
  EXPECT_EQ(amounts.at("GPU"), 1);
  EXPECT_EQ(amounts.at("memory"), 1024);
}

TEST(JobFileTest, UnknownKeysNameTheKeyAndTheAllowedOnes) {
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\nnmae: x\n"),
            "job.yaml:3: nmae: unknown key (allowed: name, queue, priority, priority_class, "
            "time_limit, stop_grace_period, scaling, entrypoint, failure, checkpoint_dir, labels, "
            "runtime_env)");
  EXPECT_EQ(ErrorOf("name: x\nscaling:\n  num_workers: 2\n  use_gpus: true\n"),
            "job.yaml:4: scaling.use_gpus: unknown key (allowed: num_workers, use_gpu, "
            "resources_per_worker, trainer_resources, rank_resources, label_selector, "
            "accelerator_type, placement_strategy, topology)");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  builtin:\n    lr: 0.1\n"),
            "job.yaml:4: entrypoint.builtin.lr: unknown key (allowed: model, steps, "
            "learning_rate, batch_size, checkpoint_every)");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  num_workers: 2\n"),
            "job.yaml:3: scaling.num_workers: given twice");
}

// The keys an "unknown key (allowed: ...)" error lists, sorted.
std::vector<std::string> AllowedKeys(const std::string& error) {
  const std::string prefix = "(allowed: ";
  const size_t start = error.find(prefix);
  if (start == std::string::npos || error.back() != ')') return {error};
  std::vector<std::string> keys = absl::StrSplit(
      error.substr(start + prefix.size(), error.size() - start - prefix.size() - 1), ", ");
  std::sort(keys.begin(), keys.end());
  return keys;
}

// `message`'s FieldKeys with `renamed`, less `omitted`, plus `extra`, sorted.
std::vector<std::string> KeysOf(const google::protobuf::Descriptor& message,
                                const std::map<std::string, std::string>& renamed,
                                const std::set<std::string>& omitted,
                                const std::vector<std::string>& extra) {
  std::vector<std::string> keys;
  for (const std::string& key : FieldKeys(message, renamed)) {
    if (omitted.count(key) == 0) keys.push_back(key);
  }
  keys.insert(keys.end(), extra.begin(), extra.end());
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Sections whose keys are listed by hand (in the order errors name them)
// have their message's fields, but for the differences named here: a new
// field fails this test until the file reads it or it is named here.
TEST(JobFileTest, HandListedKeysAreTheirMessagesFieldsButForTheNamedDifferences) {
  EXPECT_EQ(AllowedKeys(ErrorOf("scaling: {num_workers: 1}\nx: 1\n")),
            KeysOf(*v1::TrainJobSpec::descriptor(),
                   {{"scaling_config", "scaling"},
                    {"failure_config", "failure"},
                    {"storage_path", "checkpoint_dir"},
                    {"time_limit_s", "time_limit"},
                    {"stop_grace_period_s", "stop_grace_period"}},
                   {}, {"runtime_env"}));
  EXPECT_EQ(AllowedKeys(ErrorOf("scaling: {num_workers: 1, x: 1}\n")),
            KeysOf(*v1::ScalingConfig::descriptor(), {},
                   {"min_workers", "resources_per_worker_list"}, {}));
  EXPECT_EQ(AllowedKeys(ErrorOf("scaling: {num_workers: 1}\nentrypoint: {x: 1}\n")),
            KeysOf(*v1::Entrypoint::Command::descriptor(), {{"argv", "args"}},
                   {"working_dir_package"}, {"builtin", "command"}));
  auto queue_error = [](const std::string& text) {
    return std::string(ParseQueueFile(text, "queues.yaml").status().message());
  };
  EXPECT_EQ(AllowedKeys(queue_error("x: 1\n")),
            KeysOf(*v1::ApplyQueuesRequest::descriptor(), {}, {}, {}));
  EXPECT_EQ(AllowedKeys(queue_error("queues: [{x: 1}]\n")),
            KeysOf(*v1::Queue::descriptor(),
                   {{"nominal_quota", "quota"},
                    {"default_time_limit_s", "default_time_limit"},
                    {"max_time_limit_s", "max_time_limit"}},
                   {"status"}, {}));
}

// Sections whose keys are their message's field names (FieldKeys) read
// each by name; a new field fails this test until the file reads it.
TEST(JobFileTest, KeysFromTheProtosAreTheOnesRead) {
  EXPECT_EQ(ErrorOf("failure: {x: 1}\nscaling: {num_workers: 1}\n"),
            "job.yaml:1: failure.x: unknown key (allowed: max_failures, count_node_failures, "
            "progress_timeout)");
  EXPECT_EQ(ParseQueueFile("priority_classes: [{x: 1}]\n", "queues.yaml").status().message(),
            "queues.yaml:1: priority_classes[0].x: unknown key (allowed: name, value)");
  EXPECT_EQ(ParseQueueFile("- a\n- b\n", "queues.yaml").status().message(),
            "queues.yaml:1: queue file: expected a map, got a list");
}

TEST(JobFileTest, WrongTypesNameTheExpectedType) {
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: \"four\"\n"),
            "job.yaml:2: scaling.num_workers: expected an integer, got the string \"four\"");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1.5\n"),
            "job.yaml:2: scaling.num_workers: expected an integer, got '1.5'");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  use_gpu: 3\n"),
            "job.yaml:3: scaling.use_gpu: expected true or false, got '3'");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  command: python3\n"
                    "  args: {a: b}\n"),
            "job.yaml:4: entrypoint.args: expected a list of strings, got a map");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  command: python3\n"
                    "  args:\n    - train.py\n    - [x]\n"),
            "job.yaml:6: entrypoint.args[1]: expected a string, got a list");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  command: [python3, x.py]\n"),
            "job.yaml:3: entrypoint.command: expected a string, got a list");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nlabels: [a]\n"),
            "job.yaml:2: labels: expected a map, got a list");
  EXPECT_EQ(ErrorOf("scaling:\n"), "job.yaml:1: scaling: no value");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  trainer_resources: {CPU: ~}\n"),
            "job.yaml:3: scaling.trainer_resources[\"CPU\"]: no value");
  EXPECT_EQ(ErrorOf("- a\n"), "job.yaml:1: job file: expected a map, got a list");
  EXPECT_EQ(ErrorOf(""), "job.yaml:1: job file: expected a map, got nothing");
}

TEST(JobFileTest, BadValues) {
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 0\n"),
            "job.yaml:2: scaling.num_workers: 0 is not in 1..4096");
  EXPECT_EQ(ErrorOf("name: x\n"),
            "job.yaml:1: scaling: required (with at least "
            "scaling.num_workers)");
  EXPECT_EQ(ErrorOf("name: x\nscaling:\n  use_gpu: true\n"),
            "job.yaml:3: scaling.num_workers: required");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  placement_strategy: SPRAED\n"),
            "job.yaml:3: scaling.placement_strategy: unknown strategy 'SPRAED' (want PACK, "
            "SPREAD, STRICT_PACK or STRICT_SPREAD)");
  EXPECT_EQ(ErrorOf("failure: {max_failures: -2}\nscaling: {num_workers: 1}\n"),
            "job.yaml:1: failure.max_failures: -2 is not in -1..2147483647");
  EXPECT_EQ(ErrorOf("failure: {count_node_failures: sometimes}\nscaling: {num_workers: 1}\n"),
            "job.yaml:1: failure.count_node_failures: expected true or false, got 'sometimes'");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  builtin: {learning_rate: .nan}\n"),
            "job.yaml:3: entrypoint.builtin.learning_rate: expected a number, got '.nan'");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  builtin: {steps: 0}\n"),
            "job.yaml:3: entrypoint.builtin.steps: 0 is not in 1..4294967295");
}

TEST(JobFileTest, BadQuantities) {
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  trainer_resources:\n    CPU: 1\n"
                    "    memory: -200Gi\n"),
            "job.yaml:5: scaling.trainer_resources[\"memory\"]: '-200Gi' is not a quantity "
            "(want e.g. 0.5, 8, 200Gi, 1.5G)");
  EXPECT_THAT(ErrorOf("scaling:\n  num_workers: 1\n  trainer_resources: {CPU: .nan}\n"),
              StartsWith("job.yaml:3: scaling.trainer_resources[\"CPU\"]: '.nan' is not a "
                         "quantity"));
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  trainer_resources: {CPU: {a: 1}}\n"),
            "job.yaml:3: scaling.trainer_resources[\"CPU\"]: expected a quantity, got a map");
  EXPECT_EQ(ErrorOf("scaling:\n  num_workers: 1\n  resources_per_worker:\n    GPU: 1\n"
                    "    accelerator_type:A10G: 0.001\n"),
            "job.yaml:5: scaling.resources_per_worker[\"accelerator_type:A10G\"]: the "
            "accelerator_type: resource is internal; write scaling.accelerator_type: A10G");
  EXPECT_THAT(ErrorOf("scaling:\n  num_workers: 1\n  resources_per_worker: {\"G PU\": 1}\n"),
              StartsWith("job.yaml:3: scaling.resources_per_worker[\"G PU\"]: resource names"));
}

TEST(JobFileTest, EntrypointKinds) {
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  builtin: {steps: 1}\n"
                    "  command: python3\n"),
            "job.yaml:4: entrypoint.command: give either entrypoint.builtin or "
            "entrypoint.command, not both");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  command: \" \"\n"),
            "job.yaml:3: entrypoint.command: empty program");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint:\n  builtin: {}\n"
                    "  env: {A: b}\n"),
            "job.yaml:4: entrypoint.env: only with entrypoint.command");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\nentrypoint: {}\n"),
            "job.yaml:2: entrypoint: needs entrypoint.builtin or entrypoint.command");
}

TEST(JobFileTest, SyntaxErrorsAndFiles) {
  EXPECT_THAT(ErrorOf("scaling:\n  num_workers: 1\nname: [a, b\n"),
              StartsWith("job.yaml:4: YAML: "));
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\n---\nname: x\n"),
            "job.yaml:3: a job file holds one YAML document, not several");
  // Found by job_file_fuzzer: a stray ',' made yaml-cpp's LoadAll loop
  // forever, adding empty documents until memory ran out.
  EXPECT_EQ(ErrorOf(","), "job.yaml:1: YAML: unexpected ','");
  EXPECT_EQ(ErrorOf("# a job\n  , a\n"), "job.yaml:2: YAML: unexpected ','");
  EXPECT_EQ(ErrorOf("scaling: {num_workers: 1}\n---\n,\n"),
            "job.yaml:3: a job file holds one YAML document, not several");
  absl::StatusOr<v1::TrainJobSpec> missing = LoadJobFile("/nonexistent/job.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/job.yaml"));
}

}  // namespace
}  // namespace berth
