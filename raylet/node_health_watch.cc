#include "raylet/node_health_watch.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/command.h"
#include "common/files.h"
#include "common/log.h"
#include "google/protobuf/text_format.h"

namespace berth {

absl::StatusOr<std::unique_ptr<NodeHealthWatch>> NodeHealthWatch::Start(Options options) {
  v1::GpuHealthState kept;
  if (!options.state_file.empty()) {
    const std::string text = ReadFileOrEmpty(options.state_file);
    if (!google::protobuf::TextFormat::ParseFromString(text, &kept)) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.state_file, ": not a GPU health record; remove it to start afresh"));
    }
  }
  std::unique_ptr<NodeHealthWatch> watch(new NodeHealthWatch(std::move(options), kept));
  NodeHealthWatch* self = watch.get();
  if (!self->options_.health_file.empty() || self->options_.fault_source) {
    self->look_thread_ =
        std::make_unique<PeriodicThread>(self->options_.every, [self] { self->LookOnce(); });
  }
  if (!self->options_.health_check_command.empty()) {
    self->check_thread_ = std::make_unique<PeriodicThread>(
        self->options_.health_check_every, [self] { self->CheckOnce(); }, /*run_at_start=*/true);
  }
  return watch;
}

NodeHealthWatch::NodeHealthWatch(Options options, const v1::GpuHealthState& kept)
    : options_(std::move(options)),
      file_(options_.health_file, kept.health_file_offset()),
      book_(options_.gpu_count) {
  book_.Restore({kept.unhealthy().begin(), kept.unhealthy().end()});
  for (const auto& [gpu, unhealthy] : book_.unhealthy()) {
    LogWarning("GPU ", gpu, " is unhealthy (since an earlier run): ", unhealthy.reason());
  }
}

void NodeHealthWatch::LookOnce() {
  std::vector<GpuFault> faults;
  absl::ReleasableMutexLock lock(&mu_);
  const uint64_t offset = file_.offset();
  for (const std::string& line : file_.NewLines()) {
    absl::StatusOr<GpuFault> fault = ParseHealthLine(line);
    if (!fault.ok()) {
      LogWarning(options_.health_file, ": ", fault.status().message());
      continue;
    }
    faults.push_back(*std::move(fault));
  }
  if (options_.fault_source) {
    for (GpuFault& fault : options_.fault_source()) faults.push_back(std::move(fault));
  }
  bool unhealthy_changed = false;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const GpuFault& fault : faults) {
    if (options_.on_fault) options_.on_fault(fault);
    if (std::optional<std::string> reason = book_.OnFault(fault, now_ms)) {
      LogWarning("GPU ", fault.gpu_index, " is unhealthy: ", *reason);
      unhealthy_changed = true;
    }
  }
  if (unhealthy_changed || file_.offset() != offset) KeepLocked();
  lock.Release();
  if (unhealthy_changed && options_.on_change) options_.on_change();
}

void NodeHealthWatch::CheckOnce() {
  absl::StatusOr<CommandOutcome> outcome =
      RunCommand({"/bin/sh", "-c", options_.health_check_command}, CurrentEnvironment(),
                 options_.health_check_timeout);
  std::string failure;
  if (!outcome.ok()) {
    failure = std::string(outcome.status().message());
  } else if (!outcome->ok()) {
    const std::string said = TextTail(outcome->output, 300);
    failure = said.empty()
                  ? outcome->Ending(options_.health_check_timeout)
                  : absl::StrCat(said, " (", outcome->Ending(options_.health_check_timeout), ")");
  }
  {
    absl::MutexLock lock(&mu_);
    if (failure == health_check_failure_) return;
    if (failure.empty()) {
      LogInfo("the health check passes again");
    } else {
      LogWarning("the health check failed: ", failure);
    }
    health_check_failure_ = std::move(failure);
  }
  if (options_.on_change) options_.on_change();
}

std::vector<v1::UnhealthyGpu> NodeHealthWatch::UnhealthyGpus() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::UnhealthyGpu> gpus;
  for (const auto& [index, gpu] : book_.unhealthy()) gpus.push_back(gpu);
  return gpus;
}

std::string NodeHealthWatch::HealthCheckFailure() const {
  absl::MutexLock lock(&mu_);
  return health_check_failure_;
}

absl::StatusOr<std::string> NodeHealthWatch::ReturnGpu(uint32_t gpu_index) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> reason = book_.Return(gpu_index);
  if (reason.ok()) {
    LogInfo("GPU ", gpu_index, " returned to service (was: ", *reason, ")");
    KeepLocked();
  }
  return reason;
}

void NodeHealthWatch::KeepLocked() {
  if (options_.state_file.empty()) return;
  v1::GpuHealthState kept;
  for (const auto& [index, gpu] : book_.unhealthy()) *kept.add_unhealthy() = gpu;
  kept.set_health_file_offset(file_.offset());
  std::string text;
  google::protobuf::TextFormat::PrintToString(kept, &text);
  std::error_code ignored;  // the write says what went wrong
  std::filesystem::create_directories(std::filesystem::path(options_.state_file).parent_path(),
                                      ignored);
  if (absl::Status s = WriteFileAtomically(options_.state_file, text); !s.ok()) {
    LogWarning("keeping the GPU health book: ", s.message());
  }
}

}  // namespace berth
