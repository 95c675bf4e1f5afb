#include "raylet/gpu_discovery.h"

#include <cstdio>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "raylet/nvml_library.h"

namespace berth {
namespace {

// Asks NVML for every device; the error says why not.
std::string QueryNvml(std::vector<GpuDevice>* devices) {
  std::string error;
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::Open(&error);
  if (nvml == nullptr) return error;
  unsigned int count = 0;
  if (nvml::Return r = nvml->get_count(&count); r != nvml::kSuccess) {
    error = absl::StrCat("nvmlDeviceGetCount_v2 returned ", r);
  }
  for (unsigned int i = 0; error.empty() && i < count; ++i) {
    nvml::Device handle = nullptr;
    char name[nvml::kStringBufferSize] = {};
    char uuid[nvml::kStringBufferSize] = {};
    nvml::Memory memory = {};
    if (nvml::Return r = nvml->get_handle(i, &handle); r != nvml::kSuccess) {
      error = absl::StrCat("nvmlDeviceGetHandleByIndex_v2(", i, ") returned ", r);
      break;
    }
    // Name and UUID are required; memory is informative.
    if (nvml->get_name(handle, name, sizeof(name)) != nvml::kSuccess ||
        nvml->get_uuid(handle, uuid, sizeof(uuid)) != nvml::kSuccess) {
      error = absl::StrCat("NVML could not name GPU ", i);
      break;
    }
    const bool has_memory = nvml->get_memory(handle, &memory) == nvml::kSuccess;
    unsigned int minor = i;
    if (nvml->get_minor_number(handle, &minor) != nvml::kSuccess) {
      error = absl::StrCat("NVML could not give GPU ", i, "'s minor number");
      break;
    }
    devices->push_back({i, uuid, name, AcceleratorTypeFromName(name),
                        has_memory ? static_cast<uint64_t>(memory.total) : 0, minor});
  }
  if (!error.empty()) devices->clear();
  return error;
}

// FNV-1a, for synthetic UUIDs that are stable for a seed.
uint64_t Fnv1a(absl::string_view text, uint64_t hash = 14695981039346656037ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

std::vector<GpuDevice> SimulatedGpus(uint32_t count, absl::string_view accelerator_type,
                                     absl::string_view seed) {
  std::vector<GpuDevice> devices;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string key = absl::StrCat(seed, "/", i);
    const uint64_t high = Fnv1a(key);
    const uint64_t low = Fnv1a(key, high);
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "GPU-%08x-%04x-%04x-%04x-%012llx",
                  static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                  static_cast<unsigned>(high & 0xffff), static_cast<unsigned>(low >> 48),
                  static_cast<unsigned long long>(low & 0xffffffffffffull));
    devices.push_back({i, uuid, "", std::string(accelerator_type), 0, i});
  }
  return devices;
}

std::string AcceleratorTypeFromName(absl::string_view name) {
  // Models whose name carries extra words (form factor, memory, "Tesla").
  static constexpr absl::string_view kKnownModels[] = {
      "A10G", "A10",  "A100", "A30", "A40", "A800", "B100", "B200", "GB200", "H100", "H20",
      "H200", "H800", "K80",  "L4",  "L40", "L40S", "M60",  "P100", "P4",    "T4",   "V100"};
  for (absl::string_view word : absl::StrSplit(name, absl::ByAnyChar(" -_"), absl::SkipEmpty())) {
    for (absl::string_view model : kKnownModels) {
      if (word == model) return std::string(model);
    }
  }
  std::vector<absl::string_view> words = absl::StrSplit(name, ' ', absl::SkipEmpty());
  if (words.empty()) return "";
  // Keep it a valid label value.
  std::string type;
  for (char c : words.back()) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.') type.push_back(c);
  }
  return type;
}

DiscoveredGpus DiscoverGpus(const GpuDiscoveryOptions& options) {
  if (options.num_gpus.has_value()) {
    return {SimulatedGpus(*options.num_gpus, options.accelerator_type, options.simulation_seed),
            absl::StrCat("simulated (--num-gpus ", *options.num_gpus, ")")};
  }
  std::vector<GpuDevice> devices;
  if (std::string error = QueryNvml(&devices); !error.empty()) {
    return {{}, absl::StrCat("simulated: none (", error, ")")};
  }
  if (!options.accelerator_type.empty()) {
    for (GpuDevice& d : devices) d.accelerator_type = options.accelerator_type;
  }
  return {std::move(devices), "nvml"};
}

}  // namespace berth
