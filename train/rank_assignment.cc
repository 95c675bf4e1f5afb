#include "train/rank_assignment.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::StatusOr<std::vector<RankedWorker>> AssignRanks(const std::vector<BundleSite>& sites,
                                                      RankOrder rank_order) {
  if (sites.empty()) return absl::InvalidArgumentError("bundles: a job has at least one worker");
  std::map<std::string, uint32_t> node_order;  // node -> order of first appearance
  for (uint32_t b = 0; b < sites.size(); ++b) {
    if (sites[b].node_id.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("bundle ", b, " is not placed"));
    }
    node_order.try_emplace(sites[b].node_id, static_cast<uint32_t>(node_order.size()));
  }
  auto lowest_gpu = [&](uint32_t b) {
    return sites[b].gpu_ids.empty() ? UINT32_MAX : sites[b].gpu_ids.front();
  };
  std::vector<uint32_t> order;  // bundle of each rank; rank 0 is bundle 0's worker, always
  for (uint32_t b = 0; b < sites.size(); ++b) order.push_back(b);
  if (rank_order == RankOrder::kByPlacement) {
    std::sort(order.begin() + 1, order.end(), [&](uint32_t a, uint32_t b) {
      return std::make_tuple(node_order.at(sites[a].node_id), lowest_gpu(a), a) <
             std::make_tuple(node_order.at(sites[b].node_id), lowest_gpu(b), b);
    });
  }

  std::vector<RankedWorker> workers(order.size());
  std::map<std::string, std::vector<uint32_t>> ranks_on_node;
  for (uint32_t rank = 0; rank < order.size(); ++rank) {
    const uint32_t b = order[rank];
    RankedWorker& w = workers[rank];
    w.world_rank = rank;
    w.bundle_index = b;
    w.node_id = sites[b].node_id;
    w.gpu_ids = sites[b].gpu_ids;
    w.node_rank = node_order.at(w.node_id);
    w.local_rank = static_cast<uint32_t>(ranks_on_node[w.node_id].size());
    ranks_on_node[w.node_id].push_back(rank);
  }
  for (RankedWorker& w : workers) {
    const std::vector<uint32_t>& peers = ranks_on_node.at(w.node_id);
    w.local_world_size = static_cast<uint32_t>(peers.size());
    for (uint32_t peer : peers) {
      for (uint32_t gpu : workers[peer].gpu_ids) {
        if (std::find(w.visible_gpu_ids.begin(), w.visible_gpu_ids.end(), gpu) ==
            w.visible_gpu_ids.end()) {
          w.visible_gpu_ids.push_back(gpu);
        }
      }
    }
  }
  return workers;
}

}  // namespace berth
