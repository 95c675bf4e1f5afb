// QueueService on a real berth-head (sqlite store): a queue with a bad quota,
// an unknown cohort or a negative limit is refused naming the field and
// nothing changes; queues and cohorts survive a head killed with SIGKILL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "tests/integration/local_cluster.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LocalCluster;

class QueueServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { cluster_ = std::make_unique<LocalCluster>(); }

  grpc::Status Create(const v1::Queue& queue) {
    v1::CreateQueueRequest request;
    *request.mutable_queue() = queue;
    v1::CreateQueueResponse response;
    return cluster_->queues().CreateQueue(cluster_->context().get(), request, &response);
  }
  v1::ListQueuesResponse List() {
    v1::ListQueuesResponse response;
    EXPECT_TRUE(cluster_->queues().ListQueues(cluster_->context().get(), {}, &response).ok());
    return response;
  }
  std::vector<std::string> Names() {
    std::vector<std::string> names;
    const v1::ListQueuesResponse list = List();
    for (const v1::Queue& q : list.queues()) names.push_back(q.name());
    return names;
  }
  static v1::Queue Team(const std::string& name, const std::string& cohort, double gpus) {
    v1::Queue q;
    q.set_name(name);
    q.set_cohort(cohort);
    (*q.mutable_nominal_quota())["GPU"] = gpus;
    return q;
  }

  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(QueueServiceTest, ABadQueueIsRefusedNamingTheFieldAndChangesNothing) {
  v1::CreateCohortRequest cohort;
  cohort.set_name("gpus");
  v1::CreateCohortResponse created;
  ASSERT_TRUE(cluster_->queues().CreateCohort(cluster_->context().get(), cohort, &created).ok());
  ASSERT_TRUE(Create(Team("team-a", "gpus", 8)).ok());

  struct Case {
    v1::Queue queue;
    grpc::StatusCode code;
    const char* field;
  };
  v1::Queue negative_quota = Team("team-b", "gpus", -4);
  v1::Queue unknown_cohort = Team("team-b", "nope", 4);
  v1::Queue negative_limit = Team("team-b", "gpus", 4);
  (*negative_limit.mutable_borrowing_limit())["GPU"] = -1;
  v1::Queue limit_without_quota = Team("team-b", "gpus", 4);
  (*limit_without_quota.mutable_lending_limit())["CPU"] = 1;
  v1::Queue zero_weight = Team("team-b", "gpus", 4);
  zero_weight.set_weight(0);
  for (const Case& c : std::vector<Case>{
           {negative_quota, grpc::StatusCode::INVALID_ARGUMENT, "queue.nominal_quota[\"GPU\"]"},
           {unknown_cohort, grpc::StatusCode::NOT_FOUND, "queue.cohort"},
           {negative_limit, grpc::StatusCode::INVALID_ARGUMENT, "queue.borrowing_limit[\"GPU\"]"},
           {limit_without_quota, grpc::StatusCode::INVALID_ARGUMENT,
            "queue.lending_limit[\"CPU\"]"},
           {zero_weight, grpc::StatusCode::INVALID_ARGUMENT, "queue.weight"},
           {Team("team-a", "gpus", 2), grpc::StatusCode::ALREADY_EXISTS, "queue.name"},
       }) {
    const grpc::Status s = Create(c.queue);
    EXPECT_EQ(s.error_code(), c.code) << c.field << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.field));
  }
  EXPECT_THAT(Names(), ElementsAre("default", "team-a"));
  v1::GetQueueRequest get;
  get.set_name("team-a");
  v1::GetQueueResponse got;
  ASSERT_TRUE(cluster_->queues().GetQueue(cluster_->context().get(), get, &got).ok());
  EXPECT_EQ(got.queue().nominal_quota().at("GPU"), 8);  // the refused twin changed nothing
  // A cohort a queue names cannot go.
  v1::DeleteCohortRequest drop;
  drop.set_name("gpus");
  v1::DeleteCohortResponse dropped;
  EXPECT_EQ(cluster_->queues().DeleteCohort(cluster_->context().get(), drop, &dropped).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(QueueServiceTest, GroupsAndJobsNameAKnownQueueOrAreRefused) {
  ASSERT_TRUE(Create(Team("team-a", "", 8)).ok());
  v1::CreatePlacementGroupRequest group;
  group.set_request_id("in-team-a");
  group.set_queue("team-a");
  (*group.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  v1::CreatePlacementGroupResponse created;
  ASSERT_TRUE(
      cluster_->groups().CreatePlacementGroup(cluster_->context().get(), group, &created).ok());
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(created.placement_group_id());
  v1::GetPlacementGroupResponse got;
  ASSERT_TRUE(cluster_->groups().GetPlacementGroup(cluster_->context().get(), get, &got).ok());
  EXPECT_EQ(got.placement_group().queue(), "team-a");

  group.set_request_id("in-no-queue");
  group.set_queue("team-z");
  grpc::Status refused =
      cluster_->groups().CreatePlacementGroup(cluster_->context().get(), group, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("queue: no queue 'team-z'"));

  v1::CreatePlacementGroupsRequest batch;
  *batch.add_requests() = group;
  batch.mutable_requests(0)->set_queue("");
  batch.mutable_requests(0)->set_request_id("batch-0");
  *batch.add_requests() = group;
  batch.mutable_requests(1)->set_request_id("batch-1");
  v1::CreatePlacementGroupsResponse batched;
  refused = cluster_->groups().CreatePlacementGroups(cluster_->context().get(), batch, &batched);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("requests[1].queue"));
  v1::ListPlacementGroupsResponse groups;
  ASSERT_TRUE(cluster_->groups().ListPlacementGroups(cluster_->context().get(), {}, &groups).ok());
  EXPECT_EQ(groups.placement_groups_size(), 1);  // the refused batch made none

  v1::SubmitTrainJobRequest job;
  job.set_request_id("job-in-no-queue");
  job.mutable_spec()->set_queue("team-z");
  job.mutable_spec()->mutable_scaling_config()->set_num_workers(1);
  job.mutable_spec()->mutable_entrypoint()->mutable_builtin_trainer()->set_steps(1);
  v1::SubmitTrainJobResponse submitted;
  refused = cluster_->jobs().SubmitTrainJob(cluster_->context().get(), job, &submitted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("spec.queue"));
  v1::ListTrainJobsResponse jobs;
  ASSERT_TRUE(cluster_->jobs().ListTrainJobs(cluster_->context().get(), {}, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST_F(QueueServiceTest, AKilledHeadKeepsItsQueuesAndCohorts) {
  v1::CreateCohortRequest cohort;
  cohort.set_name("gpus");
  v1::CreateCohortResponse created;
  ASSERT_TRUE(cluster_->queues().CreateCohort(cluster_->context().get(), cohort, &created).ok());
  v1::Queue a = Team("team-a", "gpus", 8);
  (*a.mutable_borrowing_limit())["GPU"] = 4;
  a.set_weight(2);
  a.set_team("ml-research");
  ASSERT_TRUE(Create(a).ok());
  ASSERT_TRUE(Create(Team("team-b", "gpus", 8)).ok());
  v1::DeleteQueueRequest remove;
  remove.set_name("team-b");
  v1::DeleteQueueResponse removed;
  ASSERT_TRUE(cluster_->queues().DeleteQueue(cluster_->context().get(), remove, &removed).ok());
  v1::CreatePlacementGroupRequest group;
  group.set_request_id("waits-in-team-a");
  group.set_queue("team-a");
  (*group.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;  // no node: waits
  v1::CreatePlacementGroupResponse created_group;
  ASSERT_TRUE(cluster_->groups()
                  .CreatePlacementGroup(cluster_->context().get(), group, &created_group)
                  .ok());

  cluster_->RestartHead(SIGKILL);

  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(created_group.placement_group_id());
  v1::GetPlacementGroupResponse got;
  ASSERT_TRUE(cluster_->groups().GetPlacementGroup(cluster_->context().get(), get, &got).ok());
  EXPECT_EQ(got.placement_group().queue(), "team-a");

  const v1::ListQueuesResponse after = List();
  EXPECT_THAT(after.cohorts(), ElementsAre("gpus"));
  ASSERT_EQ(after.queues_size(), 2);
  const v1::Queue& kept = after.queues(1);
  EXPECT_EQ(kept.name(), "team-a");
  EXPECT_EQ(kept.cohort(), "gpus");
  EXPECT_EQ(kept.nominal_quota().at("GPU"), 8);
  EXPECT_EQ(kept.borrowing_limit().at("GPU"), 4);
  EXPECT_EQ(kept.weight(), 2);
  EXPECT_EQ(kept.team(), "ml-research");
}

}  // namespace
}  // namespace berth
