#include "train/rank_assignment.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(RankAssignmentTest, RankZeroIsBundleZeroAndOthersFollowNodeThenGpu) {
  // Bundle 0 (trainer + rank 0) on node b GPU 1; the rest spread over a and b.
  std::vector<BundleSite> sites = {{"b", {1}}, {"a", {3}}, {"b", {0}}, {"a", {2}}, {"b", {2}}};
  auto ranks = AssignRanks(sites, RankOrder::kByPlacement);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 5u);
  // rank: bundle, node
  const std::vector<std::pair<uint32_t, std::string>> expected = {
      {0, "b"}, {2, "b"}, {4, "b"}, {3, "a"}, {1, "a"}};
  for (uint32_t r = 0; r < 5; ++r) {
    EXPECT_EQ((*ranks)[r].world_rank, r);
    EXPECT_EQ((*ranks)[r].bundle_index, expected[r].first) << "rank " << r;
    EXPECT_EQ((*ranks)[r].node_id, expected[r].second) << "rank " << r;
  }
  // The trainer's node is node 0; local ranks count within each node.
  EXPECT_EQ((*ranks)[0].node_rank, 0u);
  EXPECT_EQ((*ranks)[3].node_rank, 1u);
  EXPECT_EQ((*ranks)[1].local_rank, 1u);
  EXPECT_EQ((*ranks)[4].local_rank, 1u);
  EXPECT_EQ((*ranks)[0].local_world_size, 3u);
  EXPECT_EQ((*ranks)[3].local_world_size, 2u);
  // CUDA_VISIBLE_DEVICES: the node's GPUs in local-rank order, so device
  // LOCAL_RANK is the worker's own GPU.
  EXPECT_EQ((*ranks)[1].visible_gpu_ids, (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ((*ranks)[3].visible_gpu_ids, (std::vector<uint32_t>{2, 3}));
  for (const RankedWorker& w : *ranks) {
    EXPECT_EQ(w.visible_gpu_ids[w.local_rank], w.gpu_ids[0]) << "rank " << w.world_rank;
  }
}

// Ranks that differ (rank_resources, resources_per_worker_list, per-rank
// selectors) keep their bundles: rank i is bundle i wherever it landed.
TEST(RankAssignmentTest, ByBundleRankIIsBundleIAndNodesCountInFirstAppearance) {
  // The placer hands a node's GPUs out in bundle order: b gets 0 1 2, a 4 5.
  std::vector<BundleSite> sites = {{"b", {0}}, {"a", {4}}, {"b", {1}}, {"a", {5}}, {"b", {2}}};
  auto ranks = AssignRanks(sites, RankOrder::kByBundle);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 5u);
  const std::vector<uint32_t> local = {0, 0, 1, 1, 2};
  for (uint32_t r = 0; r < 5; ++r) {
    const RankedWorker& w = (*ranks)[r];
    EXPECT_EQ(w.world_rank, r);
    EXPECT_EQ(w.bundle_index, r);
    EXPECT_EQ(w.node_id, sites[r].node_id);
    EXPECT_EQ(w.gpu_ids, sites[r].gpu_ids);
    EXPECT_EQ(w.node_rank, w.node_id == "b" ? 0u : 1u) << "rank " << r;
    EXPECT_EQ(w.local_rank, local[r]) << "rank " << r;
    EXPECT_EQ(w.local_world_size, w.node_id == "b" ? 3u : 2u);
    EXPECT_EQ(w.visible_gpu_ids[w.local_rank], w.gpu_ids[0]) << "rank " << r;
  }
  // Local ranks follow GPU ids on each node.
  EXPECT_EQ((*ranks)[2].visible_gpu_ids, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ((*ranks)[3].visible_gpu_ids, (std::vector<uint32_t>{4, 5}));
  // The same sites by placement reorder ranks 1-4 by node: not what a
  // gang of differing ranks asked for.
  auto by_placement = AssignRanks(sites, RankOrder::kByPlacement);
  ASSERT_TRUE(by_placement.ok());
  EXPECT_EQ((*by_placement)[1].bundle_index, 2u);
}

TEST(RankAssignmentTest, CpuWorkersAndErrors) {
  auto ranks = AssignRanks({{"a", {}}, {"a", {}}, {"b", {}}}, RankOrder::kByPlacement);
  ASSERT_TRUE(ranks.ok());
  EXPECT_TRUE((*ranks)[0].visible_gpu_ids.empty());
  EXPECT_EQ((*ranks)[2].node_rank, 1u);
  EXPECT_FALSE(AssignRanks({}, RankOrder::kByPlacement).ok());
  EXPECT_FALSE(AssignRanks({{"a", {}}, {"", {}}}, RankOrder::kByBundle).ok());
}

}  // namespace
}  // namespace berth
