#include "client/job_args.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr double kGi = 1 << 30;

JobSubmitArgs FourGpuWorkers() {
  JobSubmitArgs args;
  args.num_workers = 4;
  args.use_gpu = true;
  return args;
}

std::string Error(const JobSubmitArgs& args) {
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  return std::string(spec.status().message());
}

TEST(JobArgsTest, WithoutACommandRunsTheBuiltinTrainer) {
  JobSubmitArgs args = FourGpuWorkers();
  args.name = "mnist";
  args.storage_path = "/ckpt";
  args.max_failures = -1;
  args.lr = 0.1;
  args.batch_size = 32;
  args.checkpoint_every = 25;
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "mnist");
  EXPECT_EQ(spec->storage_path(), "/ckpt");
  EXPECT_EQ(spec->failure_config().max_failures(), -1);
  EXPECT_EQ(spec->scaling_config().num_workers(), 4u);
  EXPECT_TRUE(spec->scaling_config().use_gpu());
  EXPECT_EQ(spec->scaling_config().placement_strategy(), v1::PLACEMENT_STRATEGY_PACK);
  // Unset resources are left to the head's defaults.
  EXPECT_FALSE(spec->scaling_config().has_resources_per_worker());
  EXPECT_FALSE(spec->scaling_config().has_trainer_resources());
  ASSERT_TRUE(spec->entrypoint().has_builtin_trainer());
  const v1::Entrypoint::BuiltinTrainer& trainer = spec->entrypoint().builtin_trainer();
  EXPECT_EQ(trainer.steps(), kDefaultTrainSteps);
  EXPECT_EQ(trainer.learning_rate(), 0.1);
  EXPECT_EQ(trainer.batch_size(), 32u);
  EXPECT_EQ(trainer.checkpoint_every_steps(), 25u);
}

TEST(JobArgsTest, BuiltinTrainerLeavesUnsetFlagsToTheWorker) {
  JobSubmitArgs args = FourGpuWorkers();
  args.steps = 50;
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::Entrypoint::BuiltinTrainer& trainer = spec->entrypoint().builtin_trainer();
  EXPECT_EQ(trainer.steps(), 50u);
  EXPECT_EQ(trainer.learning_rate(), 0);
  EXPECT_EQ(trainer.batch_size(), 0u);
  EXPECT_EQ(trainer.checkpoint_every_steps(), 0u);
}

TEST(JobArgsTest, ACommandRunsOnEveryRankWithItsEnv) {
  JobSubmitArgs args = FourGpuWorkers();
  args.command = {"python", "train.py", "--epochs", "3"};
  args.env = {"NCCL_DEBUG=INFO", "EMPTY=", "EQ=a=b"};
  args.working_dir = "/shared/proj";
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->entrypoint().has_command());
  EXPECT_EQ(spec->entrypoint().command().working_dir(), "/shared/proj");
  EXPECT_THAT(spec->entrypoint().command().argv(),
              ElementsAre("python", "train.py", "--epochs", "3"));
  EXPECT_THAT(
      spec->entrypoint().command().env(),
      UnorderedElementsAre(Pair("NCCL_DEBUG", "INFO"), Pair("EMPTY", ""), Pair("EQ", "a=b")));
}

TEST(JobArgsTest, ResourcesParseLikeBundlesWithQuantities) {
  JobSubmitArgs args = FourGpuWorkers();
  args.resources_per_worker = {"GPU=1, CPU=2"};
  args.trainer_resources = "CPU=0,memory=200Gi";
  args.accelerator_type = "A10G";
  args.strategy = "strict_spread";
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ScalingConfig& scaling = spec->scaling_config();
  EXPECT_THAT(scaling.resources_per_worker().amounts(),
              UnorderedElementsAre(Pair("GPU", 1), Pair("CPU", 2)));
  // CPU=0 is kept: the head drops it, so the trainer asks for no CPU.
  EXPECT_THAT(scaling.trainer_resources().amounts(),
              UnorderedElementsAre(Pair("CPU", 0), Pair("memory", 200 * kGi)));
  EXPECT_EQ(scaling.accelerator_type(), "A10G");
  EXPECT_EQ(scaling.placement_strategy(), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
}

TEST(JobArgsTest, MinWorkersMakesTheJobElastic) {
  JobSubmitArgs args = FourGpuWorkers();
  args.min_workers = 2;
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scaling_config().min_workers(), 2u);
  args.min_workers = 5;
  EXPECT_THAT(BuildTrainJobSpec(args).status().message(),
              HasSubstr("--min-workers: 5 is not in 1..--num-workers (4)"));
}

