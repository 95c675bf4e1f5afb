// TrainJobServiceImpl served over loopback gRPC on a head's state and
// scheduler, with the train job controller started as the head starts it
// (HeadServer::Start) but no node registered, so a job's group waits
// PENDING and no raylet is called: what a client sees of submit, get,
// list, stop, logs and progress reports. Every call is UNAVAILABLE until the
// controller is started; a bad submission is refused naming its field and
// creates no job nor group; an unknown job is NOT_FOUND naming job_id; a
// retried submission is answered with the first job; a stopped job's group
// is removed; a team sees and touches only the jobs of its queues. Each wait
// is for a condition, with a deadline.
#include "scheduler/train_job_service.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/v1/head.grpc.pb.h"
#include "common/working_dir_package.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "queueing/queue_config.h"
#include "scheduler/scheduler.h"
#include "tests/unit/loopback_server.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr char kAdminToken[] = "cluster-token-for-the-test";
constexpr absl::Duration kDeadline = absl::Seconds(20);

// One CPU worker running the built-in trainer.
v1::SubmitTrainJobRequest Request(const std::string& request_id, const std::string& queue = "") {
  v1::SubmitTrainJobRequest request;
  request.set_request_id(request_id);
  v1::TrainJobSpec& spec = *request.mutable_spec();
  spec.set_name("test");
  spec.set_queue(queue);
  spec.mutable_scaling_config()->set_num_workers(1);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(100);
  return request;
}

// Its group was created and the job waits for it to be placed.
bool WaitingForPlacement(const v1::TrainJobInfo& info) {
  return info.state() == v1::TRAIN_JOB_STATE_PENDING &&
         absl::StartsWith(info.message(), "waiting for placement");
}
bool Stopped(const v1::TrainJobInfo& info) { return info.state() == v1::TRAIN_JOB_STATE_STOPPED; }

class TrainJobServiceTest : public ::testing::Test {
 protected:
  static HeadConfig Config() {
    HeadConfig config;
    config.cluster_token = kAdminToken;
    config.committer_threads = 2;
    return config;
  }

  void SetUp() override {
    scheduler_.Start(/*head_epoch=*/1);
    int port = 0;
    server_ = testing::ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::TrainJobService::NewStub(testing::LoopbackChannel(port));
  }

