#include "worker/cuda_nccl.h"

#include <dlfcn.h>

#include <initializer_list>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {
namespace {

// From cuda_runtime_api.h and nccl.h; only what Api below uses.
using CudaError = int;     // cudaError_t; 0 = cudaSuccess
using NcclResult = int;    // ncclResult_t; 0 = ncclSuccess
using CudaStream = void*;  // cudaStream_t; nullptr = the default stream
using NcclComm = void*;    // ncclComm_t
constexpr int kNcclFloat32 = 7;
constexpr int kNcclSum = 0;

void* OpenFirst(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

absl::Status CudaCall(const char* what, CudaError error) {
  if (error == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, " failed: cudaError ", error));
}

absl::Status NcclCall(const char* what, NcclResult result) {
  if (result == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, " failed: ncclResult ", result));
}

}  // namespace

struct CudaNccl::Api {
  CudaError (*cudaSetDevice)(int) = nullptr;
  CudaError (*cudaGetDeviceCount)(int*) = nullptr;
  CudaError (*cudaStreamSynchronize)(CudaStream) = nullptr;
  NcclResult (*ncclGetVersion)(int*) = nullptr;
  NcclResult (*ncclGetUniqueId)(NcclUniqueId*) = nullptr;
  NcclResult (*ncclCommInitRank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
  NcclResult (*ncclAllReduce)(const void*, void*, size_t, int, int, NcclComm, CudaStream) = nullptr;
  NcclResult (*ncclCommDestroy)(NcclComm) = nullptr;
};

absl::StatusOr<std::unique_ptr<CudaNccl>> CudaNccl::Load() {
  void* cudart = OpenFirst({"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                            "libcudart.so.11.0", "/usr/local/cuda/lib64/libcudart.so"});
  if (cudart == nullptr) return absl::UnavailableError("libcudart.so not found");
  void* nccl = OpenFirst({"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"});
  if (nccl == nullptr) return absl::UnavailableError("libnccl.so.2 not found");

  auto api = std::make_unique<Api>();
  absl::Status missing = absl::OkStatus();
  auto bind = [&missing](void* library, const char* library_name, const char* symbol,
                         auto& function) {
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
    if (function == nullptr && missing.ok()) {
      missing = absl::UnavailableError(absl::StrCat(library_name, " lacks ", symbol));
    }
  };
  bind(cudart, "libcudart", "cudaSetDevice", api->cudaSetDevice);
  bind(cudart, "libcudart", "cudaGetDeviceCount", api->cudaGetDeviceCount);
  bind(cudart, "libcudart", "cudaStreamSynchronize", api->cudaStreamSynchronize);
  bind(nccl, "libnccl", "ncclGetVersion", api->ncclGetVersion);
  bind(nccl, "libnccl", "ncclGetUniqueId", api->ncclGetUniqueId);
  bind(nccl, "libnccl", "ncclCommInitRank", api->ncclCommInitRank);
  bind(nccl, "libnccl", "ncclAllReduce", api->ncclAllReduce);
  bind(nccl, "libnccl", "ncclCommDestroy", api->ncclCommDestroy);
  if (!missing.ok()) return missing;

  int code = 0;
  if (absl::Status s = NcclCall("ncclGetVersion", api->ncclGetVersion(&code)); !s.ok()) return s;
  // NCCL >= 2.9 encodes X.Y.Z as X*10000 + Y*100 + Z.
  const std::string version =
      absl::StrFormat("%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  return std::unique_ptr<CudaNccl>(new CudaNccl(std::move(api), version));
}

CudaNccl::CudaNccl(std::unique_ptr<Api> api, std::string version)
    : api_(std::move(api)), version_(std::move(version)) {}

CudaNccl::~CudaNccl() {
  if (communicator_ != nullptr) api_->ncclCommDestroy(communicator_);
}

absl::StatusOr<int> CudaNccl::VisibleDeviceCount() const {
  int count = 0;
  if (absl::Status s = CudaCall("cudaGetDeviceCount", api_->cudaGetDeviceCount(&count)); !s.ok()) {
    return s;
  }
  return count;
}

absl::StatusOr<NcclUniqueId> CudaNccl::NewUniqueId() const {
  NcclUniqueId id{};
  if (absl::Status s = NcclCall("ncclGetUniqueId", api_->ncclGetUniqueId(&id)); !s.ok()) return s;
  return id;
}

absl::Status CudaNccl::Join(int device, const NcclUniqueId& id, int world_size, int rank) {
  if (communicator_ != nullptr) {
    return absl::FailedPreconditionError("already joined an NCCL communicator");
  }
  if (absl::Status s = CudaCall("cudaSetDevice", api_->cudaSetDevice(device)); !s.ok()) return s;
  NcclComm communicator = nullptr;
  if (absl::Status s =
          NcclCall("ncclCommInitRank", api_->ncclCommInitRank(&communicator, world_size, id, rank));
      !s.ok()) {
    return s;
  }
  communicator_ = communicator;
  return absl::OkStatus();
}

absl::Status CudaNccl::AllReduceSumFloats(void* data, size_t count) {
  if (communicator_ == nullptr) return absl::FailedPreconditionError("no NCCL communicator");
  if (absl::Status s = NcclCall(
          "ncclAllReduce",
          api_->ncclAllReduce(data, data, count, kNcclFloat32, kNcclSum, communicator_, nullptr));
      !s.ok()) {
    return s;
  }
  return CudaCall("cudaStreamSynchronize", api_->cudaStreamSynchronize(nullptr));
}

}  // namespace berth
