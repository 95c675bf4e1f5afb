// TwoPhaseCommit: the requests of each phase and how the answers add up.
#include "scheduler/two_phase_commit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

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

}  // namespace
}  // namespace berth