  // As HeadServer::Stop: the controller's pool first, then the scheduler.
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    if (jobs_) jobs_->Leave();
    scheduler_.Stop();
    state_.set_jobs(nullptr);
    jobs_.reset();
  }

  // As HeadServer::Start: the controller over the head's scheduler, each
  // job's record written to the head's state.
  void StartController() {
    TrainControllerConfig train = state_.config().train;
    train.worker_threads = 2;
    train.job.head_address = "127.0.0.1:1";  // never used: no job is placed
    train.job.cluster_token = kAdminToken;
    train.stage = [this](const v1::TrainJobRecord& record) { return state_.StageJob(record); };
    train.durable = [this](uint64_t seq) { state_.Durable(seq).IgnoreError(); };  // logged
    jobs_ = std::make_unique<TrainJobController>(&scheduler_, &raylets_, std::move(train));
    state_.set_jobs(jobs_.get());
  }

  // A call with a deadline, carrying `token` (the admin's by default).
  static std::unique_ptr<grpc::ClientContext> Call(const std::string& token = kAdminToken) {
    std::unique_ptr<grpc::ClientContext> context = testing::CallContext(kDeadline);
    context->AddMetadata("authorization", "Bearer " + token);
    return context;
  }

  grpc::Status Submit(const v1::SubmitTrainJobRequest& request, std::string* job_id,
                      const std::string& token = kAdminToken) {
    v1::SubmitTrainJobResponse response;
    grpc::Status s = stub_->SubmitTrainJob(Call(token).get(), request, &response);
    *job_id = response.job_id();
    return s;
  }

  grpc::Status Get(const std::string& job_id, v1::TrainJobInfo* info,
                   const std::string& token = kAdminToken) {
    v1::GetTrainJobRequest request;
    request.set_job_id(job_id);
    v1::GetTrainJobResponse response;
    grpc::Status s = stub_->GetTrainJob(Call(token).get(), request, &response);
    *info = response.job();
    return s;
  }

  grpc::Status Stop(const std::string& job_id, const std::string& token = kAdminToken) {
    v1::StopTrainJobRequest request;
    request.set_job_id(job_id);
    v1::StopTrainJobResponse response;
    return stub_->StopTrainJob(Call(token).get(), request, &response);
  }

  // The ids of the listed jobs, as listed (by submission time in ms: jobs
  // submitted within one ms come in no set order).
  std::vector<std::string> List(const std::string& token = kAdminToken) {
    v1::ListTrainJobsResponse response;
    EXPECT_TRUE(stub_->ListTrainJobs(Call(token).get(), {}, &response).ok());
    std::vector<std::string> ids;
    for (const v1::TrainJobInfo& job : response.jobs()) ids.push_back(job.job_id());
    return ids;
  }

  // Reads the job until `reached` holds of it; false after kDeadline.
  bool AwaitJob(const std::string& job_id,
                const std::function<bool(const v1::TrainJobInfo&)>& reached,
                v1::TrainJobInfo* info) {
    const absl::Time deadline = absl::Now() + kDeadline;
    while (true) {
      if (!Get(job_id, info).ok()) return false;
      if (reached(*info)) return true;
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // The logs streamed of the job (without follow: what there is now).
  grpc::Status Logs(const v1::StreamTrainJobLogsRequest& request, int* chunks) {
    std::unique_ptr<grpc::ClientContext> context = Call();
    std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
        stub_->StreamTrainJobLogs(context.get(), request);
    v1::LogChunk chunk;
    *chunks = 0;
    while (reader->Read(&chunk)) ++*chunks;
    return reader->Finish();
  }

  size_t Groups() {
    v1::ListPlacementGroupsResponse response;
    absl::MutexLock lock(&state_.mu);
    state_.groups.List({}, &response);
    return response.placement_groups_size();
  }

  // Adds queue `name`, granted to `team` ("" = any caller), with time
  // limits `default_s` and `max_s` for its jobs (0 = none).
  void AddQueue(const std::string& name, const std::string& team, int64_t default_s = 0,
                int64_t max_s = 0) {
    QueueInput input;
    input.name = name;
    input.nominal = {{"CPU", 4}};
    input.team = team;
    input.default_time_limit_s = default_s;
    input.max_time_limit_s = max_s;
    absl::StatusOr<QueueSpec> queue = QueueSpecFromInput(input, "queue");
    ASSERT_TRUE(queue.ok()) << queue.status();
    absl::MutexLock lock(&state_.mu);
    absl::StatusOr<QueueConfig> config = state_.groups.queue_config().WithQueue(*queue);
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_TRUE(state_.groups.Reconfigure(*std::move(config)).ok());
  }

  // A new token of `team`.
  std::string TeamToken(const std::string& team) {
    const TeamCredentials::Issued issued = TeamCredentials::Mint();
    state_.teams.Add(issued.digest, team);
    return issued.token;
  }

  HeadState state_{Config(), nullptr};
  RayletClients raylets_{absl::Seconds(2)};  // never called: no node is registered
  Scheduler scheduler_{&state_, &raylets_};
  TrainJobServiceImpl service_{&state_, &scheduler_, &raylets_};
  std::unique_ptr<TrainJobController> jobs_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TrainJobService::Stub> stub_;
};

// The controller is started in SetUp.
class StartedTrainJobServiceTest : public TrainJobServiceTest {
 protected:
  void SetUp() override {
    TrainJobServiceTest::SetUp();
    StartController();
  }
};

TEST_F(TrainJobServiceTest, EveryCallIsUnavailableUntilTheControllerIsStarted) {
  auto unavailable = [](const grpc::Status& s, const std::string& call) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << call << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("retry")) << call;
  };
  std::string id;
  unavailable(Submit(Request("submit-1"), &id), "SubmitTrainJob");
  EXPECT_THAT(id, IsEmpty());
  v1::TrainJobInfo info;
  unavailable(Get("job-00000000", &info), "GetTrainJob");
  v1::ListTrainJobsResponse listed;
  unavailable(stub_->ListTrainJobs(Call().get(), {}, &listed), "ListTrainJobs");
  unavailable(Stop("job-00000000"), "StopTrainJob");
  v1::ReportTrainProgressRequest report;
  report.set_job_id("job-00000000");
  v1::ReportTrainProgressResponse reported;
  unavailable(stub_->ReportTrainProgress(Call().get(), report, &reported), "ReportTrainProgress");
  v1::StreamTrainJobLogsRequest logs;
  logs.set_job_id("job-00000000");
  int chunks = 0;
  unavailable(Logs(logs, &chunks), "StreamTrainJobLogs");
  EXPECT_EQ(chunks, 0);
  EXPECT_EQ(Groups(), 0u);

  StartController();
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), {}, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);  // the refused submission made no job
}

