// TrainJobController with a fake head (PlacementGroupHost) whose groups
// never get placed, so no raylet is called: submissions are checked (errors
// name the field, nothing is created), a resubmission is answered with the
// first job, and a pending job stops (its group removed first). Each wait
// is for the job to reach a state, with a deadline.
#include "train/train_job_controller.h"

#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr absl::Duration kDeadline = absl::Seconds(20);

// The head's groups as the controller sees them: each created group waits
// PENDING for resources; removed ones are gone. No node is alive.
class FakeGroups final : public PlacementGroupHost {
 public:
  // The head knows no queue "missing".
  absl::Status CheckJobGroup(v1::TrainJobSpec* spec) override {
    if (spec->queue() == "missing")
      return absl::InvalidArgumentError("spec.queue: no queue 'missing'");
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> CreateGroup(PlacementGroupSpec spec,
                                          const v1::CreatePlacementGroupRequest& meta) override {
    absl::MutexLock lock(&mu_);
    const std::string id = absl::StrCat("pg-", created_.size());
    created_[id] = meta;
    bundles_[id] = spec.bundles().size();
    return id;
  }
  GroupSnapshot GetGroup(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    GroupSnapshot snapshot{
        id, absl::NotFoundError(absl::StrCat("placement_group_id: no placement group '", id, "'")),
        ++reads_};
    if (created_.count(id) == 0 || removed_.count(id) > 0) return snapshot;
    v1::PlacementGroupInfo info;
    info.set_placement_group_id(id);
    info.set_state(v1::PLACEMENT_GROUP_STATE_PENDING);
    info.set_pending_reason("waiting for resources: 0 of 2 GPUs free");
    for (size_t b = 0; b < bundles_.at(id); ++b) info.add_bundles();
    snapshot.info = std::move(info);
    return snapshot;
  }
  void RemoveGroup(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    removed_.insert(id);
  }
  absl::Status LetGo(const std::string&) override { return absl::OkStatus(); }
  void GroupCheckpointed(const std::string&) override {}
  std::string RayletAddress(const std::string&) override { return ""; }
  void BundleNotOnNode(const std::string&, const std::string&, uint32_t) override {}

  std::map<std::string, v1::CreatePlacementGroupRequest> created() {
    absl::MutexLock lock(&mu_);
    return created_;
  }
  std::set<std::string> removed() {
    absl::MutexLock lock(&mu_);
    return removed_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, v1::CreatePlacementGroupRequest> created_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> bundles_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> removed_ ABSL_GUARDED_BY(mu_);
  uint64_t reads_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::SubmitTrainJobRequest Request(const std::string& request_id, int workers = 2) {
  v1::SubmitTrainJobRequest request;
  request.set_request_id(request_id);
  v1::TrainJobSpec& spec = *request.mutable_spec();
  spec.set_name("test");
  spec.mutable_scaling_config()->set_num_workers(workers);
  spec.mutable_scaling_config()->set_use_gpu(true);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(100);
  return request;
}

v1::TrainJobInfo InfoOf(const TrainJobController& controller, const std::string& job_id) {
  v1::TrainJobInfo info;
  EXPECT_TRUE(controller.Get(job_id, &info).ok());
  return info;
}

// Polls the job until `reached` holds of it; false after kDeadline.
bool AwaitJob(const TrainJobController& controller, const std::string& job_id,
              const std::function<bool(const v1::TrainJobInfo&)>& reached) {
  const absl::Time deadline = absl::Now() + kDeadline;
  while (!reached(InfoOf(controller, job_id))) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

bool Stopped(const v1::TrainJobInfo& info) { return info.state() == v1::TRAIN_JOB_STATE_STOPPED; }
// Its group was created and the job waits for it to be placed.
bool WaitingForPlacement(const v1::TrainJobInfo& info) {
  return absl::StartsWith(info.message(), "waiting for placement");
}

class TrainJobControllerTest : public ::testing::Test {
 protected:
  TrainControllerConfig Config(size_t max_active_jobs = 1000) {
    TrainControllerConfig config;
    config.worker_threads = 2;
    config.max_active_jobs = max_active_jobs;
    config.max_name_length = 16;
    config.stage = [this](const v1::TrainJobRecord& record) {
      absl::MutexLock lock(&mu_);
      records_.push_back(record);
      return records_.size();
    };
    // Writes of a report of step kHeldStep wait while writes are held.
    config.durable = [this](uint64_t seq) {
      absl::MutexLock lock(&mu_);
      if (records_.at(seq - 1).info().last_step() != kHeldStep) return;
      ++held_writes_;
      mu_.Await(absl::Condition(
          +[](bool* hold) { return !*hold; }, &hold_writes_));
      --held_writes_;
    };
    return config;
  }

  // Waits until the job waits for its group's placement, and says why.
  void AwaitWaitingForPlacement(const std::string& job_id) {
    ASSERT_TRUE(AwaitJob(controller_, job_id, WaitingForPlacement))
        << "the job never waited for its group: " << Get(job_id).DebugString();
  }

  // The last record of the job the controller persisted.
  std::optional<v1::TrainJobRecord> LastRecord(const std::string& job_id) {
    absl::MutexLock lock(&mu_);
    for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
      if (it->info().job_id() == job_id) return *it;
    }
    return std::nullopt;
  }

  v1::TrainJobInfo Get(const std::string& job_id) { return InfoOf(controller_, job_id); }

  static constexpr int64_t kHeldStep = 42;
  absl::Mutex mu_;
  std::vector<v1::TrainJobRecord> records_ ABSL_GUARDED_BY(mu_);
  bool hold_writes_ ABSL_GUARDED_BY(mu_) = false;
  int held_writes_ ABSL_GUARDED_BY(mu_) = 0;
  FakeGroups groups_;
  RayletClients raylets_{absl::Seconds(1)};  // never called: no group is placed
  TrainJobController controller_{&groups_, &raylets_, Config()};
};

TEST_F(TrainJobControllerTest, BadSubmissionsNameTheFieldAndCreateNothing) {
  auto refused = [&](const std::function<void(v1::SubmitTrainJobRequest*)>& change,
                     const std::string& field) {
    v1::SubmitTrainJobRequest request = Request("bad");
    change(&request);
    absl::StatusOr<std::string> id = controller_.Submit(request);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(id.status().message()), StartsWith(field)) << id.status();
  };
  refused([](auto* r) { r->clear_request_id(); }, "request_id: required");
  refused([](auto* r) { r->mutable_spec()->set_name(std::string(17, 'n')); },
          "spec.name: 17 bytes; at most 16");
  refused([](auto* r) { r->mutable_spec()->set_storage_path(std::string(1025, 'p')); },
          "spec.storage_path");
  refused([](auto* r) { r->mutable_spec()->set_time_limit_s(-1); }, "spec.time_limit_s");
  refused([](auto* r) { r->mutable_spec()->mutable_failure_config()->set_progress_timeout_s(-1); },
          "spec.failure_config.progress_timeout_s: -1 is negative");
  refused([](auto* r) { r->mutable_spec()->set_stop_grace_period_s(601); },
          "spec.stop_grace_period_s: 601 is not within 0 and 600 (the head's "
          "--max-stop-grace-period-s)");
  refused([](auto* r) { r->mutable_spec()->set_stop_grace_period_s(-1); },
          "spec.stop_grace_period_s: -1");
  refused([](auto* r) { r->mutable_spec()->mutable_failure_config()->set_max_failures(-2); },
          "spec.failure_config.max_failures");
  refused([](auto* r) { r->mutable_spec()->mutable_scaling_config()->set_num_workers(4097); },
          "spec.scaling_config.num_workers: 4097 is not in 1..4096");
  refused([](auto* r) { r->mutable_spec()->mutable_scaling_config()->set_min_workers(5); },
          "spec.scaling_config.min_workers");
  refused(
      [](auto* r) {
        r->mutable_spec()->mutable_entrypoint()->mutable_builtin_trainer()->set_model("gpt");
      },
      "spec.entrypoint.builtin_trainer.model");
  refused([](auto* r) { r->mutable_spec()->mutable_entrypoint()->mutable_command(); },
          "spec.entrypoint.command.argv");
  refused(
      [](auto* r) {
        v1::LabelSelectorRequirement* req =
            r->mutable_spec()->mutable_scaling_config()->add_label_selector()->add_requirements();
        req->set_key("zone");
        req->set_op(v1::LABEL_OPERATOR_IN);  // with no values
      },
      "spec.scaling_config.label_selector[0].requirements[0].values");
  // What the head would refuse of its group is refused at submission.
  refused([](auto* r) { r->mutable_spec()->set_queue("missing"); }, "spec.queue: no queue");
  EXPECT_THAT(groups_.created(), IsEmpty());
  v1::ListTrainJobsResponse listed;
  controller_.List({}, &listed);
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(TrainJobControllerTest, AResubmissionIsAnsweredWithTheFirstJob) {
  const std::string id = controller_.Submit(Request("submit-1")).value();
  EXPECT_EQ(controller_.Submit(Request("submit-1")).value(), id);
  AwaitWaitingForPlacement(id);
  EXPECT_EQ(controller_.Submit(Request("submit-1")).value(), id);
  // The same request id for another job is refused, naming it.
  absl::StatusOr<std::string> other = controller_.Submit(Request("submit-1", /*workers=*/3));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()), StartsWith("request_id: 'submit-1'"));
  // One job, one group.
  v1::ListTrainJobsResponse listed;
  controller_.List({}, &listed);
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).job_id(), id);
  ASSERT_EQ(groups_.created().size(), 1u);
  const v1::CreatePlacementGroupRequest meta = groups_.created().begin()->second;
  EXPECT_EQ(meta.job_id(), id);
  EXPECT_EQ(meta.request_id(), id + "/pg");
}

