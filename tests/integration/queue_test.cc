// QueueService on a real berth-head (sqlite store): a queue with a bad quota,
// an unknown cohort or a negative limit is refused naming the field and
// nothing changes; a queue file is applied whole or not at all; queues,
// cohorts, usage and the order of waiting groups survive a head killed with
// SIGKILL; a group on the only node a pinned group can use yields it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "absl/strings/match.h"
#include "tests/integration/local_cluster.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LocalCluster;
using testing::WaitUntil;

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

// Creates `group` (a request); its id, "" if refused.
std::string CreateGroup(LocalCluster& cluster, const v1::CreatePlacementGroupRequest& group) {
  v1::CreatePlacementGroupResponse created;
  grpc::Status s = cluster.groups().CreatePlacementGroup(cluster.context().get(), group, &created);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return created.placement_group_id();
}

// A group in `queue` of one bundle of `gpus` GPUs; its id.
std::string CreateGroup(LocalCluster& cluster, const std::string& queue, double gpus,
                        const std::string& request_id) {
  v1::CreatePlacementGroupRequest group;
  group.set_request_id(request_id);
  group.set_queue(queue);
  (*group.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = gpus;
  return CreateGroup(cluster, group);
}

v1::PlacementGroupInfo GroupInfo(LocalCluster& cluster, const std::string& id) {
  v1::GetPlacementGroupRequest get;
  get.set_placement_group_id(id);
  v1::GetPlacementGroupResponse got;
  EXPECT_TRUE(cluster.groups().GetPlacementGroup(cluster.context().get(), get, &got).ok());
  return got.placement_group();
}

v1::PlacementGroupState StateOf(LocalCluster& cluster, const std::string& id) {
  return GroupInfo(cluster, id).state();
}

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
  EXPECT_EQ(GroupInfo(*cluster_, CreateGroup(*cluster_, group)).queue(), "team-a");
  v1::CreatePlacementGroupResponse created;

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

TEST_F(QueueServiceTest, AKilledHeadKeepsUsageAndPendingOrder) {
  cluster_->AddRaylet({"n0", 2, "A10G", 8, "32Gi"});
  ASSERT_TRUE(Create(Team("team-a", "", 2)).ok());
  const std::string running = CreateGroup(*cluster_, "team-a", 2, "running");
  ASSERT_TRUE(
      WaitUntil([&] { return StateOf(*cluster_, running) == v1::PLACEMENT_GROUP_STATE_CREATED; },
                std::chrono::seconds(10)));
  const std::string first = CreateGroup(*cluster_, "team-a", 2, "first");
  const std::string second = CreateGroup(*cluster_, "team-a", 1, "second");
  auto team_a = [&] {
    const v1::ListQueuesResponse list = List();
    for (const v1::Queue& q : list.queues()) {
      if (q.name() == "team-a") return q.status();
    }
    return v1::QueueStatus();
  };
  auto check = [&](const v1::QueueStatus& status) {
    EXPECT_EQ(status.usage().at("GPU"), 2);
    EXPECT_EQ(status.running(), 1u);
    EXPECT_EQ(status.pending(), 2u);
    ASSERT_EQ(status.pending_gangs_size(), 2);
    EXPECT_EQ(status.pending_gangs(0).placement_group_id(), first);
    EXPECT_EQ(status.pending_gangs(1).placement_group_id(), second);
    EXPECT_THAT(status.pending_gangs(1).reason(), HasSubstr("waiting for quota"));
  };
  // Once a pass has said why they wait.
  auto settled = [&] {
    return WaitUntil(
        [&] {
          const v1::QueueStatus status = team_a();
          return status.pending_gangs_size() == 2 &&
                 absl::StrContains(status.pending_gangs(1).reason(), "waiting for quota");
        },
        std::chrono::seconds(5));
  };
  ASSERT_TRUE(settled());
  check(team_a());

  cluster_->RestartHead(SIGKILL);
  ASSERT_TRUE(settled());
  check(team_a());
  // The room goes to the first in line, though the second would fit the
  // quota once the first is counted: it stays in line behind it.
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(running);
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(
      cluster_->groups().RemovePlacementGroup(cluster_->context().get(), remove, &removed).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return StateOf(*cluster_, first) == v1::PLACEMENT_GROUP_STATE_CREATED; },
                std::chrono::seconds(10)));
  EXPECT_EQ(StateOf(*cluster_, second), v1::PLACEMENT_GROUP_STATE_PENDING);
}