TEST_F(StartedTrainJobServiceTest, ABadSubmissionNamesItsFieldAndCreatesNothing) {
  auto refused = [&](const v1::SubmitTrainJobRequest& request, grpc::StatusCode code,
                     const std::string& message) {
    std::string id;
    grpc::Status s = Submit(request, &id);
    EXPECT_EQ(s.error_code(), code) << message << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), StartsWith(message));
    EXPECT_THAT(id, IsEmpty());
  };
  v1::SubmitTrainJobRequest too_many = Request("bad-1");
  too_many.mutable_spec()->mutable_scaling_config()->set_num_workers(5000);
  refused(too_many, grpc::StatusCode::INVALID_ARGUMENT,
          "spec.scaling_config.num_workers: 5000 is not in 1..");
  refused(Request("bad-2", /*queue=*/"nobody"), grpc::StatusCode::NOT_FOUND,
          "spec.queue: no queue 'nobody'");
  refused(Request(/*request_id=*/""), grpc::StatusCode::INVALID_ARGUMENT, "request_id: required");
  v1::SubmitTrainJobRequest no_argv = Request("bad-3");
  no_argv.mutable_spec()->mutable_entrypoint()->mutable_command();
  refused(no_argv, grpc::StatusCode::INVALID_ARGUMENT, "spec.entrypoint.command.argv");

  // A working-directory package is checked by the service: its digest's
  // form, then that the head stores it.
  v1::SubmitTrainJobRequest packaged = Request("bad-4");
  v1::Entrypoint::Command& command =
      *packaged.mutable_spec()->mutable_entrypoint()->mutable_command();
  command.add_argv("python3");
  command.add_argv("train.py");
  command.set_working_dir_package("sha256:not-hex");
  refused(packaged, grpc::StatusCode::INVALID_ARGUMENT,
          "spec.entrypoint.command.working_dir_package: 'sha256:not-hex' is not sha256:");
  command.set_working_dir_package(DigestOf("never uploaded"));
  refused(packaged, grpc::StatusCode::FAILED_PRECONDITION,
          "spec.entrypoint.command.working_dir_package: package " + DigestOf("never uploaded") +
              " is not stored on the head (upload it first)");

  EXPECT_THAT(List(), IsEmpty());
  EXPECT_EQ(Groups(), 0u);
}

TEST_F(StartedTrainJobServiceTest, AnUnknownJobIsNotFoundNamingJobId) {
  v1::TrainJobInfo info;
  grpc::Status s = Get("job-nope", &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "job_id: no job 'job-nope'");
  s = Stop("job-nope");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "job_id: no job 'job-nope'");
  v1::StreamTrainJobLogsRequest logs;
  logs.set_job_id("job-nope");
  int chunks = 0;
  s = Logs(logs, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("job_id: "));
  EXPECT_EQ(chunks, 0);
  v1::ReportTrainProgressRequest report;
  report.set_job_id("job-nope");
  v1::ReportTrainProgressResponse reported;
  s = stub_->ReportTrainProgress(Call().get(), report, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("job_id: "));
  EXPECT_THAT(List(), IsEmpty());
}

