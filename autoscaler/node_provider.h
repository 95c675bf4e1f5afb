// NodeProvider: how berth-autoscaler's decisions reach the infrastructure.
//
// CommandProvider runs an operator's program:
//   <command...> scale  <pool> <target>
//   <command...> remove <pool> <target> <node-id>...
// with the pool's shape in the environment (BERTH_POOL, BERTH_POOL_GPUS,
// BERTH_POOL_ACCELERATOR_TYPE, BERTH_POOL_CPUS, BERTH_POOL_MEMORY,
// BERTH_POOL_LABELS, BERTH_HEAD_ADDRESS); exit 0 means done.
//
// KubernetesProvider sets the replica count of each pool's raylet
// Deployment through the scale subresource, with the pod's service account.
// Before removing nodes it marks their pods (node id = pod name) with the
// lowest pod-deletion-cost, so the ReplicaSet deletes exactly those.
//
// Every call has a deadline and reports failure as a Status with the
// program's output or the API server's answer.
#ifndef BERTH_AUTOSCALER_NODE_PROVIDER_H_
#define BERTH_AUTOSCALER_NODE_PROVIDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "autoscaler/node_pool_config.h"

namespace berth {

class NodeProvider {
 public:
  virtual ~NodeProvider() = default;
  // The pool should have `target` nodes (more than now).
  virtual absl::Status Scale(const NodePool& pool, uint32_t target) = 0;
  // These drained, empty nodes go; the pool keeps `target`.
  virtual absl::Status Remove(const NodePool& pool, uint32_t target,
                              const std::vector<std::string>& node_ids) = 0;
};

class CommandProvider final : public NodeProvider {
 public:
  CommandProvider(std::vector<std::string> command, std::string head_address,
                  absl::Duration timeout = absl::Seconds(120));
  absl::Status Scale(const NodePool& pool, uint32_t target) override;
  absl::Status Remove(const NodePool& pool, uint32_t target,
                      const std::vector<std::string>& node_ids) override;

 private:
  absl::Status Run(const NodePool& pool, std::vector<std::string> args);
  std::vector<std::string> command_;
  std::string head_address_;
  absl::Duration timeout_;
};

class KubernetesProvider final : public NodeProvider {
 public:
  // Resolves the API server (config or the in-cluster environment).
  static absl::StatusOr<std::unique_ptr<KubernetesProvider>> Create(
      const ProviderConfig& config, absl::Duration timeout = absl::Seconds(10));
  absl::Status Scale(const NodePool& pool, uint32_t target) override;
  absl::Status Remove(const NodePool& pool, uint32_t target,
                      const std::vector<std::string>& node_ids) override;

 private:
  KubernetesProvider(ProviderConfig config, std::string api_server, absl::Duration timeout);
  // PATCH `path` with a JSON merge patch.
  absl::Status Patch(const std::string& path, const std::string& body);
  ProviderConfig config_;
  std::string api_server_;
  absl::Duration timeout_;
};

absl::StatusOr<std::unique_ptr<NodeProvider>> MakeNodeProvider(const ProviderConfig& config,
                                                               const std::string& head_address);

}  // namespace berth

#endif  // BERTH_AUTOSCALER_NODE_PROVIDER_H_