TEST(JobArgsTest, TopologyFlags) {
  JobSubmitArgs args = FourGpuWorkers();
  args.topology_required = "berth.io/topology-rack";
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scaling_config().topology().required(), "berth.io/topology-rack");
  args = FourGpuWorkers();
  args.topology_preferred = {"berth.io/nvlink-domain", "berth.io/topology-rack"};
  spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->scaling_config().topology().preferred(),
              ElementsAre("berth.io/nvlink-domain", "berth.io/topology-rack"));
}

TEST(JobArgsTest, PerRankResourcesAndSelectors) {
  JobSubmitArgs args = FourGpuWorkers();
  args.resources_per_worker = {"GPU=2", "GPU=1", "GPU=1", "GPU=1"};
  args.rank_resources = {"0:memory=200Gi", "3:CPU=8"};
  args.label_selector = {"zone in (a,b), !spot"};
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ScalingConfig& scaling = spec->scaling_config();
  EXPECT_FALSE(scaling.has_resources_per_worker());
  ASSERT_EQ(scaling.resources_per_worker_list_size(), 4);
  EXPECT_THAT(scaling.resources_per_worker_list(0).amounts(), UnorderedElementsAre(Pair("GPU", 2)));
  EXPECT_THAT(scaling.rank_resources().at(0).amounts(),
              UnorderedElementsAre(Pair("memory", 200 * kGi)));
  EXPECT_THAT(scaling.rank_resources().at(3).amounts(), UnorderedElementsAre(Pair("CPU", 8)));
  ASSERT_EQ(scaling.label_selector_size(), 1);
  EXPECT_EQ(scaling.label_selector(0).requirements_size(), 2);

  struct Case {
    std::vector<std::string> rank_resources, selectors;
    const char* message;
  };
  const Case cases[] = {
      {{"memory=200Gi"}, {}, "--rank-resources[0]: 'memory=200Gi' is not RANK:NAME=QUANTITY"},
      {{"x:CPU=1"}, {}, "--rank-resources[0]: 'x:CPU=1' is not RANK:NAME=QUANTITY"},
      {{"1:CPU=1", "1:CPU=2"}, {}, "--rank-resources[1]: rank 1 given twice"},
      {{"1:CPU=lots"}, {}, "--rank-resources[0][\"CPU\"]: 'lots' is not a quantity"},
      {{}, {"zone in ()"}, "--label-selector: "},
      {{}, {"a", "b in ("}, "--label-selector[1]: "},
  };
  for (const Case& c : cases) {
    JobSubmitArgs bad = FourGpuWorkers();
    bad.rank_resources = c.rank_resources;
    bad.label_selector = c.selectors;
    EXPECT_THAT(Error(bad), StartsWith(c.message)) << c.message;
  }
}

TEST(JobArgsTest, BadResourcesNameTheFlag) {
  struct Case {
    const char* per_worker;
    const char* trainer;
    const char* message;
  };
  const Case cases[] = {
      {"GPU=1", "memory=200Gx", "--trainer-resources[\"memory\"]: '200Gx' is not a quantity"},
      {"GPU=-1", "CPU=1", "--resources-per-worker[\"GPU\"]: '-1' is not a quantity"},
      {"GPU", "CPU=1", "--resources-per-worker: 'GPU' is not NAME=QUANTITY"},
      {"", "CPU=1", "--resources-per-worker: no resources"},
      {"GPU=1", "CPU=1,CPU=2", "--trainer-resources: CPU given twice"},
      {"accelerator_type:A10G=1", "CPU=1",
       "--resources-per-worker[\"accelerator_type:A10G\"]: the accelerator_type: resource is "
       "internal; select the accelerator with --accelerator-type A10G"},
  };
  for (const Case& c : cases) {
    JobSubmitArgs args = FourGpuWorkers();
    args.resources_per_worker = {c.per_worker};
    args.trainer_resources = c.trainer;
    EXPECT_THAT(Error(args), StartsWith(c.message)) << c.per_worker << " / " << c.trainer;
  }
}