TEST_F(StartedTrainJobServiceTest, ASubmittedJobIsListedAndWaitsForItsPlacement) {
  std::string id;
  ASSERT_TRUE(Submit(Request("submit-1"), &id).ok());
  EXPECT_THAT(id, StartsWith("job-"));
  EXPECT_THAT(List(), ElementsAre(id));
  v1::TrainJobInfo info;
  ASSERT_TRUE(AwaitJob(id, WaitingForPlacement, &info))
      << "the job never waited for its group: " << info.DebugString();
  EXPECT_EQ(info.job_id(), id);
  EXPECT_EQ(info.spec().name(), "test");
  EXPECT_EQ(info.spec().scaling_config().num_workers(), 1u);
  EXPECT_GT(info.submitted_unix_ms(), 0);
  EXPECT_EQ(info.failures(), 0u);
  EXPECT_THAT(info.workers(), IsEmpty());  // nothing started: no node
  // Its group is the head's, waiting too.
  ASSERT_THAT(info.placement_group_id(), Not(IsEmpty()));
  absl::StatusOr<v1::PlacementGroupInfo> group =
      scheduler_.GetGroup(info.placement_group_id()).info;
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(Groups(), 1u);

  // Listed by its state, and not by another.
  v1::ListTrainJobsRequest pending;
  pending.add_states(v1::TRAIN_JOB_STATE_PENDING);
  v1::ListTrainJobsResponse listed;
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), pending, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).job_id(), id);
  v1::ListTrainJobsRequest running;
  running.add_states(v1::TRAIN_JOB_STATE_RUNNING);
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), running, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
  // And by its queue (it names none: the default one).
  v1::ListTrainJobsRequest by_queue;
  by_queue.set_queue("default");
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), by_queue, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
  by_queue.set_queue("team-a");
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), by_queue, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);

  // No worker runs yet: a log stream without follow ends with nothing; a
  // rank past num_workers is refused naming it.
  v1::StreamTrainJobLogsRequest logs;
  logs.set_job_id(id);
  int chunks = -1;
  EXPECT_TRUE(Logs(logs, &chunks).ok());
  EXPECT_EQ(chunks, 0);
  logs.set_attempt(1);  // one that has not started
  grpc::Status s = Logs(logs, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("attempt: 1 has not started"));
  logs.clear_attempt();
  logs.set_rank(1);
  s = Logs(logs, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("rank: 1 >= num_workers"));
}

TEST_F(StartedTrainJobServiceTest, ARetriedSubmissionIsAnsweredWithTheFirstJob) {
  std::string first;
  ASSERT_TRUE(Submit(Request("submit-1"), &first).ok());
  std::string again;
  ASSERT_TRUE(Submit(Request("submit-1"), &again).ok());
  EXPECT_EQ(again, first);
  v1::TrainJobInfo info;
  ASSERT_TRUE(AwaitJob(first, WaitingForPlacement, &info)) << info.DebugString();
  ASSERT_TRUE(Submit(Request("submit-1"), &again).ok());
  EXPECT_EQ(again, first);
  // The same request id for another job is refused, naming it.
  v1::SubmitTrainJobRequest other = Request("submit-1");
  other.mutable_spec()->mutable_scaling_config()->set_num_workers(2);
  grpc::Status s = Submit(other, &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("request_id: 'submit-1' was used for a different job"));
  // One job, one group; another request id is another job.
  EXPECT_THAT(List(), ElementsAre(first));
  EXPECT_EQ(Groups(), 1u);
  std::string second;
  ASSERT_TRUE(Submit(Request("submit-2"), &second).ok());
  EXPECT_NE(second, first);
  EXPECT_THAT(List(), UnorderedElementsAre(first, second));
}

