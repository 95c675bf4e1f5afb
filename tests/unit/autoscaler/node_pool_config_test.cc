#include "autoscaler/node_pool_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] = R"(provider:
  type: kubernetes
  namespace: gpu
pools:
  - name: a10g
    accelerator_type: A10G
    gpus: 4
    cpus: 48
    memory: 192Gi
    labels: {tier: prod}
    max_nodes: 8
    idle_timeout_s: 300
    deployment: berth-raylet-a10g
  - name: cpu
    cpus: 16
    memory: 64Gi
    resources: {scratch: 2}
    min_nodes: 1
    max_nodes: 4
    deployment: berth-raylet-cpu
)";

TEST(NodePoolConfigTest, ParsesPoolsAndProvider) {
  absl::StatusOr<AutoscalerConfig> config = ParseAutoscalerConfig(kConfig, "pools.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->provider.type, "kubernetes");
  EXPECT_EQ(config->provider.ns, "gpu");
  ASSERT_EQ(config->pools.size(), 2u);
  const NodePool& a10g = config->pools[0];
  EXPECT_EQ(a10g.accelerator_type, "A10G");
  EXPECT_EQ(a10g.resources.Get(kGpu), Quantity::Whole(4));
  EXPECT_EQ(a10g.resources.Get(kMemory), Quantity::Whole(int64_t{192} << 30));
  EXPECT_EQ(a10g.labels.at("tier"), "prod");
  EXPECT_EQ(a10g.idle_timeout_ms, 300'000);
  EXPECT_EQ(a10g.min_nodes, 0u);
  EXPECT_EQ(config->pools[1].resources.Get("scratch"), Quantity::Whole(2));
  EXPECT_EQ(config->pools[1].resources.Get(kGpu), Quantity());
}

TEST(NodePoolConfigTest, ErrorsNameFileLineAndField) {
  auto error = [](const std::string& text) {
    absl::StatusOr<AutoscalerConfig> config = ParseAutoscalerConfig(text, "pools.yaml");
    return config.ok() ? std::string("ok") : std::string(config.status().message());
  };
  const std::string provider = "provider: {type: command, command: [/bin/true]}\n";
  EXPECT_EQ(
      error(provider +
            "pools:\n  - name: a\n    gpus: 4\n    cpus: 8\n    memory: 1Gi\n    max_nodes: 2\n"),
      "pools.yaml:3: pools[0].accelerator_type: required when gpus > 0");
  EXPECT_EQ(
      error(provider + "pools:\n  - name: a\n    cpus: 8\n    memory: 1Gi\n    max_nodes: two\n"),
      "pools.yaml:6: pools[0].max_nodes: expected a whole number, got \"two\"");
  EXPECT_EQ(error(provider + "pools:\n  - name: a\n    cpus: 8\n    memory: 1Gi\n    min_nodes: "
                             "3\n    max_nodes: 2\n"),
            "pools.yaml:6: pools[0].min_nodes: must be <= max_nodes");
  EXPECT_EQ(
      error(provider +
            "pools:\n  - name: a\n    cpus: 8\n    memory: 1Gi\n    max_nodes: 2\n    gpu: 1\n"),
      "pools.yaml:7: pools[0]: unknown key \"gpu\"");
  EXPECT_EQ(error(provider + "pools:\n  - {name: a, cpus: 8, memory: 1Gi, max_nodes: 2}\n"
                             "  - {name: a, cpus: 8, memory: 1Gi, max_nodes: 2}\n"),
            "pools.yaml:4: pools[1].name: \"a\" is used twice");
  EXPECT_EQ(error("provider: {type: kubernetes}\npools:\n  - {name: a, cpus: 8, memory: 1Gi, "
                  "max_nodes: 2}\n"),
            "pools.yaml:3: pools[0].deployment: required with the kubernetes provider");
  EXPECT_EQ(error("provider: {type: command}\npools: []\n"),
            "pools.yaml:1: provider.command: required with the command provider");
  EXPECT_EQ(error("provider: {type: slurm}\npools: []\n"),
            "pools.yaml:1: provider.type: \"slurm\": want command or kubernetes");
  EXPECT_THAT(error(provider + "pools:\n  - {name: a, cpus: 8, memory: lots, max_nodes: 2}\n"),
              HasSubstr("pools.yaml:3: pools[0].memory"));
  EXPECT_THAT(error(provider + "pools: [\n"), HasSubstr("pools.yaml:"));
}

}  // namespace
}  // namespace berth
