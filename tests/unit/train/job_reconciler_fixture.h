// The JobReconciler's tests' fixture: a train job and the world it lives
// in, driven by hand (the test plays the controller: the time, the world
// and the results of the actions), and the helpers that build that world.
#ifndef BERTH_TESTS_UNIT_TRAIN_JOB_RECONCILER_FIXTURE_H_
#define BERTH_TESTS_UNIT_TRAIN_JOB_RECONCILER_FIXTURE_H_

#include <csignal>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/train/worker_status_test_util.h"
#include "train/job_reconciler.h"
#include "train/train_job_spec.h"

namespace berth {

constexpr char kJob[] = "job-1";
constexpr char kGroup[] = "pg-1";

inline v1::TrainJobSpec BuiltinSpec(int workers) {
  v1::TrainJobSpec spec;
  spec.set_name("test");
  spec.mutable_scaling_config()->set_num_workers(workers);
  spec.mutable_scaling_config()->set_use_gpu(true);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(100);
  return spec;
}

// A group CREATED with bundle i on nodes[i], GPUs numbered per node.
inline v1::PlacementGroupInfo Created(const std::vector<std::string>& nodes,
                                      int64_t placed_ms = 1) {
  v1::PlacementGroupInfo group;
  group.set_placement_group_id(kGroup);
  group.set_state(v1::PLACEMENT_GROUP_STATE_CREATED);
  group.set_placed_unix_ms(placed_ms);
  std::map<std::string, uint32_t> next_gpu;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    group.add_bundles();
    v1::BundleLocation* location = group.add_locations();
    location->set_bundle_index(i);
    location->set_node_id(nodes[i]);
    location->add_gpus()->set_index(next_gpu[nodes[i]]++);
  }
  return group;
}

inline v1::WorkerStatus Exit(const std::string& worker, int code, int64_t failed_us = 0,
                             int signal = 0) {
  return testing::ExitStatus(kJob, worker, code, failed_us, signal);
}

inline std::string Worker(int attempt, const std::string& suffix) {
  return absl::StrCat(kJob, "-a", attempt, "-", suffix);
}

// The job and the world it lives in; the test plays the controller.
class JobReconcilerTest : public ::testing::Test {
 protected:
  void New(v1::TrainJobSpec spec) {
    v1::TrainJobInfo info;
    info.set_job_id(kJob);
    *info.mutable_spec() = spec;
    info.set_state(v1::TRAIN_JOB_STATE_PENDING);
    job_.emplace(std::move(info), *PlacementGroupForJob(spec), Options());
  }
  // A job a previous head wrote as `info`.
  JobReconciler Restored(const v1::TrainJobInfo& info) {
    v1::TrainJobRecord record;
    *record.mutable_info() = info;
    return JobReconciler::Restored(record, *PlacementGroupForJob(info.spec()), Options());
  }
  // A new job of `spec` whose group is placed on n0 and n1, up to the
  // launch of its processes (on port 1): the launch.
  StartProcesses UpToTheLaunch(v1::TrainJobSpec spec) {
    New(spec);
    Expect<CreateGroup>(Step());
    Result(GroupCreated{std::string(kGroup)});
    group_ = Created({"n0", "n1"});
    alive_ = {"n0", "n1"};
    Expect<AllocatePort>(Step());
    Result(PortAllocated{std::make_pair(std::string("h"), uint16_t{1})});
    return Expect<StartProcesses>(Step());
  }
  static JobOptions Options() {
    JobOptions options;
    options.head_address = "127.0.0.1:1";
    options.node_dead_after = absl::Seconds(5);
    return options;
  }
  JobStep Step() {
    JobWorld world;
    world.group = group_;
    world.elastic = elastic_;
    for (const std::string& node : job_->WatchedNodes()) {
      if (alive_.count(node) > 0) world.alive.insert(node);
    }
    return job_->Step(now_, world);
  }
  // The step's action, which must be an `Action` (else the test fails).
  template <typename Action>
  Action Expect(JobStep step) {
    if (!step.action || !std::holds_alternative<Action>(*step.action)) {
      throw std::runtime_error(
          step.action ? absl::StrCat("another action: ", step.action->index())
                      : absl::StrCat("no action; waits until ", absl::FormatTime(step.wake_at)));
    }
    return std::get<Action>(*std::move(step.action));
  }
  absl::Time Waits(const JobStep& step) {
    EXPECT_FALSE(step.action.has_value()) << "acts: " << step.action->index();
    return step.wake_at;
  }
  void Result(JobActionResult result) { job_->OnResult(now_, std::move(result)); }

