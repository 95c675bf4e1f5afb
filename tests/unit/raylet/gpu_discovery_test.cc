#include "raylet/gpu_discovery.h"

#include <set>

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(GpuDiscoveryTest, NumGpusSimulatesThatManyOfTheGivenType) {
  const DiscoveredGpus gpus = DiscoverGpus({4, "A10G", "node-1"});
  EXPECT_NE(gpus.source.find("simulated"), std::string::npos) << gpus.source;
  ASSERT_EQ(gpus.devices.size(), 4u);
  std::set<std::string> uuids;
  for (uint32_t i = 0; i < 4; ++i) {
    const GpuDevice& d = gpus.devices[i];
    EXPECT_EQ(d.index, i);
    EXPECT_EQ(d.accelerator_type, "A10G");
    // NVML's shape: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
    EXPECT_EQ(d.uuid.size(), 40u) << d.uuid;
    EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u) << d.uuid;
    uuids.insert(d.uuid);
  }
  EXPECT_EQ(uuids.size(), 4u);
}

TEST(GpuDiscoveryTest, SimulatedUuidsAreStablePerSeedAndDifferAcrossSeeds) {
  const auto a = SimulatedGpus(2, "T4", "node-a");
  const auto again = SimulatedGpus(2, "T4", "node-a");
  const auto b = SimulatedGpus(2, "T4", "node-b");
  EXPECT_EQ(a[0].uuid, again[0].uuid);
  EXPECT_EQ(a[1].uuid, again[1].uuid);
  EXPECT_NE(a[0].uuid, b[0].uuid);
  EXPECT_NE(a[1].uuid, b[1].uuid);
}

TEST(GpuDiscoveryTest, ZeroSimulatedGpus) {
  EXPECT_TRUE(DiscoverGpus({0, "", "n"}).devices.empty());
}

TEST(GpuDiscoveryTest, WithoutNumGpusAsksNvmlOrHasNone) {
  const DiscoveredGpus gpus = DiscoverGpus({std::nullopt, "", "n"});
  if (gpus.source == "nvml") {
    for (uint32_t i = 0; i < gpus.devices.size(); ++i) {
      EXPECT_EQ(gpus.devices[i].index, i);
      EXPECT_FALSE(gpus.devices[i].uuid.empty());
      EXPECT_FALSE(gpus.devices[i].accelerator_type.empty()) << gpus.devices[i].name;
    }
  } else {
    EXPECT_TRUE(gpus.devices.empty());
    EXPECT_NE(gpus.source.find("simulated: none"), std::string::npos) << gpus.source;
  }
}

TEST(GpuDiscoveryTest, AcceleratorTypeFromNvmlNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A10G", "A10G"},
      {"Tesla T4", "T4"},
      {"NVIDIA H100 80GB HBM3", "H100"},
      {"NVIDIA A100-SXM4-80GB", "A100"},
      {"NVIDIA A100-PCIE-40GB", "A100"},
      {"Tesla V100-SXM2-16GB", "V100"},
      {"NVIDIA L4", "L4"},
      {"NVIDIA L40S", "L40S"},
      {"NVIDIA A10", "A10"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA GeForce RTX 4090", "4090"},
      {"NVIDIA RTX A6000", "A6000"},
      {"", ""},
  };
  for (const auto& [name, type] : cases) EXPECT_EQ(AcceleratorTypeFromName(name), type) << name;
}

}  // namespace
}  // namespace berth