// Unset, num_workers is Ray's default: one worker, shown as 1; a retry
// that says 1 is the same job.
TEST_F(TrainJobControllerTest, NoNumWorkersIsOneWorker) {
  const std::string id = controller_.Submit(Request("submit-1", /*workers=*/0)).value();
  EXPECT_EQ(Get(id).spec().scaling_config().num_workers(), 1u);
  EXPECT_EQ(controller_.Submit(Request("submit-1", /*workers=*/1)).value(), id);
  AwaitWaitingForPlacement(id);
  ASSERT_EQ(groups_.created().size(), 1u);
  EXPECT_EQ(LastRecord(id)->info().spec().scaling_config().num_workers(), 1u);
}

TEST_F(TrainJobControllerTest, APendingJobSaysWhyAndStopsWithItsGroupRemoved) {
  const std::string id = controller_.Submit(Request("submit-1")).value();
  AwaitWaitingForPlacement(id);
  v1::TrainJobInfo pending = Get(id);
  EXPECT_EQ(pending.state(), v1::TRAIN_JOB_STATE_PENDING);
  EXPECT_THAT(pending.message(), HasSubstr("waiting for resources: 0 of 2 GPUs free"));
  const std::string group = pending.placement_group_id();
  EXPECT_EQ(group, "pg-0");

  ASSERT_EQ(controller_.Stop(id).value(), v1::TRAIN_JOB_STATE_PENDING);
  ASSERT_TRUE(AwaitJob(controller_, id, Stopped))
      << "the pending job did not stop: " << Get(id).DebugString();
  EXPECT_THAT(groups_.removed(), ElementsAre(group));
  EXPECT_EQ(Get(id).failures(), 0u);
  // Written before it shows: a restarted head finds it stopped.
  const std::optional<v1::TrainJobRecord> record = LastRecord(id);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->info().state(), v1::TRAIN_JOB_STATE_STOPPED);
  // Stopping again changes nothing, and says the job had ended; an unknown
  // job is named.
  EXPECT_EQ(controller_.Stop(id).value(), v1::TRAIN_JOB_STATE_STOPPED);
  const absl::Status unknown = controller_.Stop("job-nope").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "job_id: no job 'job-nope'");
}