// Spared nodes on a real head: team-a, within its quota, fills every node,
// the one H100 node included (no group pinned to H100 was known, so
// nothing was spared). team-b, within its quota, asks for a group pinned to
// H100: team-a's group there is preempted ("spared nodes") and waits
// PENDING, though team-a borrows nothing; team-b's group is placed; team-a's
// other groups stay.
TEST_F(QueueServiceTest, AGroupOnTheOnlyNodeAPinnedGroupCanUseYieldsIt) {
  for (int i = 0; i < 7; ++i) cluster_->AddRaylet({"a10g-" + std::to_string(i), 1, "A10G"});
  cluster_->AddRaylet({"h100-0", 1, "H100"});
  v1::CreateCohortRequest cohort;
  cohort.set_name("org");
  v1::CreateCohortResponse created;
  ASSERT_TRUE(cluster_->queues().CreateCohort(cluster_->context().get(), cohort, &created).ok());
  ASSERT_TRUE(Create(Team("team-a", "org", 8)).ok());
  ASSERT_TRUE(Create(Team("team-b", "org", 8)).ok());
  std::vector<std::string> team_a;
  for (int i = 0; i < 8; ++i)
    team_a.push_back(CreateGroup(*cluster_, "team-a", 1, "a" + std::to_string(i)));
  auto node_of = [&](const std::string& id) {
    const v1::PlacementGroupInfo info = GroupInfo(*cluster_, id);
    return info.locations_size() == 1 ? info.locations(0).node_id() : std::string();
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const std::string& id : team_a) {
          if (StateOf(*cluster_, id) != v1::PLACEMENT_GROUP_STATE_CREATED) return false;
        }
        return true;
      },
      std::chrono::seconds(10)));
  std::string on_h100;
  for (const std::string& id : team_a) {
    if (node_of(id) == "h100-0") on_h100 = id;
  }
  ASSERT_FALSE(on_h100.empty());

  v1::CreatePlacementGroupRequest pinned;
  pinned.set_request_id("pinned");
  pinned.set_queue("team-b");
  v1::Bundle* bundle = pinned.add_bundles();
  (*bundle->mutable_resources()->mutable_amounts())["GPU"] = 1;
  v1::LabelSelectorRequirement* type = bundle->mutable_selector()->add_requirements();
  type->set_key("berth.io/accelerator-type");
  type->set_op(v1::LABEL_OPERATOR_IN);
  type->add_values("H100");
  const std::string b = CreateGroup(*cluster_, pinned);
  ASSERT_TRUE(WaitUntil([&] { return StateOf(*cluster_, b) == v1::PLACEMENT_GROUP_STATE_CREATED; },
                        std::chrono::seconds(10)));
  EXPECT_EQ(node_of(b), "h100-0");
  const v1::PlacementGroupInfo victim = GroupInfo(*cluster_, on_h100);
  EXPECT_EQ(victim.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_THAT(victim.preempted_by(), HasSubstr("of queue team-b (spared nodes)"));
  for (const std::string& id : team_a) {
    if (id == on_h100) continue;
    EXPECT_EQ(StateOf(*cluster_, id), v1::PLACEMENT_GROUP_STATE_CREATED) << id;
  }
}

TEST_F(QueueServiceTest, AQueueFileIsAppliedWholeOrNotAtAll) {
  v1::ApplyQueuesRequest apply;
  apply.add_cohorts("org");
  *apply.add_queues() = Team("team-a", "org", 4);
  *apply.add_queues() = Team("team-b", "elsewhere", 4);  // an unknown cohort
  v1::PriorityClass* high = apply.add_priority_classes();
  high->set_name("high");
  high->set_value(100);
  v1::ApplyQueuesResponse applied;
  grpc::Status refused = cluster_->queues().ApplyQueues(cluster_->context().get(), apply, &applied);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("queues[1].cohort"));
  EXPECT_THAT(Names(), ElementsAre("default"));
  EXPECT_TRUE(List().cohorts().empty());
  EXPECT_TRUE(List().priority_classes().empty());

  apply.mutable_queues(1)->set_cohort("org");
  ASSERT_TRUE(cluster_->queues().ApplyQueues(cluster_->context().get(), apply, &applied).ok());
  EXPECT_THAT(Names(), ElementsAre("default", "team-a", "team-b"));
  ASSERT_EQ(applied.config().priority_classes_size(), 1);
  // A group naming the class takes its value; an unknown class is refused.
  v1::CreatePlacementGroupRequest group;
  group.set_request_id("high-one");
  group.set_queue("team-a");
  group.set_priority_class("high");
  (*group.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  EXPECT_EQ(GroupInfo(*cluster_, CreateGroup(*cluster_, group)).priority(), 100);
  v1::CreatePlacementGroupResponse created;
  group.set_request_id("unknown-class");
  group.set_priority_class("urgent");
  refused = cluster_->groups().CreatePlacementGroup(cluster_->context().get(), group, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("priority_class: no priority class 'urgent'"));
  // Deleting a queue a live group names is refused; nothing changes.
  v1::DeleteQueueRequest remove;
  remove.set_name("team-a");
  v1::DeleteQueueResponse removed;
  refused = cluster_->queues().DeleteQueue(cluster_->context().get(), remove, &removed);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("team-a"));
  EXPECT_THAT(Names(), ElementsAre("default", "team-a", "team-b"));
}

}  // namespace
}  // namespace berth
