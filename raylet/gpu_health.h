// GpuHealth: what a GPU fault means for the node, and which of its GPUs are
// healthy. Faults come from NVML (XID events, ECC, row remapping, a GPU
// fallen off the bus, NVLink, the driver's recovery action) or from outside
// (`--gpu-health-file`: an external checker such as DCGM or NHC, or a test,
// appends `<gpu index> <kind> <detail>` lines). Pure: no NVML, files or
// clocks here (gpu_health_watch.h feeds it).
//
// The XID policy follows the Kubernetes NVIDIA device plugin: every XID
// makes the GPU unhealthy except those an application causes (13 graphics
// engine exception, 31 GPU memory page fault, 43 GPU stopped processing,
// 45 preemptive cleanup, 68 video processor exception, 109 context switch
// timeout): they end that process, not the GPU. A GPU stays unhealthy until
// an operator returns it (Return); never silently.
#ifndef BERTH_RAYLET_GPU_HEALTH_H_
#define BERTH_RAYLET_GPU_HEALTH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/v1/common.pb.h"

namespace berth {

enum class GpuFaultKind {
  kXid,              // code: the XID
  kDoubleBitEcc,     // an uncorrectable (volatile double-bit) ECC error
  kRowRemapFailed,   // HBM row remapping failed: the memory is bad
  kRowRemapPending,  // a remap waits for a GPU reset
  kFellOffBus,       // NVML: GPU is lost
  kNvlink,           // an NVLink error (code: the link)
  kRecovery,         // the driver asks for a reset or a reboot (detail says which)
  kExternal,         // an external checker's verdict
  kHealthy,  // an external checker says the GPU is fine again (ignored: an operator returns it)
};

struct GpuFault {
  uint32_t gpu_index = 0;
  GpuFaultKind kind = GpuFaultKind::kExternal;
  int64_t code = 0;  // the XID, or the NVLink
  std::string detail;
};

// The kind as a health file names it: "xid", "ecc", "remap-failed", ...
absl::string_view GpuFaultKindName(GpuFaultKind kind);
// Every kind's name, as above.
std::vector<absl::string_view> GpuFaultKindNames();

// Whether `xid` makes the GPU unusable (see above).
bool XidIsCritical(int64_t xid);

// The fault as an operator reads it: "XID 79 (GPU has fallen off the bus)",
// "double-bit ECC error: <detail>".
std::string FaultText(const GpuFault& fault);

// One line of a health file: `<gpu index> <kind> [<code>] [<detail>]`,
// kinds xid (with its code), ecc, remap-failed, remap-pending, off-bus,
// nvlink (with the link), recovery, external, healthy; e.g.
// `2 xid 79 GPU has fallen off the bus`. INVALID_ARGUMENT naming what is
// wrong with the line.
absl::StatusOr<GpuFault> ParseHealthLine(absl::string_view line);

// The node's GPUs' health: which are unhealthy, why and since when.
class GpuHealthBook {
 public:
  explicit GpuHealthBook(uint32_t gpu_count) : gpu_count_(gpu_count) {}

  // What `fault`, seen at `now_ms` (unix), did: nothing (ignored, an
  // unknown GPU, or the GPU was unhealthy already), or made the GPU
  // unhealthy, with the reason.
  std::optional<std::string> OnFault(const GpuFault& fault, int64_t now_ms);
  // An operator returned the GPU to service: why it had been unhealthy.
  // NOT_FOUND for a GPU the node lacks, FAILED_PRECONDITION if healthy.
  absl::StatusOr<std::string> Return(uint32_t gpu_index);
  // What an earlier run of the raylet booked (GPUs the node lacks now are
  // dropped).
  void Restore(const std::vector<v1::UnhealthyGpu>& unhealthy);
  // The unhealthy GPUs, by index.
  const std::map<uint32_t, v1::UnhealthyGpu>& unhealthy() const { return unhealthy_; }

 private:
  uint32_t gpu_count_;
  std::map<uint32_t, v1::UnhealthyGpu> unhealthy_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_GPU_HEALTH_H_
