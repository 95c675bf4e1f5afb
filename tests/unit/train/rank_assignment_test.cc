#include "train/rank_assignment.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(RankAssignmentTest, RankZeroIsBundleZeroAndOthersFollowNodeThenGpu) {
  // Bundle 0 (trainer + rank 0) on node b GPU 1; the rest spread over a and b.
  std::vector<BundleSite> sites = {{"b", {1}}, {"a", {3}}, {"b", {0}}, {"a", {2}}, {"b", {2}}};
  auto ranks = AssignRanks(sites);
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

TEST(RankAssignmentTest, CpuWorkersAndErrors) {
  auto ranks = AssignRanks({{"a", {}}, {"a", {}}, {"b", {}}});
  ASSERT_TRUE(ranks.ok());
  EXPECT_TRUE((*ranks)[0].visible_gpu_ids.empty());
  EXPECT_EQ((*ranks)[2].node_rank, 1u);
  EXPECT_FALSE(AssignRanks({}).ok());
  EXPECT_FALSE(AssignRanks({{"a", {}}, {"", {}}}).ok());
}

}  // namespace
}  // namespace berth
