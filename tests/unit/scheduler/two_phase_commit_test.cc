// TwoPhaseCommit: the requests of each phase and how the answers add up;
// its failures (a refused or timed-out prepare, a failed commit) are the
// outcome, naming the node and keeping the call's code, and every node is
// cancelled; answers from many threads at once still tell exactly one of
// them that it was the last.
#include "scheduler/two_phase_commit.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CommitTask Task(int nodes) {
  CommitTask task{"pg-1", 3, {}};
  for (int n = 0; n < nodes; ++n) {
    NodeBundles node{"node-" + std::to_string(n), "10.0.0." + std::to_string(n) + ":1", {}};
    node.bundles.push_back({static_cast<uint32_t>(2 * n), ResourceSet::Of({{"CPU", 1}}), {}});
    node.bundles.push_back({static_cast<uint32_t>(2 * n + 1), ResourceSet::Of({{"CPU", 2}}), {}});
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

// `nodes` nodes "node-<n>" at "10.0.0.<n>:1", each with bundle n of one GPU
// (GPU instance n).
CommitTask GpuTask(int nodes) {
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

TEST(TwoPhaseCommitTest, OneNodeCommitsWithItsPrepare) {
  TwoPhaseCommit commit(Task(1));
  EXPECT_TRUE(commit.single_node());
  const v1::BundleOp op = commit.Prepare(0);
  ASSERT_TRUE(op.has_prepare());
  EXPECT_TRUE(op.prepare().commit());
  EXPECT_EQ(op.prepare().request_id(), "pg-1/3/node-0/prepare+commit");
  EXPECT_EQ(op.prepare().bundles_size(), 2);
  EXPECT_TRUE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(true)));
  EXPECT_TRUE(commit.status().ok());
}

TEST(TwoPhaseCommitTest, TheLastAnswerOfEachPhaseIsTold) {
  TwoPhaseCommit commit(Task(3));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(commit.Prepare(i).prepare().commit());
    EXPECT_EQ(commit.Prepare(i).prepare().request_id(),
              "pg-1/3/node-" + std::to_string(i) + "/prepare");
  }
  EXPECT_FALSE(commit.OnPrepareAnswer(2, absl::OkStatus(), Prepared(true)));
  EXPECT_FALSE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(true)));
  EXPECT_TRUE(commit.OnPrepareAnswer(1, absl::OkStatus(), Prepared(true)));
  EXPECT_TRUE(commit.status().ok());
  const v1::BundleOp op = commit.Commit(1);
  ASSERT_TRUE(op.has_commit());
  EXPECT_EQ(op.commit().request_id(), "pg-1/3/node-1/commit");
  EXPECT_THAT(op.commit().bundle_indices(), ::testing::ElementsAre(2, 3));
  EXPECT_FALSE(commit.OnCommitAnswer(0, absl::OkStatus()));
  EXPECT_FALSE(commit.OnCommitAnswer(1, absl::UnavailableError("connection reset")));
  EXPECT_TRUE(commit.OnCommitAnswer(2, absl::OkStatus()));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(commit.status().message(), HasSubstr("commit on node-1: connection reset"));
}

TEST(TwoPhaseCommitTest, TheFirstRefusalIsTheOutcomeAndEveryNodeIsCancelled) {
  TwoPhaseCommit commit(Task(3));
  EXPECT_FALSE(commit.OnPrepareAnswer(
      1, absl::OkStatus(), Prepared(false, "bundle 2 needs CPU: 1, the node has 0 free")));
  EXPECT_FALSE(commit.OnPrepareAnswer(0, absl::DeadlineExceededError("deadline"), {}));
  EXPECT_TRUE(commit.OnPrepareAnswer(2, absl::OkStatus(), Prepared(true)));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(commit.status().message(),
            "node node-1 refused to prepare: bundle 2 needs CPU: 1, the node has 0 free");
  const std::vector<CancelTask> cancels = commit.CancelAll();
  ASSERT_EQ(cancels.size(), 3u);  // node-2 prepared; node-0 may have before its call failed
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(cancels[i].address, "10.0.0." + std::to_string(i) + ":1");
    EXPECT_EQ(cancels[i].request_id, "pg-1/3/node-" + std::to_string(i) + "/cancel");
    EXPECT_THAT(cancels[i].bundle_indices, ::testing::ElementsAre(2 * i, 2 * i + 1));
  }
}

TEST(TwoPhaseCommitTest, APrepareCarriesEachBundlesResourcesAndGpus) {
  TwoPhaseCommit commit(GpuTask(2));
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

TEST(TwoPhaseCommitTest, ARefusedOneNodeCommitIsTheOutcomeAndIsCancelled) {
  TwoPhaseCommit commit(GpuTask(1));
  EXPECT_TRUE(commit.OnPrepareAnswer(0, absl::OkStatus(), Prepared(false, "GPU 0 is taken")));
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(commit.status().message(), "node node-0 refused to prepare: GPU 0 is taken");
  const std::vector<CancelTask> cancels = commit.CancelAll();
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].placement_group_id, "pg-7");
  EXPECT_EQ(cancels[0].request_id, "pg-7/2/node-0/cancel");
  EXPECT_THAT(cancels[0].bundle_indices, ElementsAre(0u));
}

TEST(TwoPhaseCommitTest, APrepareThatTimedOutKeepsItsCodeAndNamesTheNode) {
  TwoPhaseCommit commit(GpuTask(3));
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

TEST(TwoPhaseCommitTest, AFailedCommitIsTheOutcomeAndEveryNodeIsCancelled) {
  TwoPhaseCommit commit(GpuTask(2));
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

TEST(TwoPhaseCommitTest, OfAnswersFromManyThreadsExactlyOneIsTheLast) {
  constexpr int kNodes = 64;
  TwoPhaseCommit commit(GpuTask(kNodes));
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