  // Created, placed on `nodes` and started: RUNNING with its processes.
  JobProcesses Run(const std::vector<std::string>& nodes, int attempt = 0) {
    if (attempt == 0) {
      Expect<CreateGroup>(Step());
      Result(GroupCreated{std::string(kGroup)});
    }
    group_ = Created(nodes, attempt + 1);
    for (const std::string& n : nodes) alive_.insert(n);
    return Launch(nodes[0]);
  }
  // A placed attempt gets its port on `rank0_node` and starts: RUNNING.
  // `seen`, if given, gets what it started.
  JobProcesses Launch(const std::string& rank0_node, StartProcesses* seen = nullptr) {
    EXPECT_EQ(Expect<AllocatePort>(Step()).node_id, rank0_node);
    Result(PortAllocated{std::make_pair(std::string("10.0.0.1"), uint16_t{29500})});
    StartProcesses start = Expect<StartProcesses>(Step());
    JobProcesses started;
    for (const auto& [node, workers] : start.by_node) {
      for (const v1::WorkerSpec& w : workers) started[w.worker_id()] = node;
    }
    Result(ProcessesStarted{absl::OkStatus(), started});
    EXPECT_EQ(job_->info().state(), v1::TRAIN_JOB_STATE_RUNNING);
    if (seen != nullptr) *seen = std::move(start);
    return started;
  }
  // The listing of every watched node: what runs there of `running`.
  WorkersListed Listing(const std::set<std::string>& nodes, const JobProcesses& running) {
    WorkersListed listed;
    for (const std::string& node : nodes) {
      if (alive_.count(node) == 0) {
        listed.by_node.emplace(node, absl::UnavailableError("down"));
        continue;
      }
      v1::ListWorkersResponse response;
      for (const auto& [worker, on] : running) {
        if (on != node) continue;
        v1::WorkerStatus* w = response.add_workers();
        w->set_worker_id(worker);
        w->set_state(v1::WORKER_STATE_RUNNING);
      }
      listed.by_node.emplace(node, response);
    }
    return listed;
  }
  // Rank 0 exits with `code`; asked which nodes answer, n1's raylet fails
  // with `n1_error`.
  void FailRankZeroWithN1Silent(const JobProcesses& processes, int code, absl::Status n1_error) {
    job_->OnWorkerExit(Exit(Worker(0, "r0"), code, 1000));
    ListWorkers probe = Expect<ListWorkers>(Step());
    WorkersListed listed = Listing(probe.nodes, processes);
    listed.by_node.at("n1") = std::move(n1_error);
    Result(listed);
  }
  // Rank 0 reports a checkpoint at `step`; whether the job is due.
  bool ReportCheckpoint(uint64_t step) {
    v1::ReportTrainProgressRequest progress;
    progress.set_job_id(kJob);
    progress.set_step(step);
    progress.set_latest_checkpoint(absl::StrCat("/ckpt/step-", step, ".pt"));
    return job_->OnProgress(now_, progress);
  }
  // The port comes: attempt 1's trainer starts from `checkpoint`.
  void ExpectResumeFrom(const std::string& checkpoint) {
    Result(PortAllocated{std::make_pair(std::string("10.0.0.1"), uint16_t{29501})});
    StartProcesses start = Expect<StartProcesses>(Step());
    const v1::WorkerSpec& trainer = start.by_node[0].second[0];
    EXPECT_EQ(trainer.worker_id(), Worker(1, "trainer"));
    EXPECT_THAT(std::vector<std::string>(trainer.argv().begin(), trainer.argv().end()),
                ::testing::Contains(checkpoint));
  }
  // A GPU job's failed process waits a moment for its node to report a
  // fault of its GPU: none comes.
  void AwaitNoGpuFault() {
    EXPECT_EQ(Waits(Step()), now_ + absl::Seconds(2));
    now_ += absl::Seconds(2);
  }
  // Stops the processes asked for: all of them exit.
  // min 2 / max 3, max_failures 0, RUNNING on n0, n1 (the job's group)
  // and n2 (its elastic group pg-e0).
  JobProcesses RunElasticOnThreeNodes() {
    v1::TrainJobSpec spec = BuiltinSpec(3);
    spec.mutable_scaling_config()->set_min_workers(2);
    spec.mutable_failure_config()->set_max_failures(0);
    New(spec);
    Expect<CreateGroup>(Step());
    Result(GroupCreated{std::string(kGroup)});
    group_ = Created({"n0", "n1"});
    alive_ = {"n0", "n1", "n2"};
    Expect<CreateGroup>(Step());
    Result(GroupCreated{std::string("pg-e0")});
    v1::PlacementGroupInfo placed = Created({"n2"});
    placed.set_placement_group_id("pg-e0");
    elastic_["pg-e0"] = placed;
    return Launch("n0");
  }
  // The job's Step once it answered its periodic look at its raylets
  // (`running` still runs).
  JobStep Look(const JobProcesses& running) {
    JobStep step = Step();
    while (step.action && std::holds_alternative<ListWorkers>(*step.action)) {
      Result(Listing(std::get<ListWorkers>(*step.action).nodes, running));
      step = Step();
    }
    return step;
  }
  // Rank 0 of `attempt` exits 3 while every node answers: the rest are
  // stopped and the restart is decided; its Step.
  JobStep FailRankZero(const JobProcesses& processes, int attempt) {
    job_->OnWorkerExit(Exit(Worker(attempt, "r0"), 3, 1000));
    ListWorkers probe = Expect<ListWorkers>(Step());
    JobProcesses running = processes;
    running.erase(Worker(attempt, "r0"));
    Result(Listing(probe.nodes, running));
    AwaitNoGpuFault();
    StopAndExit();
    return Step();
  }
  void StopAndExit() {
    StopProcesses stop = Expect<StopProcesses>(Step());
    std::vector<std::string> awaited;
    for (const auto& [worker, node] : stop.processes) {
      if (alive_.count(node) > 0) awaited.push_back(worker);
    }
    Result(StopsSent{awaited});
    for (const std::string& w : awaited) job_->OnWorkerExit(Exit(w, 0, 0, SIGTERM));
  }

  std::optional<JobReconciler> job_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  absl::StatusOr<v1::PlacementGroupInfo> group_ = absl::NotFoundError("none");
  std::set<std::string> alive_;
  std::map<std::string, absl::StatusOr<v1::PlacementGroupInfo>> elastic_;  // by id
};

}  // namespace berth

#endif  // BERTH_TESTS_UNIT_TRAIN_JOB_RECONCILER_FIXTURE_H_
