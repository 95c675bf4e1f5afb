// NvmlHealth: NVML as a fault source of the raylet's health watch
// (node_health_watch.h). It registers every GPU for the critical XID and
// double-bit ECC events the driver posts, and at each look also reads what
// NVML keeps: volatile uncorrected ECC errors, failed or pending row
// remapping, a GPU fallen off the bus, and the recovery action the driver
// asks for (a reset, a reboot). Such a state is reported once, when first
// seen. NVLink errors come as XID 74. What the faults mean is the book's
// (gpu_health.h: the XID policy).
#ifndef BERTH_RAYLET_NVML_HEALTH_H_
#define BERTH_RAYLET_NVML_HEALTH_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "raylet/gpu_health.h"
#include "raylet/nvml_library.h"

namespace berth {

class NvmlHealth {
 public:
  // Null with `why` when there is no NVML (simulated GPUs).
  static std::unique_ptr<NvmlHealth> Open(std::string* why);
  ~NvmlHealth();
  NvmlHealth(const NvmlHealth&) = delete;
  NvmlHealth& operator=(const NvmlHealth&) = delete;

  // The events posted since the last look, then the states; never blocks.
  std::vector<GpuFault> Poll();
  // What it watches, for the raylet's log: "XID and ECC events of 8 GPU(s);
  // ECC, row remapping, lost GPUs, recovery actions".
  std::string Describe() const;

 private:
  explicit NvmlHealth(std::unique_ptr<NvmlLibrary> nvml) : nvml_(std::move(nvml)) {}
  void TakeEvents(std::vector<GpuFault>* faults);
  void ReadStates(uint32_t index, nvml::Device device, std::vector<GpuFault>* faults);
  // Adds the state's fault unless it was reported before.
  void Report(uint32_t index, GpuFaultKind kind, std::string detail, std::vector<GpuFault>* faults);
  uint32_t IndexOf(nvml::Device device) const;

  std::unique_ptr<NvmlLibrary> nvml_;
  nvml::EventSet events_ = nullptr;  // null: no events (an old driver)
  std::vector<nvml::Device> devices_;
  std::set<std::pair<uint32_t, GpuFaultKind>> reported_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_NVML_HEALTH_H_
