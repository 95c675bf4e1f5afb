// GPU discovery: the GPU instances of this node, found through NVML or
// simulated.
//
// NVML is loaded at run time with dlopen("libnvidia-ml.so.1"), so the raylet
// has no link-time dependency on CUDA or NVML and runs on machines without
// them. Where NVML is absent, or when the operator asks for a number of GPUs,
// the node gets that many simulated instances (ids 0..n-1, synthetic UUIDs
// stable for a given seed) of the stated accelerator type, which is how a
// cluster of GPU nodes is emulated on one CPU machine.
#ifndef BERTH_RAYLET_GPU_DISCOVERY_H_
#define BERTH_RAYLET_GPU_DISCOVERY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth {

struct GpuDevice {
  uint32_t index = 0;            // value used in CUDA_VISIBLE_DEVICES
  std::string uuid;              // "GPU-..."; synthetic when simulated
  std::string name;              // NVML's product name; empty when simulated
  std::string accelerator_type;  // "A10G", "H100", ...; empty if unknown
  uint64_t memory_bytes = 0;     // 0 if unknown
  // N of its device node /dev/nvidiaN (NVML's minor number, which need not
  // be the index); the index when simulated.
  uint32_t minor_number = 0;
};

struct GpuDiscoveryOptions {
  // Simulate exactly this many GPUs instead of asking NVML.
  std::optional<uint32_t> num_gpus;
  // Accelerator type of simulated GPUs; for real ones, overrides the type
  // derived from NVML's product name. Empty = derive (real) or none (simulated).
  std::string accelerator_type;
  // Makes simulated UUIDs differ between simulated nodes (e.g. the node id).
  std::string simulation_seed;
};

struct DiscoveredGpus {
  std::vector<GpuDevice> devices;
  // "nvml" or "simulated", and why, for the startup log.
  std::string source;
};

// Never fails: an NVML that is missing or errors yields simulated GPUs (0
// unless options.num_gpus says otherwise), and `source` says why.
DiscoveredGpus DiscoverGpus(const GpuDiscoveryOptions& options);

// `count` simulated GPUs with deterministic UUIDs derived from `seed`.
std::vector<GpuDevice> SimulatedGpus(uint32_t count, absl::string_view accelerator_type,
                                     absl::string_view seed);

// Accelerator type from an NVML product name: "NVIDIA A10G" -> "A10G",
// "Tesla T4" -> "T4", "NVIDIA H100 80GB HBM3" -> "H100",
// "NVIDIA A100-SXM4-80GB" -> "A100"; an unknown model gives the name's last
// word, e.g. "NVIDIA GeForce RTX 4090" -> "4090".
std::string AcceleratorTypeFromName(absl::string_view name);

}  // namespace berth

#endif  // BERTH_RAYLET_GPU_DISCOVERY_H_