// The head tells a change of a job's group with what the group is now: the
// job's next step shows that, without reading the group again (a read says
// "waiting for resources").
TEST_F(TrainJobControllerTest, AChangeTheHeadTellsIsWhatTheJobSeesNext) {
  const std::string id = controller_.Submit(Request("submit-1")).value();
  AwaitWaitingForPlacement(id);
  const std::string group = Get(id).placement_group_id();
  GroupSnapshot told = groups_.GetGroup(group);
  ASSERT_TRUE(told.info.ok());
  told.info->set_pending_reason("waiting for quota: told by the head");
  told.version = 1 << 20;  // newer than any read the job makes meanwhile
  controller_.OnGroupChanged(told);
  ASSERT_TRUE(AwaitJob(controller_, id, [](const v1::TrainJobInfo& info) {
    return absl::StrContains(info.message(), "told by the head");
  })) << Get(id).DebugString();
  // A group the controller does not know of is no job's: nothing happens.
  controller_.OnGroupChanged(GroupSnapshot{"pg-other", absl::NotFoundError("gone"), 1 << 30});
  EXPECT_EQ(Get(id).state(), v1::TRAIN_JOB_STATE_PENDING);
}

TEST_F(TrainJobControllerTest, ProgressReportsAreCheckedByField) {
  v1::ReportTrainProgressRequest report;
  EXPECT_EQ(controller_.ReportProgress(report).message(), "job_id: required");
  report.set_job_id("job-nope");
  EXPECT_EQ(controller_.ReportProgress(report).code(), absl::StatusCode::kNotFound);
  (*report.mutable_metrics())[""] = 1;
  EXPECT_THAT(std::string(controller_.ReportProgress(report).message()),
              StartsWith("metrics key: required"));
  for (int i = 0; i < 65; ++i) (*report.mutable_metrics())[absl::StrCat("m", i)] = i;
  EXPECT_THAT(std::string(controller_.ReportProgress(report).message()),
              StartsWith("metrics: 66 entries"));
}

