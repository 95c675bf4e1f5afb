// Team credentials on a real berth-head with a cluster token: the admin
// issues a token bound to a team (QueueService.IssueTeamToken, `berth
// credentials --team`). With team A's token, submitting to team B's queue,
// stopping or removing B's job or group, and changing queues are refused
// with PERMISSION_DENIED naming the queue (or the method) and change
// nothing; listing shows only A's; a revoked token is refused; tokens
// survive a head killed with SIGKILL.
#include <signal.h>

#include "auth/cluster_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

class TeamCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(100, std::vector<std::string>{}, "127.0.0.1",
                                              /*with_token=*/true);
    cluster_->AddRaylet({"n0", 4, "A10G", 8, "32Gi"});
    for (const char* team : {"team-a", "team-b"}) {
      v1::CreateQueueRequest request;
      request.mutable_queue()->set_name(team);
      request.mutable_queue()->set_team(team);
      (*request.mutable_queue()->mutable_nominal_quota())["GPU"] = 2;
      v1::CreateQueueResponse response;
      ASSERT_TRUE(
          cluster_->queues().CreateQueue(cluster_->context().get(), request, &response).ok());
    }
    a_ = Issue("team-a");
    b_ = Issue("team-b");
  }
  std::string Issue(const std::string& team) {
    v1::IssueTeamTokenRequest request;
    request.set_team(team);
    v1::IssueTeamTokenResponse response;
    grpc::Status s =
        cluster_->queues().IssueTeamToken(cluster_->context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.token();
  }
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    std::unique_ptr<grpc::ClientContext> context = Context();
    AttachClusterToken(context.get(), token);
    return context;
  }
  grpc::Status CreateGroup(const std::string& token, const std::string& queue,
                           const std::string& request_id, std::string* id = nullptr) {
    v1::CreatePlacementGroupRequest request;
    request.set_request_id(request_id);
    request.set_queue(queue);
    (*request.add_bundles()->mutable_resources()->mutable_amounts())["GPU"] = 1;
    v1::CreatePlacementGroupResponse response;
    grpc::Status s = cluster_->groups().CreatePlacementGroup(As(token).get(), request, &response);
    if (id != nullptr) *id = response.placement_group_id();
    return s;
  }
  std::vector<std::string> Groups(const std::string& token) {
    v1::ListPlacementGroupsResponse response;
    EXPECT_TRUE(cluster_->groups().ListPlacementGroups(As(token).get(), {}, &response).ok());
    std::vector<std::string> ids;
    for (const v1::PlacementGroupInfo& g : response.placement_groups())
      ids.push_back(g.placement_group_id());
    return ids;
  }
  grpc::Status SubmitJob(const std::string& token, const std::string& queue, std::string* id) {
    v1::SubmitTrainJobRequest request;
    request.set_request_id("submit-" + queue + token.substr(0, 6));
    request.mutable_spec()->set_name("sleep");
    request.mutable_spec()->set_queue(queue);
    request.mutable_spec()->mutable_scaling_config()->set_num_workers(1);
    for (const char* a : {"/bin/sh", "-c", "sleep 30"})
      request.mutable_spec()->mutable_entrypoint()->mutable_command()->add_argv(a);
    v1::SubmitTrainJobResponse response;
    grpc::Status s = cluster_->jobs().SubmitTrainJob(As(token).get(), request, &response);
    *id = response.job_id();
    return s;
  }
  std::vector<std::string> Jobs(const std::string& token) {
    v1::ListTrainJobsResponse response;
    EXPECT_TRUE(cluster_->jobs().ListTrainJobs(As(token).get(), {}, &response).ok());
    std::vector<std::string> ids;
    for (const v1::TrainJobInfo& j : response.jobs()) ids.push_back(j.job_id());
    return ids;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string a_, b_;
};

