// Rank assignment of a train job's workers, from where their bundles landed.
//
// Rank 0 is always the worker in bundle 0, the one that shares the trainer's
// node and bundle. When the other workers' bundles are alike (RankOrder::
// kByPlacement) any of them may take any rank, so they follow sorted by node
// (the trainer's node first, then nodes in order of first appearance in
// bundle order) and then by their lowest GPU id: a node's ranks are
// contiguous and local ranks follow GPU ids (DeepSpeed and accelerate assume
// both). When they differ (kByBundle: rank_resources, resources_per_worker_
// list, per-rank label_selector) rank i is bundle i, so every rank gets what
// it asked for; node ranks still follow first appearance, and local ranks
// follow world ranks, which follow GPU ids on a fresh placement because the
// placer hands out a node's GPUs in increasing bundle order. CUDA_VISIBLE_
// DEVICES of every worker on a node lists that node's workers' GPUs in
// local-rank order, so device LOCAL_RANK is the worker's own GPU while NCCL
// can still use peer access. Pure.
#ifndef BERTH_TRAIN_RANK_ASSIGNMENT_H_
#define BERTH_TRAIN_RANK_ASSIGNMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace berth {

// Where one worker's bundle landed.
struct BundleSite {
  std::string node_id;
  std::vector<uint32_t> gpu_ids;  // ascending
};

struct RankedWorker {
  uint32_t world_rank = 0;
  uint32_t local_rank = 0;
  uint32_t node_rank = 0;
  uint32_t local_world_size = 0;
  uint32_t bundle_index = 0;       // in its group
  std::string placement_group_id;  // "": the job's group (else an elastic one)
  std::string node_id;
  std::vector<uint32_t> gpu_ids;          // this worker's own GPUs
  std::vector<uint32_t> visible_gpu_ids;  // CUDA_VISIBLE_DEVICES for it
};

enum class RankOrder { kByPlacement, kByBundle };

// `sites[i]` is bundle i's. Returns workers in world-rank order. Errors if
// `sites` is empty or a site has no node.
absl::StatusOr<std::vector<RankedWorker>> AssignRanks(const std::vector<BundleSite>& sites,
                                                      RankOrder order);

}  // namespace berth

#endif  // BERTH_TRAIN_RANK_ASSIGNMENT_H_
