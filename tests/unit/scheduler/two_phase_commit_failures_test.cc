// TwoPhaseCommit's failure paths: a refused or timed-out prepare and a
// failed commit are the outcome (naming the node, keeping the call's code)
// and every node is cancelled; the prepare carries each bundle's resources
// and GPU shares; answers from many threads at once still tell exactly one
// of them that it was the last.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/two_phase_commit.h"

namespace berth {
namespace {

using ::testing::ElementsAre;

// `nodes` nodes "node-<n>" at "10.0.0.<n>:1", each with bundle n of one GPU
// (GPU instance n).
CommitTask Task(int nodes) {
  CommitTask task{"pg-7", 2, {}};
  for (int n = 0; n < nodes; ++n) {
    NodeBundles node{"node-" + std::to_string(n), "10.0.0." + std::to_string(n) + ":1", {}};
    node.bundles.push_back({static_cast<uint32_t>(n),
                            ResourceSet::Of({{"GPU", 1}, {"CPU", 2}}),
                            {GpuShare{static_cast<uint32_t>(n), Quantity::Whole(1)}}});
    task.nodes.push_back(std::move(node));
  }
  return task;
}

v1::PrepareBundleResourcesResponse Prepared(bool prepared, const std::string& reason = "") {
  v1::PrepareBundleResourcesResponse r;
  r.set_prepared(prepared);
  r.set_reason(reason);
  return r;
}

TEST(TwoPhaseCommitFailuresTest, APrepareCarriesEachBundlesResourcesAndGpus) {
  TwoPhaseCommit commit(Task(2));
  const v1::PrepareBundleResourcesRequest prepare = commit.Prepare(1).prepare();
  EXPECT_EQ(prepare.placement_group_id(), "pg-7");
  ASSERT_EQ(prepare.bundles_size(), 1);
  EXPECT_EQ(prepare.bundles(0).bundle_index(), 1u);
  EXPECT_EQ(prepare.bundles(0).resources().amounts().at("GPU"), 1);
  EXPECT_EQ(prepare.bundles(0).resources().amounts().at("CPU"), 2);
  ASSERT_EQ(prepare.bundles(0).gpus_size(), 1);
  EXPECT_EQ(prepare.bundles(0).gpus(0).index(), 1u);
  EXPECT_EQ(prepare.bundles(0).gpus(0).units(), Quantity::kUnitsPerWhole);
}

TEST(TwoPhaseCommitFailuresTest, ARefusedOneNodeCommitIsTheOutcomeAndIsCancelled) {
  TwoPhaseCommit commit(Task(1));
  EXPECT_TRUE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(false, "GPU 0 is taken")));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(commit.status().message(), "node node-0 refused to prepare: GPU 0 is taken");
  const std::vector<CancelTask> cancels = commit.CancelAll();
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].placement_group_id, "pg-7");
  EXPECT_EQ(cancels[0].request_id, "pg-7/2/node-0/cancel");
  EXPECT_THAT(cancels[0].bundle_indices, ElementsAre(0u));
}

TEST(TwoPhaseCommitFailuresTest, APrepareThatTimedOutKeepsItsCodeAndNamesTheNode) {
  TwoPhaseCommit commit(Task(3));
  EXPECT_FALSE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(true)));
  EXPECT_FALSE(
      commit.OnPrepareAnswer(2, absl::DeadlineExceededError("Deadline Exceeded"), Prepared(false)));
  // A later failure does not replace the first.
  EXPECT_TRUE(commit.OnPrepareAnswer(1, absl::UnavailableError("connection refused"), {}));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(commit.status().message(), "prepare on node-2: Deadline Exceeded");
  // node-0 prepared; node-2 may have before its deadline: all are cancelled.
  EXPECT_EQ(commit.CancelAll().size(), 3u);
}

TEST(TwoPhaseCommitFailuresTest, AFailedCommitIsTheOutcomeAndEveryNodeIsCancelled) {
  TwoPhaseCommit commit(Task(2));
  EXPECT_FALSE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(true)));
  EXPECT_TRUE(commit.OnPrepareAnswer(1, absl::OkStatus(), Prepared(true)));
  ASSERT_TRUE(commit.status().ok());
  EXPECT_FALSE(commit.OnCommitAnswer(1, absl::DeadlineExceededError("Deadline Exceeded")));
  EXPECT_TRUE(commit.OnCommitAnswer(0, absl::NotFoundError("no prepared bundle 0")));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(commit.status().message(), "commit on node-1: Deadline Exceeded");
  // node-0 committed: it lets go too.
  const std::vector<CancelTask> cancels = commit.CancelAll();
  ASSERT_EQ(cancels.size(), 2u);
  EXPECT_EQ(cancels[0].address, "10.0.0.0:1");
  EXPECT_EQ(cancels[1].address, "10.0.0.1:1");
  EXPECT_EQ(commit.Commit(0).commit().request_id(), "pg-7/2/node-0/commit");
}

TEST(TwoPhaseCommitFailuresTest, OfAnswersFromManyThreadsExactlyOneIsTheLast) {
  constexpr int kNodes = 64;
  TwoPhaseCommit commit(Task(kNodes));
  std::atomic<int> last_prepares{0};
  std::atomic<int> last_commits{0};
  std::vector<std::thread> threads;
  for (int n = 0; n < kNodes; ++n) {
    threads.emplace_back([&, n] {
      if (commit.OnPrepareAnswer(n, absl::OkStatus(), Prepared(true))) ++last_prepares;
      const absl::Status call = n == 17 ? absl::UnavailableError("reset") : absl::OkStatus();
      if (commit.OnCommitAnswer(n, call)) ++last_commits;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(last_prepares, 1);
  EXPECT_EQ(last_commits, 1);
  EXPECT_EQ(commit.status().message(), "commit on node-17: reset");
}

}  // namespace
}  // namespace berth