TEST_F(TeamCredentialsTest, ATeamTokenReachesOnlyTheQueuesGrantedToItsTeam) {
  const std::string admin = cluster_->token();
  std::string a_group, b_group;
  ASSERT_TRUE(CreateGroup(a_, "team-a", "a-1", &a_group).ok());
  ASSERT_TRUE(CreateGroup(b_, "team-b", "b-1", &b_group).ok());

  // Submitting to the other team's queue: refused naming it, nothing made.
  grpc::Status s = CreateGroup(a_, "team-b", "a-2");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("queue: queue 'team-b' is granted to team 'team-b'"));
  EXPECT_EQ(Groups(admin).size(), 2u);
  std::string job;
  s = SubmitJob(a_, "team-b", &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.queue: queue 'team-b'"));
  EXPECT_TRUE(Jobs(admin).empty());

  // Each team lists only its own; the admin lists all.
  EXPECT_THAT(Groups(a_), ::testing::ElementsAre(a_group));
  EXPECT_THAT(Groups(b_), ::testing::ElementsAre(b_group));
  std::string a_job, b_job;
  s = SubmitJob(a_, "team-a", &a_job);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = SubmitJob(b_, "team-b", &b_job);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Jobs(a_), ::testing::ElementsAre(a_job));
  EXPECT_EQ(Jobs(admin).size(), 2u);

  // Watching, stopping or removing the other team's: refused, unchanged.
  v1::GetTrainJobRequest get;
  get.set_job_id(b_job);
  v1::GetTrainJobResponse got;
  s = cluster_->jobs().GetTrainJob(As(a_).get(), get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::StopTrainJobRequest stop;
  stop.set_job_id(b_job);
  stop.set_request_id("stop-b");
  v1::StopTrainJobResponse stopped;
  s = cluster_->jobs().StopTrainJob(As(a_).get(), stop, &stopped);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id: queue 'team-b'"));
  ASSERT_TRUE(cluster_->jobs().GetTrainJob(As(b_).get(), get, &got).ok());
  EXPECT_NE(got.job().state(), v1::TRAIN_JOB_STATE_STOPPED);
  v1::StreamTrainJobLogsRequest logs;
  logs.set_job_id(b_job);
  v1::LogChunk chunk;
  auto logs_context = As(a_);
  auto reader = cluster_->jobs().StreamTrainJobLogs(logs_context.get(), logs);
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(b_group);
  v1::RemovePlacementGroupResponse removed;
  s = cluster_->groups().RemovePlacementGroup(As(a_).get(), remove, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("placement_group_id: queue 'team-b'"));
  v1::GetPlacementGroupRequest get_group;
  get_group.set_placement_group_id(b_group);
  v1::GetPlacementGroupResponse group;
  EXPECT_EQ(cluster_->groups().GetPlacementGroup(As(a_).get(), get_group, &group).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(cluster_->groups().GetPlacementGroup(As(b_).get(), get_group, &group).ok());
  EXPECT_NE(group.placement_group().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  v1::RemovePlacementGroupsRequest remove_many;
  remove_many.set_request_id("rm-many");
  remove_many.add_placement_group_ids(a_group);
  remove_many.add_placement_group_ids(b_group);
  v1::RemovePlacementGroupsResponse removed_many;
  s = cluster_->groups().RemovePlacementGroups(As(a_).get(), remove_many, &removed_many);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("placement_group_ids[1]: queue 'team-b'"));
  for (const std::string& id : {a_group, b_group}) {  // neither was removed
    get_group.set_placement_group_id(id);
    ASSERT_TRUE(cluster_->groups().GetPlacementGroup(As(admin).get(), get_group, &group).ok());
    EXPECT_NE(group.placement_group().state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  }

  // Its own: stopped and removed.
  v1::StopTrainJobRequest stop_own;
  stop_own.set_job_id(a_job);
  stop_own.set_request_id("stop-a");
  EXPECT_TRUE(cluster_->jobs().StopTrainJob(As(a_).get(), stop_own, &stopped).ok());
  remove.set_placement_group_id(a_group);
  EXPECT_TRUE(cluster_->groups().RemovePlacementGroup(As(a_).get(), remove, &removed).ok());
}

TEST_F(TeamCredentialsTest, OnlyTheAdminManagesQueuesAndCredentials) {
  v1::CreateQueueRequest create;
  create.mutable_queue()->set_name("team-a-big");
  (*create.mutable_queue()->mutable_nominal_quota())["GPU"] = 4;
  v1::CreateQueueResponse created;
  grpc::Status s = cluster_->queues().CreateQueue(As(a_).get(), create, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("CreateQueue: team 'team-a' credentials may not call it"));
  v1::DeleteQueueRequest remove;
  remove.set_name("team-b");
  v1::DeleteQueueResponse removed;
  EXPECT_EQ(cluster_->queues().DeleteQueue(As(a_).get(), remove, &removed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::IssueTeamTokenRequest issue;
  issue.set_team("team-b");
  v1::IssueTeamTokenResponse issued;
  EXPECT_EQ(cluster_->queues().IssueTeamToken(As(a_).get(), issue, &issued).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Reading the queues is allowed; they are unchanged.
  v1::ListQueuesResponse queues;
  ASSERT_TRUE(cluster_->queues().ListQueues(As(a_).get(), {}, &queues).ok());
  EXPECT_EQ(queues.queues_size(), 3);  // default, team-a, team-b
  // A node's methods and a trainer's report are not a team's either.
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_node_id("n0");
  v1::HeartbeatResponse beat;
  EXPECT_EQ(cluster_->nodes().Heartbeat(As(a_).get(), heartbeat, &beat).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::ReportTrainProgressRequest progress;
  progress.set_job_id("job-x");
  v1::ReportTrainProgressResponse reported;
  EXPECT_EQ(cluster_->jobs().ReportTrainProgress(As(a_).get(), progress, &reported).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A bad team name names the field.
  issue.set_team("no spaces allowed");
  s = cluster_->queues().IssueTeamToken(cluster_->context().get(), issue, &issued);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("team"));
}

TEST_F(TeamCredentialsTest, ARevokedTokenIsRefusedAndTokensSurviveAKilledHead) {
  ASSERT_TRUE(CreateGroup(a_, "team-a", "a-1").ok());
  cluster_->RestartHead(SIGKILL);
  ASSERT_TRUE(CreateGroup(a_, "team-a", "a-2").ok());
  EXPECT_EQ(CreateGroup(a_, "team-b", "a-3").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::RevokeTeamTokensRequest revoke;
  revoke.set_team("team-a");
  v1::RevokeTeamTokensResponse revoked;
  ASSERT_TRUE(
      cluster_->queues().RevokeTeamTokens(cluster_->context().get(), revoke, &revoked).ok());
  EXPECT_EQ(revoked.revoked(), 1u);
  EXPECT_EQ(CreateGroup(a_, "team-a", "a-4").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  cluster_->RestartHead(SIGKILL);
  EXPECT_EQ(CreateGroup(a_, "team-a", "a-5").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(CreateGroup(b_, "team-b", "b-1").ok());
}

}  // namespace
}  // namespace berth::testing
