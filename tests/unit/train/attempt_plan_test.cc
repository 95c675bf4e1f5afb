// What one attempt starts where, and the processes a recorded attempt has.
#include "train/attempt_plan.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::vector<std::string> Argv(const v1::WorkerSpec& w) {
  return {w.argv().begin(), w.argv().end()};
}

// An attempt of `spec` on the bundles placed on `nodes`, one GPU each.
AttemptInputs Inputs(const v1::TrainJobSpec& spec, const std::vector<std::string>& nodes) {
  std::vector<BundleSite> sites;
  std::map<std::string, uint32_t> next_gpu;
  for (const std::string& node : nodes) sites.push_back({node, {next_gpu[node]++}});
  AttemptInputs in;
  in.job_id = "job";
  in.spec = spec;
  in.placement_group_id = "pg";
  in.attempt = 2;
  in.ranks = *AssignRanks(sites, RankOrder::kByBundle);
  in.master_addr = "10.0.0.1";
  in.master_port = 29500;
  in.job_dir = "/jobs/job";
  in.head_address = "head:7000";
  in.worker_binary = "berth-worker";
  in.relay_binary = "berth-relay";
  in.cluster_token = "secret";
  return in;
}

v1::TrainJobSpec Command(const std::vector<std::string>& argv) {
  v1::TrainJobSpec spec;
  for (const std::string& a : argv) spec.mutable_entrypoint()->mutable_command()->add_argv(a);
  return spec;
}

TEST(AttemptPlanTest, TheTrainerStartsFirstOnRankZerosNodeWithTheOnlyToken) {
  v1::TrainJobSpec spec;
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(10);
  AttemptInputs in = Inputs(spec, {"n1", "n2", "n1"});
  in.latest_checkpoint = "/jobs/job/checkpoints/5";
  absl::StatusOr<AttemptPlan> plan = PlanAttempt(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->by_node.size(), 2u);
  EXPECT_EQ(plan->by_node[0].first, "n1");
  const std::vector<v1::WorkerSpec>& n1 = plan->by_node[0].second;
  ASSERT_EQ(n1.size(), 3u);
  EXPECT_EQ(n1[0].worker_id(), "job-a2-trainer");
  EXPECT_THAT(Argv(n1[0]),
              ElementsAre("berth-worker", "trainer", "--world-size", "3", "--checkpoint-dir",
                          "/jobs/job/checkpoints", "--port", "29500", "--resume-from",
                          "/jobs/job/checkpoints/5", "--head", "head:7000", "--job-id", "job"));
  EXPECT_EQ(n1[0].env().at("BERTH_CLUSTER_TOKEN"), "secret");
  EXPECT_EQ(n1[1].worker_id(), "job-a2-r0");
  EXPECT_THAT(Argv(n1[1]), ElementsAre("berth-worker", "train", "--steps", "10"));
  EXPECT_FALSE(n1[1].env().contains("BERTH_CLUSTER_TOKEN"));
  EXPECT_EQ(n1[1].placement_group_id(), "pg");
  ASSERT_EQ(plan->ranks.size(), 3u);
  EXPECT_EQ(plan->ranks[1].worker_id(), plan->by_node[1].second[0].worker_id());
}

TEST(AttemptPlanTest, APythonCommandGetsAStoreHostAndARelayForItsTrainer) {
  absl::StatusOr<AttemptPlan> plan = PlanAttempt(Inputs(Command({"python3", "train.py"}), {"n1"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<v1::WorkerSpec>& n1 = plan->by_node[0].second;
  ASSERT_EQ(n1.size(), 3u);
  EXPECT_THAT(Argv(n1[0]),
              ElementsAre("berth-relay", "--report-file", "/jobs/job/reports/attempt-2.jsonl",
                          "--world-size", "1", "--head", "head:7000", "--job-id", "job"));
  EXPECT_EQ(n1[1].worker_id(), "job-a2-store");
  EXPECT_EQ(Argv(n1[1])[0], "python3");
  EXPECT_THAT(Argv(n1[2]), ElementsAre("python3", "train.py"));
}

TEST(AttemptPlanTest, TorchrunNeedsAsManyRanksOnEveryNode) {
  v1::TrainJobSpec spec = Command({"torchrun", "train.py"});
  spec.mutable_entrypoint()->mutable_command()->set_launcher(v1::Entrypoint::LAUNCHER_TORCHRUN);
  absl::StatusOr<AttemptPlan> uneven = PlanAttempt(Inputs(spec, {"n1", "n1", "n2"}));
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(uneven.status().message(), HasSubstr("put 2 on node rank 0 and 1 on node rank 1"));

  absl::StatusOr<AttemptPlan> even = PlanAttempt(Inputs(spec, {"n1", "n1", "n2", "n2"}));
  ASSERT_TRUE(even.ok()) << even.status();
  ASSERT_EQ(even->by_node.size(), 2u);
  EXPECT_EQ(even->by_node[1].second[0].worker_id(), "job-a2-n1");
  EXPECT_EQ(even->ranks.size(), 4u);
  EXPECT_EQ(even->ranks[3].worker_id(), "job-a2-n1");
  // Each node's launcher holds (and is limited to) that node's bundles.
  const v1::WorkerSpec& launcher = even->by_node[1].second[0];
  EXPECT_EQ(launcher.bundle_index(), 2u);
  EXPECT_THAT(launcher.bundle_indices(), ElementsAre(2, 3));
}

TEST(AttemptPlanTest, ARecordedAttemptHasItsRanksAndItsHelpersOnRankZerosNode) {
  v1::TrainJobInfo job;
  job.set_job_id("job");
  job.set_attempt(3);
  *job.mutable_spec() = Command({"python3", "train.py"});
  for (const auto& [rank, node] :
       std::vector<std::pair<uint32_t, std::string>>{{0, "n1"}, {1, "n2"}}) {
    v1::WorkerRank* w = job.add_workers();
    w->set_world_rank(rank);
    w->set_node_id(node);
    w->set_worker_id(AttemptProcessId("job", 3, absl::StrCat("r", rank)));
  }
  EXPECT_THAT(RecordedProcesses(job),
              ElementsAre(Pair("job-a3-r0", "n1"), Pair("job-a3-r1", "n2"),
                          Pair("job-a3-store", "n1"), Pair("job-a3-trainer", "n1")));
  *job.mutable_spec() = Command({"./train"});
  EXPECT_THAT(RecordedProcesses(job), Contains(Pair("job-a3-trainer", "n1")));
  EXPECT_EQ(RecordedProcesses(job).size(), 3u);
}

}  // namespace
}  // namespace berth
