#include "client/job_args.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/bundle_args.h"
#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

absl::Status NotWithCommand(absl::string_view flag) {
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": only for the built-in trainer; a command after `--` takes its own arguments"));
}

absl::Status ParseBuiltinTrainer(const JobSubmitArgs& args, v1::Entrypoint::BuiltinTrainer* out) {
  if (!args.env.empty()) {
    return absl::InvalidArgumentError(
        "--env: only with a command after `--`; the built-in trainer takes none");
  }
  out->set_steps(args.steps.value_or(kDefaultTrainSteps));
  if (out->steps() == 0) return absl::InvalidArgumentError("--steps: must be at least 1");
  if (args.lr) {
    if (!std::isfinite(*args.lr) || *args.lr <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lr: ", *args.lr, " is not a finite number > 0"));
    }
    out->set_learning_rate(*args.lr);
  }
  if (args.batch_size) {
    if (*args.batch_size == 0)
      return absl::InvalidArgumentError("--batch-size: must be at least 1");
    out->set_batch_size(*args.batch_size);
  }
  out->set_checkpoint_every_steps(args.checkpoint_every.value_or(0));
  return absl::OkStatus();
}

absl::Status ParseCommand(const JobSubmitArgs& args, v1::Entrypoint::Command* out) {
  if (args.steps) return NotWithCommand("--steps");
  if (args.lr) return NotWithCommand("--lr");
  if (args.batch_size) return NotWithCommand("--batch-size");
  if (args.checkpoint_every) return NotWithCommand("--checkpoint-every");
  if (args.command[0].empty()) {
    return absl::InvalidArgumentError("COMMAND: the program after `--` is empty");
  }
  for (const std::string& arg : args.command) out->add_argv(arg);
  out->set_working_dir(args.working_dir);
  for (size_t i = 0; i < args.env.size(); ++i) {
    const std::string field = absl::StrCat("--env[", i, "]");
    const size_t eq = args.env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", args.env[i], "' is not KEY=VALUE"));
    }
    const std::string key = args.env[i].substr(0, eq);
    if (!out->mutable_env()->try_emplace(key, args.env[i].substr(eq + 1)).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", key, " given twice"));
    }
  }
  return absl::OkStatus();
}

// What the job is called, where it queues, how long it may run (and stop,
// and go without progress) and where its checkpoints go.
absl::Status ParseJobFields(const JobSubmitArgs& args, v1::TrainJobSpec* spec) {
  spec->set_name(args.name);
  spec->set_queue(args.queue);
  spec->set_priority(args.priority);
  spec->set_priority_class(args.priority_class);
  if (!args.time_limit.empty()) {
    absl::StatusOr<int64_t> limit = ParseDurationSeconds(args.time_limit, "--time-limit", 1);
    if (!limit.ok()) return limit.status();
    spec->set_time_limit_s(*limit);
  }
  if (!args.stop_grace_period.empty()) {
    absl::StatusOr<int64_t> grace =
        ParseDurationSeconds(args.stop_grace_period, "--stop-grace-period", 0);
    if (!grace.ok()) return grace.status();
    spec->set_stop_grace_period_s(*grace);
  }
  if (!args.progress_timeout.empty()) {
    absl::StatusOr<int64_t> timeout =
        ParseDurationSeconds(args.progress_timeout, "--progress-timeout", 1);
    if (!timeout.ok()) return timeout.status();
    spec->mutable_failure_config()->set_progress_timeout_s(*timeout);
  }
  spec->set_storage_path(args.storage_path);
  return absl::OkStatus();
}

// --num-workers and, elastic, --min-workers.
absl::Status ParseWorkerCounts(const JobSubmitArgs& args, v1::ScalingConfig* scaling) {
  // One bundle per worker, so the placement group's limit is the job's.
  if (args.num_workers < 1 ||
      static_cast<uint64_t>(args.num_workers) > PlacementGroupSpec::kMaxBundles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num-workers: ", args.num_workers, " is not in 1..", PlacementGroupSpec::kMaxBundles));
  }
  scaling->set_num_workers(static_cast<uint32_t>(args.num_workers));
  if (args.min_workers < 0 || args.min_workers > args.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--min-workers: ", args.min_workers,
                                                   " is not in 1..--num-workers (",
                                                   args.num_workers, ")"));
  }
  scaling->set_min_workers(static_cast<uint32_t>(args.min_workers));
  return absl::OkStatus();
}

// --resources-per-worker once (every worker's) or once per worker.
absl::Status ParseResourcesPerWorker(const JobSubmitArgs& args, v1::ScalingConfig* scaling) {
  const size_t per_worker = args.resources_per_worker.size();
  for (size_t i = 0; i < per_worker; ++i) {
    absl::StatusOr<v1::ResourceSet> resources =
        ParseResourcesArg(args.resources_per_worker[i],
                          per_worker == 1 ? "--resources-per-worker"
                                          : absl::StrCat("--resources-per-worker[", i, "]"));
    if (!resources.ok()) return resources.status();
    *(per_worker == 1 ? scaling->mutable_resources_per_worker()
                      : scaling->add_resources_per_worker_list()) = *std::move(resources);
  }
  return absl::OkStatus();
}

