#include "raylet/nvml_library.h"

#include <dlfcn.h>

#include <type_traits>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

template <typename Fn>
bool Load(void* library, Fn* fn, const char* symbol) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

}  // namespace

std::unique_ptr<NvmlLibrary> NvmlLibrary::Open(std::string* why) {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    *why = "libnvidia-ml.so.1 not found";
    return nullptr;
  }
  std::unique_ptr<NvmlLibrary> nvml(new NvmlLibrary());
  nvml->library_ = library;
  nvml::Return (*init)() = nullptr;
  if (!Load(library, &init, "nvmlInit_v2") || !Load(library, &nvml->shutdown_, "nvmlShutdown") ||
      !Load(library, &nvml->get_count, "nvmlDeviceGetCount_v2") ||
      !Load(library, &nvml->get_handle, "nvmlDeviceGetHandleByIndex_v2") ||
      !Load(library, &nvml->get_name, "nvmlDeviceGetName") ||
      !Load(library, &nvml->get_uuid, "nvmlDeviceGetUUID") ||
      !Load(library, &nvml->get_memory, "nvmlDeviceGetMemoryInfo") ||
      !Load(library, &nvml->get_minor_number, "nvmlDeviceGetMinorNumber")) {
    *why = "libnvidia-ml.so.1 lacks an NVML v2 symbol";
    nvml->shutdown_ = nullptr;  // never initialized
    return nullptr;
  }
  if (nvml::Return r = init(); r != nvml::kSuccess) {
    *why = absl::StrCat("nvmlInit_v2 returned ", r);
    nvml->shutdown_ = nullptr;
    return nullptr;
  }
  Load(library, &nvml->get_index, "nvmlDeviceGetIndex");
  Load(library, &nvml->event_set_create, "nvmlEventSetCreate");
  Load(library, &nvml->event_set_free, "nvmlEventSetFree");
  Load(library, &nvml->register_events, "nvmlDeviceRegisterEvents");
  Load(library, &nvml->event_set_wait, "nvmlEventSetWait_v2");
  Load(library, &nvml->get_total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
  Load(library, &nvml->get_remapped_rows, "nvmlDeviceGetRemappedRows");
  Load(library, &nvml->get_field_values, "nvmlDeviceGetFieldValues");
  return nvml;
}

NvmlLibrary::~NvmlLibrary() {
  if (shutdown_ != nullptr) shutdown_();
  if (library_ != nullptr) dlclose(library_);
}

}  // namespace berth