TEST_F(StartedTrainJobServiceTest, AJobNamingAStoredPackageIsAccepted) {
  const std::string bytes = "a working directory, packed";
  const std::string digest = DigestOf(bytes);
  ASSERT_TRUE(state_.packages.Put(digest, bytes, absl::Now()).ok());
  v1::SubmitTrainJobRequest request = Request("submit-1");
  v1::Entrypoint::Command& command =
      *request.mutable_spec()->mutable_entrypoint()->mutable_command();
  command.add_argv("python3");
  command.add_argv("train.py");
  command.set_working_dir_package(digest);
  std::string id;
  grpc::Status s = Submit(request, &id);
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::TrainJobInfo info;
  ASSERT_TRUE(Get(id, &info).ok());
  EXPECT_EQ(info.spec().entrypoint().command().working_dir_package(), digest);
}

TEST_F(StartedTrainJobServiceTest, AStoppedJobEndsStoppedWithItsGroupRemoved) {
  std::string id;
  ASSERT_TRUE(Submit(Request("submit-1"), &id).ok());
  v1::TrainJobInfo info;
  ASSERT_TRUE(AwaitJob(id, WaitingForPlacement, &info)) << info.DebugString();
  const std::string group = info.placement_group_id();
  ASSERT_TRUE(Stop(id).ok());
  ASSERT_TRUE(AwaitJob(id, Stopped, &info)) << "the job did not stop: " << info.DebugString();
  EXPECT_GT(info.ended_unix_ms(), 0);
  EXPECT_EQ(info.failures(), 0u);
  absl::StatusOr<v1::PlacementGroupInfo> removed = scheduler_.GetGroup(group).info;
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->state(), v1::PLACEMENT_GROUP_STATE_REMOVED);
  // Stopping it again is OK and changes nothing.
  EXPECT_TRUE(Stop(id).ok());
  ASSERT_TRUE(Get(id, &info).ok());
  EXPECT_EQ(info.state(), v1::TRAIN_JOB_STATE_STOPPED);
  v1::ListTrainJobsRequest stopped;
  stopped.add_states(v1::TRAIN_JOB_STATE_STOPPED);
  v1::ListTrainJobsResponse listed;
  ASSERT_TRUE(stub_->ListTrainJobs(Call().get(), stopped, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).job_id(), id);
}

TEST_F(StartedTrainJobServiceTest, AProgressReportIsCheckedByFieldAndShownOnTheJob) {
  std::string id;
  ASSERT_TRUE(Submit(Request("submit-1"), &id).ok());
  auto report = [&](const v1::ReportTrainProgressRequest& request) {
    v1::ReportTrainProgressResponse response;
    return stub_->ReportTrainProgress(Call().get(), request, &response);
  };
  v1::ReportTrainProgressRequest no_job;
  no_job.set_step(7);
  grpc::Status s = report(no_job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "job_id: required");
  v1::ReportTrainProgressRequest bad_key;
  bad_key.set_job_id(id);
  bad_key.set_step(7);
  (*bad_key.mutable_metrics())[""] = 1;
  s = report(bad_key);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("metrics key: required"));
  v1::ReportTrainProgressRequest too_many;
  too_many.set_job_id(id);
  too_many.set_step(7);
  for (int i = 0; i < 65; ++i) (*too_many.mutable_metrics())[absl::StrCat("m", i)] = i;
  s = report(too_many);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("metrics: 65 entries, at most 64"));
  v1::TrainJobInfo info;
  ASSERT_TRUE(Get(id, &info).ok());
  EXPECT_EQ(info.last_step(), 0u);  // nothing of the refused reports
  EXPECT_THAT(info.last_metrics(), IsEmpty());

  v1::ReportTrainProgressRequest good;
  good.set_job_id(id);
  good.set_step(7);
  good.set_loss(0.5);
  (*good.mutable_metrics())["accuracy"] = 0.9;
  ASSERT_TRUE(report(good).ok());
  ASSERT_TRUE(Get(id, &info).ok());
  EXPECT_EQ(info.last_step(), 7u);
  EXPECT_EQ(info.last_loss(), 0.5);
  EXPECT_EQ(info.last_metrics().at("accuracy"), 0.9);
}