// A report is answered once its record is written, and the write is waited
// for without the controller's lock: reads and other jobs go on meanwhile.
TEST_F(TrainJobControllerTest, AReportIsAnsweredOnceKeptAndItsWriteBlocksNoRead) {
  const std::string id = controller_.Submit(Request("submit-1")).value();
  AwaitWaitingForPlacement(id);
  {
    absl::MutexLock lock(&mu_);
    hold_writes_ = true;
  }
  v1::ReportTrainProgressRequest report;
  report.set_job_id(id);
  report.set_step(kHeldStep);
  report.set_latest_checkpoint("/ckpt/42");
  std::future<absl::Status> answered =
      std::async(std::launch::async, [&] { return controller_.ReportProgress(report); });
  {
    absl::MutexLock lock(&mu_);
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(
                                         +[](int* held) { return *held > 0; }, &held_writes_),
                                     absl::Seconds(20)))
        << "the report's record was never written";
  }
  // Read while the report's write waits.
  std::future<v1::TrainJobInfo> read = std::async(std::launch::async, [&] { return Get(id); });
  ASSERT_EQ(read.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "a read waited for a report's write";
  EXPECT_EQ(read.get().latest_checkpoint(), "/ckpt/42");
  EXPECT_EQ(answered.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "the report was answered before its record was written";
  {
    absl::MutexLock lock(&mu_);
    hold_writes_ = false;
  }
  EXPECT_TRUE(answered.get().ok());
  EXPECT_EQ(LastRecord(id)->info().latest_checkpoint(), "/ckpt/42");
}

TEST(TrainJobControllerLimitTest, JobsBeyondTheActiveLimitAreRefusedUntilOneStops) {
  FakeGroups groups;
  RayletClients raylets(absl::Seconds(1));
  TrainControllerConfig config;
  config.worker_threads = 1;
  config.max_active_jobs = 1;
  TrainJobController controller(&groups, &raylets, config);
  const std::string first = controller.Submit(Request("submit-1")).value();
  const absl::StatusOr<std::string> second = controller.Submit(Request("submit-2"));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(), HasSubstr("--max-active-jobs 1"));
  // A retry of the first is still answered.
  EXPECT_EQ(controller.Submit(Request("submit-1")).value(), first);
  // Once it stopped, another is taken.
  ASSERT_TRUE(controller.Stop(first).ok());
  ASSERT_TRUE(AwaitJob(controller, first, Stopped)) << InfoOf(controller, first).DebugString();
  const std::string next = controller.Submit(Request("submit-2")).value();
  ASSERT_TRUE(AwaitJob(controller, next, WaitingForPlacement));
  // Shutdown stops the pending job, removing its group.
  controller.Shutdown();
  EXPECT_TRUE(Stopped(InfoOf(controller, next)));
  EXPECT_THAT(groups.removed(), ElementsAre("pg-0", "pg-1"));
}

}  // namespace
}  // namespace berth
