#include "train/train_job_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "train/scaling_config.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

absl::Status ValidateEntrypoint(const v1::TrainJobSpec& spec) {
  if (!spec.entrypoint().has_command()) {
    const auto& builtin = spec.entrypoint().builtin_trainer();
    if (!builtin.model().empty() && builtin.model() != "mlp") {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.entrypoint.builtin_trainer.model: unknown model '", builtin.model(),
                       "' (berth-worker has: mlp)"));
    }
    if (!std::isfinite(builtin.learning_rate()) || builtin.learning_rate() < 0) {
      return absl::InvalidArgumentError(
          "spec.entrypoint.builtin_trainer.learning_rate: must be finite and >= 0");
    }
    return absl::OkStatus();
  }
  const auto& command = spec.entrypoint().command();
  if (command.argv_size() == 0 || command.argv(0).empty()) {
    return absl::InvalidArgumentError("spec.entrypoint.command.argv: give the program to run");
  }
  for (const std::string& name : ReservedEnvNames()) {
    if (command.env().contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("spec.entrypoint.command.env[\"", name,
                                                     "\"]: set by berth for every worker"));
    }
  }
  if (!command.working_dir().empty() && !command.working_dir_package().empty()) {
    return absl::InvalidArgumentError(
        "spec.entrypoint.command.working_dir_package: give either a working_dir on the nodes or "
        "a package to unpack there, not both");
  }
  if (!v1::Entrypoint::Launcher_IsValid(command.launcher())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.entrypoint.command.launcher: unknown value ", static_cast<int>(command.launcher())));
  }
  return ValidateLauncherArgv(LauncherOf(command), {command.argv().begin(), command.argv().end()},
                              "spec.entrypoint.command.argv");
}

// The job's clocks: its time limit, progress timeout and grace period.
absl::Status ValidateTimes(const v1::TrainJobSpec& spec, absl::Duration max_stop_grace) {
  if (spec.time_limit_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.time_limit_s: ", spec.time_limit_s(), " is negative; 0 means no limit"));
  }
  if (spec.failure_config().progress_timeout_s() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.failure_config.progress_timeout_s: ", spec.failure_config().progress_timeout_s(),
        " is negative; 0 means off"));
  }
  if (spec.has_stop_grace_period_s() &&
      (spec.stop_grace_period_s() < 0 ||
       absl::Seconds(spec.stop_grace_period_s()) > max_stop_grace)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.stop_grace_period_s: ", spec.stop_grace_period_s(), " is not within 0 and ",
        absl::ToInt64Seconds(max_stop_grace), " (the head's --max-stop-grace-period-s)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsPerNode(const v1::TrainJobSpec& spec) {
  const v1::Entrypoint::Command& c = spec.entrypoint().command();
  return spec.entrypoint().has_command() &&
         (c.per_node() || c.launcher() != v1::Entrypoint::LAUNCHER_UNSPECIFIED);
}

bool HasStoreHost(const v1::TrainJobSpec& spec) {
  return spec.entrypoint().has_command() && !IsPerNode(spec) &&
         IsPythonInterpreter(spec.entrypoint().command().argv(0));
}

Launcher LauncherOf(const v1::Entrypoint::Command& command) {
  switch (command.launcher()) {
    case v1::Entrypoint::LAUNCHER_TORCHRUN:
      return Launcher::kTorchrun;
    case v1::Entrypoint::LAUNCHER_ACCELERATE:
      return Launcher::kAccelerate;
    default:
      return Launcher::kNone;
  }
}

absl::Status ValidateTrainJobRequest(const v1::SubmitTrainJobRequest& request,
                                     size_t max_name_length, absl::Duration max_stop_grace) {
  if (absl::Status s = ValidateString(request.request_id(), "request_id", 128, true); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateString(request.spec().name(), "spec.name", max_name_length, false);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateString(request.spec().storage_path(), "spec.storage_path", 1024, false);
      !s.ok()) {
    return s;
  }
  if (request.spec().failure_config().max_failures() < -1) {
    return absl::InvalidArgumentError(
        "spec.failure_config.max_failures: -1 (unlimited), 0 or more");
  }
  if (absl::Status s = ValidateTimes(request.spec(), max_stop_grace); !s.ok()) return s;
  return ValidateEntrypoint(request.spec());
}

