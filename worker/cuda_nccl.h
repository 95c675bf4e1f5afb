// The CUDA runtime and NCCL, loaded at run time with dlopen, so berth-worker
// starts (and falls back to Gloo) on machines without them. Declares only
// the few entry points the worker's gradient all-reduce needs. No torch.
//
// One CudaNccl holds at most one communicator (this rank's membership in the
// job's NCCL group) and destroys it with itself; the libraries stay loaded,
// as unloading CUDA while the process runs is unsafe.
#ifndef BERTH_WORKER_CUDA_NCCL_H_
#define BERTH_WORKER_CUDA_NCCL_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace berth {

// NCCL's ncclUniqueId: opaque bytes rank 0 creates and every rank joins with.
struct NcclUniqueId {
  char internal[128];
};

class CudaNccl {
 public:
  // UNAVAILABLE naming the library or symbol that is missing.
  static absl::StatusOr<std::unique_ptr<CudaNccl>> Load();
  ~CudaNccl();
  CudaNccl(const CudaNccl&) = delete;
  CudaNccl& operator=(const CudaNccl&) = delete;

  // NCCL's version, e.g. "2.28.9".
  const std::string& version() const { return version_; }

  // cudaGetDeviceCount; an error (e.g. no driver) is UNAVAILABLE.
  absl::StatusOr<int> VisibleDeviceCount() const;
  // Rank 0 calls this and hands the id to the others.
  absl::StatusOr<NcclUniqueId> NewUniqueId() const;
  // cudaSetDevice(device), then ncclCommInitRank. Blocks until all
  // `world_size` ranks have joined.
  absl::Status Join(int device, const NcclUniqueId& id, int world_size, int rank);
  // Sums `count` floats at device address `data` in place over the
  // communicator, on the default stream, and waits for the result.
  absl::Status AllReduceSumFloats(void* data, size_t count);

 private:
  struct Api;
  explicit CudaNccl(std::unique_ptr<Api> api, std::string version);
  std::unique_ptr<Api> api_;
  std::string version_;
  void* communicator_ = nullptr;
};

}  // namespace berth

#endif  // BERTH_WORKER_CUDA_NCCL_H_
