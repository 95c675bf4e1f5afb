// AutoscalerConfig: berth-autoscaler's node pools and provider, from YAML.
//
//   provider:
//     type: command            # or kubernetes
//     command: [/opt/berth/pool.sh]
//     namespace: berth         # kubernetes: where the raylet Deployments are
//   pools:
//     - name: a10g
//       accelerator_type: A10G
//       gpus: 4
//       cpus: 48
//       memory: 192Gi
//       labels: {tier: prod}
//       min_nodes: 0
//       max_nodes: 8
//       idle_timeout_s: 600
//       deployment: berth-raylet-a10g   # kubernetes provider
//
// Parsing checks every field and reports the first problem as
// "<file>:<line>: pools[1].gpus: ..." (INVALID_ARGUMENT).
#ifndef BERTH_AUTOSCALER_NODE_POOL_CONFIG_H_
#define BERTH_AUTOSCALER_NODE_POOL_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/resource_set.h"

namespace berth {

// One kind of node the autoscaler can add or remove.
struct NodePool {
  std::string name;
  std::string accelerator_type;  // empty for CPU-only pools
  uint32_t gpus = 0;
  ResourceSet resources;  // CPU, memory, custom (GPU comes from `gpus`)
  std::map<std::string, std::string> labels;
  uint32_t min_nodes = 0;
  uint32_t max_nodes = 0;
  int64_t idle_timeout_ms = 600'000;
  int64_t launch_timeout_ms = 600'000;  // a scale-up not met by then is retried
  std::string deployment;               // kubernetes: the raylet Deployment
};

struct ProviderConfig {
  std::string type;                  // "command" or "kubernetes"
  std::vector<std::string> command;  // command: argv prefix
  std::string ns = "berth";          // kubernetes: namespace
  // kubernetes: API server URL; empty = in-cluster (KUBERNETES_SERVICE_HOST).
  std::string api_server;
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
};

struct AutoscalerConfig {
  ProviderConfig provider;
  std::vector<NodePool> pools;
};

absl::StatusOr<AutoscalerConfig> ParseAutoscalerConfig(const std::string& text,
                                                       const std::string& name);
absl::StatusOr<AutoscalerConfig> LoadAutoscalerConfig(const std::string& path);

}  // namespace berth

#endif  // BERTH_AUTOSCALER_NODE_POOL_CONFIG_H_