absl::StatusOr<PlacementGroupSpec> PlacementGroupForJob(const v1::TrainJobSpec& spec) {
  const v1::ScalingConfig& s = spec.scaling_config();
  ScalingConfig config;
  config.num_workers = s.num_workers();
  config.use_gpu = s.use_gpu();
  // An empty map on the wire is "unset": Ray's defaults apply.
  if (s.resources_per_worker().amounts_size() > 0) {
    config.resources_per_worker.emplace(s.resources_per_worker().amounts().begin(),
                                        s.resources_per_worker().amounts().end());
  }
  if (s.trainer_resources().amounts_size() > 0) {
    config.trainer_resources.emplace(s.trainer_resources().amounts().begin(),
                                     s.trainer_resources().amounts().end());
  }
  for (int i = 0; i < s.resources_per_worker_list_size(); ++i) {
    if (!config.resources_per_worker_list) config.resources_per_worker_list.emplace();
    const auto& amounts = s.resources_per_worker_list(i).amounts();
    config.resources_per_worker_list->emplace_back(amounts.begin(), amounts.end());
  }
  for (const auto& [rank, resources] : s.rank_resources()) {
    config.rank_resources[rank] = {resources.amounts().begin(), resources.amounts().end()};
  }
  for (int i = 0; i < s.label_selector_size(); ++i) {
    absl::StatusOr<LabelSelector> selector = LabelSelectorFromProto(
        s.label_selector(i), absl::StrCat("spec.scaling_config.label_selector[", i, "]"));
    if (!selector.ok()) return selector.status();
    config.label_selector.push_back(*std::move(selector));
  }
  config.accelerator_type = s.accelerator_type();
  config.topology = TopologyFromProto(s.topology());
  config.min_workers = s.min_workers();
  switch (s.placement_strategy()) {
    case v1::PLACEMENT_STRATEGY_UNSPECIFIED:
    case v1::PLACEMENT_STRATEGY_PACK:
      config.placement_strategy = "PACK";
      break;
    case v1::PLACEMENT_STRATEGY_SPREAD:
      config.placement_strategy = "SPREAD";
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_PACK:
      config.placement_strategy = "STRICT_PACK";
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD:
      config.placement_strategy = "STRICT_SPREAD";
      break;
    default:
      config.placement_strategy = absl::StrCat(static_cast<int>(s.placement_strategy()));
  }
  absl::StatusOr<PlacementGroupSpec> group = BuildTrainPlacementGroup(config);
  if (!group.ok()) {
    return absl::Status(group.status().code(), absl::StrCat("spec.", group.status().message()));
  }
  // A launcher numbers its node's ranks itself (node rank 0's first process
  // is rank 0, the rest follow the node order), so only rank 0's bundle,
  // the launcher's node rank 0 / local rank 0, can be told apart.
  if (IsPerNode(spec) && config.min_workers != 0) {
    return absl::InvalidArgumentError(
        "spec.scaling_config.min_workers: not yet with a command run per node "
        "(spec.entrypoint.command.launcher or per_node); run one process per rank");
  }
  if (IsPerNode(spec) && !WorkerBundlesAlike(*group)) {
    return absl::InvalidArgumentError(
        "spec.scaling_config: ranks 1 and above differ (rank_resources, "
        "resources_per_worker_list or label_selector), but a command run per node "
        "(spec.entrypoint.command.launcher or per_node) numbers the node's ranks itself; only "
        "rank 0 may differ there, or run one process per rank");
  }
  return group;
}

}  // namespace berth
