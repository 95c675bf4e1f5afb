#include "worker/cuda_nccl.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

// Runs everywhere: with or without CUDA, NCCL and a GPU, loading either
// works or says what is missing, and nothing crashes.
TEST(WorkerCudaNcclTest, LoadsOrSaysWhy) {
  absl::StatusOr<std::unique_ptr<CudaNccl>> nccl = CudaNccl::Load();
  if (!nccl.ok()) {
    EXPECT_EQ(nccl.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_FALSE(nccl.status().message().empty());
    return;
  }
  EXPECT_EQ((*nccl)->version().rfind("2.", 0), 0u) << (*nccl)->version();
  absl::StatusOr<int> devices = (*nccl)->VisibleDeviceCount();
  if (!devices.ok()) {
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_FALSE((*nccl)->AllReduceSumFloats(nullptr, 0).ok());  // no communicator yet
}

}  // namespace
}  // namespace berth
