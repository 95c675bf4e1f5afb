// TrainJobTest: the fixture of the train job integration tests
// (train_job_test.cc, train_fault_test.cc, job_promises_test.cc): a real berth-head and two
// berth-raylets with two simulated GPUs each, the berth-worker trainer and
// ranks (Gloo: libtorch here is CPU-only) or user commands, and the helpers
// both files use.
#ifndef BERTH_TESTS_INTEGRATION_TRAIN_JOB_FIXTURE_H_
#define BERTH_TESTS_INTEGRATION_TRAIN_JOB_FIXTURE_H_

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "wire/train_job_state.h"

namespace berth::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr double kGi = 1024.0 * 1024 * 1024;

inline v1::TrainJobSpec GpuJob(int workers) {
  v1::TrainJobSpec spec;
  spec.set_name("test");
  spec.mutable_scaling_config()->set_num_workers(workers);
  spec.mutable_scaling_config()->set_use_gpu(true);
  return spec;
}

inline void SetCommand(v1::TrainJobSpec* spec, std::vector<std::string> argv,
                       std::map<std::string, std::string> env = {}) {
  auto* command = spec->mutable_entrypoint()->mutable_command();
  for (auto& a : argv) command->add_argv(a);
  for (auto& [k, v] : env) (*command->mutable_env())[k] = v;
}

inline std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// "step <n> loss <x>" lines of a rank-0 log: (step, loss) pairs.
inline std::vector<std::pair<int, double>> Losses(const std::string& text) {
  std::vector<std::pair<int, double>> out;
  std::regex line(R"(step (\d+) loss ([0-9.eE+-]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    out.push_back({std::stoi((*it)[1]), std::stod((*it)[2])});
  }
  return out;
}

inline std::string ParamsHash(const std::string& text) {
  std::smatch m;
  std::regex line(R"(rank \d+ params ([0-9a-f]+))");
  return std::regex_search(text, m, line) ? m[1].str() : "";
}

class TrainJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    cluster_->AddRaylet({"n0", 2, "A10G", 8, "32Gi"});
    cluster_->AddRaylet({"n1", 2, "A10G", 8, "32Gi"});
  }

  std::string Submit(const v1::TrainJobSpec& spec) {
    v1::SubmitTrainJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id("submit-" + std::to_string(next_++));
    v1::SubmitTrainJobResponse response;
    grpc::Status s = cluster_->jobs().SubmitTrainJob(Context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.job_id();
  }

  // The node as the head lists it (empty when it does not).
  v1::NodeInfo Node(const std::string& id) {
    v1::ListNodesResponse nodes;
    EXPECT_TRUE(cluster_->nodes().ListNodes(Context().get(), {}, &nodes).ok());
    for (const v1::NodeInfo& node : nodes.nodes()) {
      if (node.node_id() == id) return node;
    }
    return {};
  }

  v1::TrainJobInfo Get(const std::string& id) {
    v1::GetTrainJobRequest request;
    request.set_job_id(id);
    v1::GetTrainJobResponse response;
    EXPECT_TRUE(cluster_->jobs().GetTrainJob(Context().get(), request, &response).ok());
    return response.job();
  }

  // The active head as a head answers (empty when none answers in 500 ms).
  v1::HeadInfo ActiveHead() {
    v1::GetClusterStatusResponse status;
    grpc::Status s =
        cluster_->cluster().GetClusterStatus(Context(milliseconds(500)).get(), {}, &status);
    return s.ok() ? status.head() : v1::HeadInfo();
  }

  // `id` ends SUCCEEDED at attempt 0 with no failure, and nothing stays
  // reserved, on the head or the raylets: a gang of the cluster's four GPUs
  // is placed and runs.
  void ExpectSucceededAtFirstAttempt(const std::string& id, seconds timeout) {
    const v1::TrainJobInfo done = WaitDone(id, timeout);
    EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.message();
    EXPECT_EQ(done.attempt(), 0u);
    EXPECT_EQ(done.failures(), 0u);
    v1::TrainJobSpec all = GpuJob(4);
    SetCommand(&all, {"/bin/true"});
    const v1::TrainJobInfo after = WaitDone(Submit(all), seconds(60));
    EXPECT_EQ(after.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << after.message();
  }

  v1::TrainJobInfo WaitDone(const std::string& id, seconds timeout = seconds(90)) {
    v1::TrainJobInfo info;
    WaitUntil(
        [&] {
          info = Get(id);
          return IsTerminal(info.state());
        },
        timeout);
    return info;
  }

  std::string RankLog(const v1::TrainJobInfo& info, uint32_t rank,
                      const std::string& ext = ".out") {
    const v1::WorkerRank& w = info.workers(rank);
    return ReadFileOrEmpty(cluster_->log_dir(w.node_id()) + "/" + w.worker_id() + ext);
  }

  // The node each process of the job ran on, from the exits the head saw.
  std::map<std::string, v1::ReportWorkerExitRequest> Exits(const std::string& job_id) {
    v1::ListWorkerExitsRequest request;
    request.set_job_id(job_id);
    v1::ListWorkerExitsResponse response;
    EXPECT_TRUE(cluster_->nodes().ListWorkerExits(Context().get(), request, &response).ok());
    std::map<std::string, v1::ReportWorkerExitRequest> out;
    for (const auto& e : response.exits()) out[e.status().worker_id()] = e;
    return out;
  }

  // The processes of the job's workers on a node (keepers aside), found in
  // the OS process table, not by asking berth.
  std::vector<pid_t> JobProcessesOn(const std::string& node, const std::string& job_id) {
    return ProcessesWithEnv("TORCHELASTIC_ERROR_FILE",
                            cluster_->log_dir(node) + "/" + job_id + "-");
  }

  // A 2-rank command job that sleeps, once it is RUNNING.
  std::string StartSleepingJob() {
    v1::TrainJobSpec spec = GpuJob(2);
    SetCommand(&spec, {"/bin/sh", "-c", "sleep 60"});
    const std::string id = Submit(spec);
    EXPECT_TRUE(
        WaitUntil([&] { return Get(id).state() == v1::TRAIN_JOB_STATE_RUNNING; }, seconds(10)));
    return id;
  }

  void StopJob(const std::string& id) {
    v1::StopTrainJobRequest stop;
    stop.set_job_id(id);
    stop.set_request_id("stop-" + id);
    v1::StopTrainJobResponse stopped;
    ASSERT_TRUE(cluster_->jobs().StopTrainJob(Context().get(), stop, &stopped).ok());
  }

  std::unique_ptr<LocalCluster> cluster_;
  int next_ = 0;
};

}  // namespace berth::testing

#endif  // BERTH_TESTS_INTEGRATION_TRAIN_JOB_FIXTURE_H_