TEST(JobArgsTest, BadScalarsNameTheFlag) {
  JobSubmitArgs args = FourGpuWorkers();
  args.strategy = "tight";
  EXPECT_THAT(Error(args), StartsWith("--strategy: unknown strategy 'tight'"));

  args = FourGpuWorkers();
  args.num_workers = 0;
  EXPECT_THAT(Error(args), StartsWith("--num-workers: 0 is not in 1..4096"));
  args.num_workers = 5000;
  EXPECT_THAT(Error(args), StartsWith("--num-workers: 5000 is not in 1..4096"));

  args = FourGpuWorkers();
  args.max_failures = -2;
  EXPECT_THAT(Error(args), StartsWith("--max-failures: -2 is not -1 (unlimited) or a count"));

  args = FourGpuWorkers();
  args.steps = 0;
  EXPECT_THAT(Error(args), StartsWith("--steps: must be at least 1"));

  for (double lr : {0.0, -0.1, std::nan(""), std::numeric_limits<double>::infinity()}) {
    args = FourGpuWorkers();
    args.lr = lr;
    EXPECT_THAT(Error(args), StartsWith("--lr: ")) << lr;
  }

  args = FourGpuWorkers();
  args.batch_size = 0;
  EXPECT_THAT(Error(args), StartsWith("--batch-size: must be at least 1"));

  args = FourGpuWorkers();
  args.time_limit = "0s";
  EXPECT_THAT(Error(args), StartsWith("--time-limit: '0s' is not a duration of whole seconds"));
  args = FourGpuWorkers();
  args.stop_grace_period = "soon";
  EXPECT_THAT(Error(args), StartsWith("--stop-grace-period: 'soon' is not a duration"));
  args = FourGpuWorkers();
  args.progress_timeout = "0s";
  EXPECT_THAT(Error(args), StartsWith("--progress-timeout: '0s' is not a duration"));
}

TEST(JobArgsTest, TheJobsClocksAreRead) {
  JobSubmitArgs args = FourGpuWorkers();
  args.time_limit = "1h30m";
  args.stop_grace_period = "0s";
  args.progress_timeout = "10m";
  absl::StatusOr<v1::TrainJobSpec> spec = BuildTrainJobSpec(args);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->time_limit_s(), 5400);
  ASSERT_TRUE(spec->has_stop_grace_period_s());
  EXPECT_EQ(spec->stop_grace_period_s(), 0);
  EXPECT_EQ(spec->failure_config().progress_timeout_s(), 600);
  EXPECT_FALSE(BuildTrainJobSpec(FourGpuWorkers())->has_stop_grace_period_s());
}

TEST(JobArgsTest, EntrypointFlagsOfTheOtherKindAreErrors) {
  JobSubmitArgs args = FourGpuWorkers();
  args.env = {"A=1"};
  EXPECT_THAT(Error(args), StartsWith("--env: only with a command after `--`"));
  args = FourGpuWorkers();
  args.working_dir = "/shared";
  EXPECT_THAT(Error(args), StartsWith("--working-dir: only with a command after `--`"));

  args = FourGpuWorkers();
  args.command = {"python", "train.py"};
  args.steps = 10;
  EXPECT_THAT(Error(args), StartsWith("--steps: only for the built-in trainer"));
  args.steps.reset();
  args.lr = 0.1;
  EXPECT_THAT(Error(args), StartsWith("--lr: only for the built-in trainer"));
  args.lr.reset();
  args.checkpoint_every = 0;  // given, even as 0
  EXPECT_THAT(Error(args), StartsWith("--checkpoint-every: only for the built-in trainer"));
}

TEST(JobArgsTest, BadCommandOrEnvNamesTheFlagAndIndex) {
  JobSubmitArgs args = FourGpuWorkers();
  args.command = {""};
  EXPECT_THAT(Error(args), StartsWith("COMMAND: the program after `--` is empty"));

  args.command = {"python"};
  args.env = {"A=1", "B"};
  EXPECT_THAT(Error(args), StartsWith("--env[1]: 'B' is not KEY=VALUE"));
  args.env = {"=1"};
  EXPECT_THAT(Error(args), StartsWith("--env[0]: '=1' is not KEY=VALUE"));
  args.env = {"A=1", "B=2", "A=3"};
  EXPECT_THAT(Error(args), StartsWith("--env[2]: A given twice"));
}

TEST(JobArgsTest, TrainJobStateIsCaseInsensitive) {
  EXPECT_EQ(*ParseTrainJobStateArg("running"), v1::TRAIN_JOB_STATE_RUNNING);
  EXPECT_EQ(*ParseTrainJobStateArg(" Succeeded "), v1::TRAIN_JOB_STATE_SUCCEEDED);
  EXPECT_THAT(std::string(ParseTrainJobStateArg("unspecified").status().message()),
              StartsWith("--state: unknown state 'unspecified'"));
  EXPECT_THAT(std::string(ParseTrainJobStateArg("done").status().message()),
              HasSubstr("(want PENDING, STARTING, RUNNING, RESTARTING, SUCCEEDED, FAILED or "
                        "STOPPED)"));
}

}  // namespace
}  // namespace berth
