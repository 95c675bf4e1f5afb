// berth-worker: the built-in libtorch worker. Two modes:
//   berth-worker train    one rank of a data-parallel job (torchrun env)
//   berth-worker trainer  the built-in job's driver: store host, checkpoints, reports
// Bad flags or environment: an error naming the flag or variable, exit 2.
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/help_json.h"
#include "common/log_flag.h"
#include "common/version.h"
#include "worker/flags.h"
#include "worker/torchrun_env.h"
#include "worker/train.h"
#include "worker/trainer.h"

namespace berth {
namespace {

int UsageError(const std::string& message) {
  LogError(message);
  return kUsageExitCode;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  // The start of a rank's start-up stage "rendezvous" (store_protocol.h).
  const absl::Time main_start = absl::Now();
  // Whole lines even when stdout is a file or a pipe (the raylet's log).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  berth::TrainFlags train;
  berth::TrainerFlags trainer;
  CLI::App app{"berth-worker: the built-in libtorch worker of berth"};
  app.require_subcommand(1);

  CLI::App* train_mode =
      app.add_subcommand("train",
                         "one rank of a data-parallel job; reads MASTER_ADDR, MASTER_PORT, RANK, "
                         "WORLD_SIZE (required), LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, "
                         "CUDA_VISIBLE_DEVICES, TORCHELASTIC_USE_AGENT_STORE");
  train_mode->add_option("--steps", train.steps, "training steps")->capture_default_str();
  train_mode->add_option("--lr", train.lr, "SGD learning rate")->capture_default_str();
  train_mode->add_option("--batch-size", train.batch_size, "examples per rank and step")
      ->capture_default_str();
  train_mode
      ->add_option("--checkpoint-every", train.checkpoint_every,
                   "checkpoint every this many steps (0 = only at the end)")
      ->capture_default_str();
  train_mode->add_option("--resume-from", train.resume_from,
                         "checkpoint file to resume from when run without a trainer (read by "
                         "rank 0)");

  CLI::App* trainer_mode = app.add_subcommand(
      "trainer",
      "the built-in job's driver: hosts the ranks' store, saves checkpoints, reports to the "
      "head (a user command's driver is berth-relay)");
  trainer_mode
      ->add_option("--port", trainer.port, "port of the built-in ranks' store (all interfaces)")
      ->required();
  trainer_mode->add_option("--world-size", trainer.world_size, "number of ranks")->required();
  trainer_mode
      ->add_option("--checkpoint-dir", trainer.checkpoint_dir,
                   "where checkpoints go, as step-<n>.pt")
      ->required();
  trainer_mode->add_option("--resume-from", trainer.resume_from, "checkpoint file to resume from");
  trainer_mode->add_option("--head", trainer.head, "head to report progress to, HOST:PORT");
  trainer_mode->add_option("--job-id", trainer.job_id, "job id to report progress as");
  trainer_mode
      ->add_option("--timeout-s", trainer.timeout_s,
                   "give up (exit 1) if the ranks are not done by then")
      ->capture_default_str();

  const berth::LogFlag log_flag(app);
  berth::AddVersionFlag(app, "berth-worker");
  berth::AddHelpJsonFlag(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : berth::kUsageExitCode;
  }

  log_flag.Init(train_mode->parsed() ? "berth-worker train" : "berth-worker trainer");
  if (train_mode->parsed()) {
    if (absl::Status s = berth::ValidateTrainFlags(train); !s.ok()) {
      return berth::UsageError(std::string(s.message()));
    }
    absl::StatusOr<berth::TorchrunEnv> env = berth::ParseTorchrunEnv(berth::ProcessEnv());
    if (!env.ok()) return berth::UsageError(std::string(env.status().message()));
    return berth::RunTrain(train, *env, main_start);
  }
  if (absl::Status s = berth::ValidateTrainerFlags(trainer); !s.ok()) {
    return berth::UsageError(std::string(s.message()));
  }
  return berth::RunTrainer(trainer);
}