// --rank-resources RANK:NAME=QUANTITY,..., at most once per rank.
absl::Status ParseRankResources(const JobSubmitArgs& args, v1::ScalingConfig* scaling) {
  for (size_t i = 0; i < args.rank_resources.size(); ++i) {
    const std::string field = absl::StrCat("--rank-resources[", i, "]");
    const std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(args.rank_resources[i], absl::MaxSplits(':', 1));
    uint32_t rank = 0;
    if (!absl::SimpleAtoi(parts.first, &rank) ||
        args.rank_resources[i].find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", args.rank_resources[i],
                       "' is not RANK:NAME=QUANTITY,... (e.g. 0:memory=200Gi)"));
    }
    if (scaling->rank_resources().contains(rank)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": rank ", rank, " given twice"));
    }
    absl::StatusOr<v1::ResourceSet> resources = ParseResourcesArg(parts.second, field);
    if (!resources.ok()) return resources.status();
    (*scaling->mutable_rank_resources())[rank] = *std::move(resources);
  }
  return absl::OkStatus();
}

// --label-selector once (every worker's) or once per worker.
absl::Status ParseLabelSelectors(const JobSubmitArgs& args, v1::ScalingConfig* scaling) {
  for (size_t i = 0; i < args.label_selector.size(); ++i) {
    absl::StatusOr<LabelSelector> selector = LabelSelector::Parse(
        args.label_selector[i], args.label_selector.size() == 1
                                    ? "--label-selector"
                                    : absl::StrCat("--label-selector[", i, "]"));
    if (!selector.ok()) return selector.status();
    LabelSelectorToProto(*selector, scaling->add_label_selector());
  }
  return absl::OkStatus();
}

// How many workers, where they run and what each needs.
absl::Status ParseScaling(const JobSubmitArgs& args, v1::ScalingConfig* scaling) {
  if (absl::Status s = ParseWorkerCounts(args, scaling); !s.ok()) return s;
  scaling->set_use_gpu(args.use_gpu);
  scaling->set_accelerator_type(args.accelerator_type);
  scaling->mutable_topology()->set_required(args.topology_required);
  for (const std::string& key : args.topology_preferred) {
    scaling->mutable_topology()->add_preferred(key);
  }
  if (absl::Status s = ParseResourcesPerWorker(args, scaling); !s.ok()) return s;
  if (absl::Status s = ParseRankResources(args, scaling); !s.ok()) return s;
  if (absl::Status s = ParseLabelSelectors(args, scaling); !s.ok()) return s;
  if (args.trainer_resources) {
    absl::StatusOr<v1::ResourceSet> resources =
        ParseResourcesArg(*args.trainer_resources, "--trainer-resources");
    if (!resources.ok()) return resources.status();
    *scaling->mutable_trainer_resources() = *std::move(resources);
  }
  absl::StatusOr<v1::PlacementStrategy> strategy = ParseStrategyArg(args.strategy);
  if (!strategy.ok()) return strategy.status();
  scaling->set_placement_strategy(*strategy);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseDurationSeconds(absl::string_view text, absl::string_view field,
                                             int64_t min_seconds) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d == absl::InfiniteDuration() ||
      d < absl::Seconds(min_seconds) || d % absl::Seconds(1) != absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", text, "' is not a duration of whole seconds of at least ",
                     min_seconds, "s, like 30s, 90m or 1h30m"));
  }
  return absl::ToInt64Seconds(d);
}

absl::StatusOr<v1::TrainJobSpec> BuildTrainJobSpec(const JobSubmitArgs& args) {
  if (!args.working_dir.empty() && args.command.empty()) {
    return absl::InvalidArgumentError(
        "--working-dir: only with a command after `--`; the built-in trainer takes none");
  }
  v1::TrainJobSpec spec;
  if (absl::Status s = ParseJobFields(args, &spec); !s.ok()) return s;
  if (absl::Status s = ParseScaling(args, spec.mutable_scaling_config()); !s.ok()) return s;
  if (args.max_failures < -1 || args.max_failures > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--max-failures: ", args.max_failures,
                                                   " is not -1 (unlimited) or a count >= 0"));
  }
  spec.mutable_failure_config()->set_max_failures(static_cast<int32_t>(args.max_failures));

  absl::Status entrypoint =
      args.command.empty()
          ? ParseBuiltinTrainer(args, spec.mutable_entrypoint()->mutable_builtin_trainer())
          : ParseCommand(args, spec.mutable_entrypoint()->mutable_command());
  if (!entrypoint.ok()) return entrypoint;
  return spec;
}

absl::StatusOr<v1::TrainJobState> ParseTrainJobStateArg(absl::string_view text) {
  v1::TrainJobState state;
  const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (upper == "UNSPECIFIED" ||
      !v1::TrainJobState_Parse(absl::StrCat("TRAIN_JOB_STATE_", upper), &state)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--state: unknown state '", text,
        "' (want PENDING, STARTING, RUNNING, RESTARTING, SUCCEEDED, FAILED or STOPPED)"));
  }
  return state;
}

}  // namespace berth
