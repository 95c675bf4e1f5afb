// Rank assignment of a train job's workers, from where their bundles landed.
//
// Rank 0 is the worker in bundle 0, the one that shares the trainer's node
// and bundle. The others follow sorted by node (the trainer's node first,
// then nodes in order of first appearance in bundle order) and then by their
// lowest GPU id, so local ranks follow GPU ids on each node (DeepSpeed and
// accelerate assume they do). CUDA_VISIBLE_DEVICES of every worker on a node
// lists that node's workers' GPUs in local-rank order, so device LOCAL_RANK
// is the worker's own GPU while NCCL can still use peer access. Pure.
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
  uint32_t bundle_index = 0;
  std::string node_id;
  std::vector<uint32_t> gpu_ids;          // this worker's own GPUs
  std::vector<uint32_t> visible_gpu_ids;  // CUDA_VISIBLE_DEVICES for it
};

// `sites[i]` is bundle i's. Returns workers in world-rank order. Errors if
// `sites` is empty or a site has no node.
absl::StatusOr<std::vector<RankedWorker>> AssignRanks(const std::vector<BundleSite>& sites);

}  // namespace berth

#endif  // BERTH_TRAIN_RANK_ASSIGNMENT_H_
