// NvmlLibrary: NVML (libnvidia-ml.so.1) opened at run time, with the few
// declarations berth uses: nvml.h is not installed here, and linking NVML
// would tie the binary to the driver. Open() initializes NVML and the
// destructor shuts it down; the functions GPU discovery needs are always
// there, those of the health watch may be null on an old driver.
#ifndef BERTH_RAYLET_NVML_LIBRARY_H_
#define BERTH_RAYLET_NVML_LIBRARY_H_

#include <memory>
#include <string>

namespace berth {
namespace nvml {

using Return = int;
using Device = struct nvmlDevice_st*;
using EventSet = struct nvmlEventSet_st*;
constexpr Return kSuccess = 0;
constexpr Return kErrorTimeout = 10;
constexpr Return kErrorGpuIsLost = 15;
constexpr unsigned int kStringBufferSize = 96;  // NVML_DEVICE_{NAME,UUID}_V2_BUFFER_SIZE
constexpr unsigned long long kEventXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned long long kEventDoubleBitEcc = 0x2;      // nvmlEventTypeDoubleBitEccError
constexpr int kMemoryErrorUncorrected = 1;                  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                             // NVML_VOLATILE_ECC
constexpr unsigned int kFieldRecoveryAction = 230;          // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID, for an XID event
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
struct FieldValue {
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;
  Return nvml_return;
  union {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
    unsigned short us;
  } value;
};

}  // namespace nvml

class NvmlLibrary {
 public:
  // NVML, initialized; null with `why` when there is none (no driver) or
  // it does not start.
  static std::unique_ptr<NvmlLibrary> Open(std::string* why);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Always there.
  nvml::Return (*get_count)(unsigned int*) = nullptr;
  nvml::Return (*get_handle)(unsigned int, nvml::Device*) = nullptr;
  nvml::Return (*get_name)(nvml::Device, char*, unsigned int) = nullptr;
  nvml::Return (*get_uuid)(nvml::Device, char*, unsigned int) = nullptr;
  nvml::Return (*get_memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*get_minor_number)(nvml::Device, unsigned int*) = nullptr;
  // May be null.
  nvml::Return (*get_index)(nvml::Device, unsigned int*) = nullptr;
  nvml::Return (*event_set_create)(nvml::EventSet*) = nullptr;
  nvml::Return (*event_set_free)(nvml::EventSet) = nullptr;
  nvml::Return (*register_events)(nvml::Device, unsigned long long, nvml::EventSet) = nullptr;
  nvml::Return (*event_set_wait)(nvml::EventSet, nvml::EventData*, unsigned int) = nullptr;
  nvml::Return (*get_total_ecc_errors)(nvml::Device, int, int, unsigned long long*) = nullptr;
  nvml::Return (*get_remapped_rows)(nvml::Device, unsigned int*, unsigned int*, unsigned int*,
                                    unsigned int*) = nullptr;
  nvml::Return (*get_field_values)(nvml::Device, int, nvml::FieldValue*) = nullptr;

 private:
  NvmlLibrary() = default;
  void* library_ = nullptr;
  nvml::Return (*shutdown_)() = nullptr;
};

}  // namespace berth

#endif  // BERTH_RAYLET_NVML_LIBRARY_H_
