#include "raylet/nvml_health.h"

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// NVML's nvmlDeviceGpuRecoveryAction_t.
std::string RecoveryActionName(unsigned int action) {
  switch (action) {
    case 1:
      return "a GPU reset";
    case 2:
      return "a node reboot";
    case 3:
      return "draining peer-to-peer traffic";
    case 4:
      return "draining, then a GPU reset";
  }
  return absl::StrCat("recovery action ", action);
}

}  // namespace

std::unique_ptr<NvmlHealth> NvmlHealth::Open(std::string* why) {
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::Open(why);
  if (nvml == nullptr) return nullptr;
  std::unique_ptr<NvmlHealth> health(new NvmlHealth(std::move(nvml)));
  NvmlLibrary& lib = *health->nvml_;
  unsigned int count = 0;
  if (nvml::Return r = lib.get_count(&count); r != nvml::kSuccess) {
    *why = absl::StrCat("nvmlDeviceGetCount_v2 returned ", r);
    return nullptr;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    lib.get_handle(i, &device);  // a lost GPU: null, found lost at the first look
    health->devices_.push_back(device);
  }
  if (lib.event_set_create != nullptr && lib.register_events != nullptr &&
      lib.event_set_wait != nullptr && lib.event_set_create(&health->events_) == nvml::kSuccess) {
    for (nvml::Device device : health->devices_) {
      // A GPU that takes no events (e.g. one without ECC) still has its states read.
      if (device != nullptr) {
        lib.register_events(device, nvml::kEventXidCriticalError | nvml::kEventDoubleBitEcc,
                            health->events_);
      }
    }
  }
  return health;
}

NvmlHealth::~NvmlHealth() {
  if (events_ != nullptr && nvml_->event_set_free != nullptr) nvml_->event_set_free(events_);
}

std::string NvmlHealth::Describe() const {
  return absl::StrCat(events_ != nullptr ? "XID and ECC events of " : "no events (old driver) of ",
                      devices_.size(), " GPU(s); ECC, row remapping, lost GPUs, recovery actions");
}

std::vector<GpuFault> NvmlHealth::Poll() {
  std::vector<GpuFault> faults;
  TakeEvents(&faults);
  for (uint32_t i = 0; i < devices_.size(); ++i) ReadStates(i, devices_[i], &faults);
  return faults;
}

void NvmlHealth::TakeEvents(std::vector<GpuFault>* faults) {
  if (events_ == nullptr) return;
  nvml::EventData data = {};
  while (nvml_->event_set_wait(events_, &data, 0) == nvml::kSuccess) {
    GpuFault fault;
    fault.gpu_index = IndexOf(data.device);
    if (data.event_type & nvml::kEventXidCriticalError) {
      fault.kind = GpuFaultKind::kXid;
      fault.code = static_cast<int64_t>(data.event_data);
    } else {
      fault.kind = GpuFaultKind::kDoubleBitEcc;
      fault.detail = "NVML event";
    }
    faults->push_back(std::move(fault));
  }
}

void NvmlHealth::ReadStates(uint32_t index, nvml::Device device, std::vector<GpuFault>* faults) {
  unsigned int seen_index = 0;
  if (device == nullptr || (nvml_->get_index != nullptr &&
                            nvml_->get_index(device, &seen_index) == nvml::kErrorGpuIsLost)) {
    Report(index, GpuFaultKind::kFellOffBus, "NVML: GPU is lost", faults);
    return;
  }
  unsigned long long uncorrected = 0;
  if (nvml_->get_total_ecc_errors != nullptr &&
      nvml_->get_total_ecc_errors(device, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc,
                                  &uncorrected) == nvml::kSuccess &&
      uncorrected > 0) {
    Report(index, GpuFaultKind::kDoubleBitEcc,
           absl::StrCat(uncorrected, " uncorrected since the driver loaded"), faults);
  }
  unsigned int corrected_rows = 0, uncorrected_rows = 0, pending = 0, failed = 0;
  if (nvml_->get_remapped_rows != nullptr &&
      nvml_->get_remapped_rows(device, &corrected_rows, &uncorrected_rows, &pending, &failed) ==
          nvml::kSuccess) {
    if (failed != 0) Report(index, GpuFaultKind::kRowRemapFailed, "", faults);
    if (pending != 0) Report(index, GpuFaultKind::kRowRemapPending, "", faults);
  }
  nvml::FieldValue action = {};
  action.field_id = nvml::kFieldRecoveryAction;
  if (nvml_->get_field_values != nullptr &&
      nvml_->get_field_values(device, 1, &action) == nvml::kSuccess &&
      action.nvml_return == nvml::kSuccess && action.value.ui != 0) {
    Report(index, GpuFaultKind::kRecovery, RecoveryActionName(action.value.ui), faults);
  }
}

void NvmlHealth::Report(uint32_t index, GpuFaultKind kind, std::string detail,
                        std::vector<GpuFault>* faults) {
  if (!reported_.insert({index, kind}).second) return;
  GpuFault fault;
  fault.gpu_index = index;
  fault.kind = kind;
  fault.detail = std::move(detail);
  faults->push_back(std::move(fault));
}

uint32_t NvmlHealth::IndexOf(nvml::Device device) const {
  for (uint32_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == device) return i;
  }
  unsigned int index = 0;
  if (nvml_->get_index != nullptr && nvml_->get_index(device, &index) == nvml::kSuccess)
    return index;
  return static_cast<uint32_t>(devices_.size());  // unknown: the book ignores it
}

}  // namespace berth