TEST_F(StartedTrainJobServiceTest, ATeamSeesAndStopsOnlyTheJobsOfItsQueues) {
  AddQueue("queue-a", "team-a");
  AddQueue("queue-b", "team-b");
  const std::string team_a = TeamToken("team-a");
  std::string job_a;
  ASSERT_TRUE(Submit(Request("submit-a", "queue-a"), &job_a, team_a).ok());
  std::string job_b;
  ASSERT_TRUE(Submit(Request("submit-b", "queue-b"), &job_b).ok());  // the admin's

  // Not to another team's queue: refused naming spec.queue, no job made.
  std::string id;
  grpc::Status s = Submit(Request("submit-a2", "queue-b"), &id, team_a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), StartsWith("spec.queue: queue 'queue-b' is granted to team"));
  EXPECT_THAT(List(), UnorderedElementsAre(job_a, job_b));

  EXPECT_THAT(List(team_a), ElementsAre(job_a));
  v1::TrainJobInfo info;
  EXPECT_TRUE(Get(job_a, &info, team_a).ok());
  s = Get(job_b, &info, team_a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), StartsWith("job_id: queue 'queue-b'"));
  s = Stop(job_b, team_a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), StartsWith("job_id: queue 'queue-b'"));
  // An unknown job is NOT_FOUND for a team too.
  EXPECT_EQ(Get("job-nope", &info, team_a).error_code(), grpc::StatusCode::NOT_FOUND);
  // Progress reports are the trainer's (the cluster token's), not a team's.
  v1::ReportTrainProgressRequest report;
  report.set_job_id(job_a);
  report.set_step(3);
  v1::ReportTrainProgressResponse reported;
  s = stub_->ReportTrainProgress(Call(team_a).get(), report, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), StartsWith("ReportTrainProgress: team 'team-a'"));
  ASSERT_TRUE(Get(job_a, &info).ok());
  EXPECT_EQ(info.last_step(), 0u);  // the refused report changed nothing

  // Job a stops for its team. Job b, whose stop was refused before, is not
  // stopped: a stop asked of it then would have ended it by now.
  ASSERT_TRUE(Stop(job_a, team_a).ok());
  ASSERT_TRUE(AwaitJob(job_a, Stopped, &info)) << info.DebugString();
  ASSERT_TRUE(Get(job_b, &info).ok());
  EXPECT_EQ(info.state(), v1::TRAIN_JOB_STATE_PENDING);
}

TEST_F(StartedTrainJobServiceTest, AQueuesTimeLimitsAreTheDefaultAndTheMostAJobGets) {
  AddQueue("short", "", /*default_s=*/600, /*max_s=*/3600);
  std::string id;
  ASSERT_TRUE(Submit(Request("submit-default", "short"), &id).ok());
  v1::TrainJobInfo info;
  ASSERT_TRUE(AwaitJob(id, WaitingForPlacement, &info));
  EXPECT_EQ(info.spec().time_limit_s(), 600);  // the queue's default
  v1::SubmitTrainJobRequest longer = Request("submit-long", "short");
  longer.mutable_spec()->set_time_limit_s(7200);
  grpc::Status refused = Submit(longer, &id);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(),
            "spec.time_limit_s: 7200 s is above queue short's max_time_limit_s (3600 s)");
  EXPECT_EQ(List().size(), 1u);  // nothing made of it
  v1::SubmitTrainJobRequest within = Request("submit-within", "short");
  within.mutable_spec()->set_time_limit_s(3600);
  EXPECT_TRUE(Submit(within, &id).ok());
}

}  // namespace
}  // namespace berth
