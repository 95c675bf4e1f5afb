// Sick GPUs on real raylets (issue 49), with the health file as the
// injection point (as Kubernetes' node-problem-detector e2e injects kernel
// log lines): XID 79 on a GPU a running rank holds restarts the job on
// healthy GPUs, not counted against max_failures, and the GPU is handed
// out again only once an operator returns it; an application's XID changes
// nothing; a failing health check, or too many unhealthy GPUs, drains the
// node with the reason.
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

class GpuHealthTest : public TrainJobTest {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    health_file_ = cluster_->dir() + "/n0-gpu-health";
    sick_file_ = cluster_->dir() + "/n1-sick";
    // n1's health check fails, saying what the file says, while it exists.
    const std::string check =
        absl::StrCat("if [ -e ", sick_file_, " ]; then cat ", sick_file_, "; exit 1; fi");
    cluster_->AddRaylet({"n0", 4, "A10G", 8, "32Gi", "", {"--gpu-health-file", health_file_}});
    cluster_->AddRaylet({"n1",
                         2,
                         "A10G",
                         8,
                         "32Gi",
                         "",
                         {"--health-check-command", check, "--health-check-interval-s", "1"}});
  }

  void Inject(const std::string& line) {
    std::ofstream(health_file_, std::ios::app) << line << "\n";
  }

  // The node once it drains (or as it is after 15 s).
  v1::NodeInfo WaitDraining(const std::string& id) {
    v1::NodeInfo node;
    WaitUntil(
        [&] {
          node = Node(id);
          return node.state() == v1::NODE_STATE_DRAINING;
        },
        seconds(15));
    return node;
  }

  // The node's free GPUs, as the head counts them.
  double FreeGpus(const std::string& id) {
    const v1::NodeInfo node = Node(id);
    auto it = node.available().amounts().find("GPU");
    return it == node.available().amounts().end() ? 0 : it->second;
  }

  grpc::Status MarkHealthy(const std::string& node, uint32_t gpu,
                           v1::MarkGpuHealthyResponse* response) {
    v1::MarkGpuHealthyRequest request;
    request.set_node_id(node);
    request.set_gpu_index(gpu);
    return cluster_->nodes().MarkGpuHealthy(Context().get(), request, response);
  }

  std::string health_file_;
  std::string sick_file_;
};

TEST_F(GpuHealthTest, Xid79OnARanksGpuRestartsTheJobOnHealthyGpusWithoutAFailure) {
  v1::TrainJobSpec spec = GpuJob(3);
  spec.mutable_scaling_config()->set_placement_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_steps(1000000);
  spec.mutable_entrypoint()->mutable_builtin_trainer()->set_checkpoint_every_steps(100);
  spec.mutable_failure_config()->set_max_failures(0);
  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitUntil([&] { return Get(id).last_step() > 0; }, seconds(40)));
  const v1::TrainJobInfo running = Get(id);
  ASSERT_EQ(running.workers_size(), 3) << running.DebugString();
  ASSERT_EQ(running.workers(1).node_id(), "n0");
  ASSERT_EQ(running.workers(1).gpu_indices_size(), 1) << running.DebugString();
  const uint32_t sick = running.workers(1).gpu_indices(0);

  // An application's XID (13: a graphics engine exception) is the
  // program's, not the GPU's.
  Inject(absl::StrCat(sick, " xid 13 graphics engine exception"));
  std::this_thread::sleep_for(seconds(3));
  EXPECT_EQ(Get(id).attempt(), 0u);
  EXPECT_EQ(Node("n0").unhealthy_gpus_size(), 0);

  Inject(absl::StrCat(sick, " xid 79 GPU has fallen off the bus"));
  const auto injected = std::chrono::steady_clock::now();
  v1::TrainJobInfo again;
  ASSERT_TRUE(WaitUntil(
      [&] {
        again = Get(id);
        return again.state() == v1::TRAIN_JOB_STATE_RUNNING && again.attempt() >= 1;
      },
      seconds(25)))
      << again.DebugString();
  EXPECT_LT(std::chrono::steady_clock::now() - injected, seconds(25));
  EXPECT_EQ(again.failures(), 0u);
  ASSERT_EQ(again.failure_causes_size(), 1);
  EXPECT_EQ(again.failure_causes(0),
            absl::StrCat("GPU ", sick, " of n0: XID 79, GPU has fallen off the bus"));
  for (const v1::WorkerRank& w : again.workers()) {
    EXPECT_EQ(w.node_id(), "n0");
    EXPECT_THAT(w.gpu_indices(), ::testing::Not(::testing::Contains(sick)));
  }
  const v1::NodeInfo n0 = Node("n0");
  EXPECT_EQ(n0.state(), v1::NODE_STATE_ALIVE);  // one unhealthy GPU: no drain
  ASSERT_EQ(n0.unhealthy_gpus_size(), 1);
  EXPECT_EQ(n0.unhealthy_gpus(0).index(), sick);
  EXPECT_EQ(FreeGpus("n0"), 0);  // 3 held, 1 withheld

  // The job ends; still nothing gets the GPU until an operator returns it.
  StopJob(id);
  ASSERT_EQ(WaitDone(id, seconds(30)).state(), v1::TRAIN_JOB_STATE_STOPPED);
  ASSERT_TRUE(WaitUntil([&] { return FreeGpus("n0") == 3; }, seconds(10)));
  v1::MarkGpuHealthyResponse returned;
  grpc::Status s = MarkHealthy("n0", sick, &returned);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(returned.was_unhealthy_reason(), "XID 79, GPU has fallen off the bus");
  EXPECT_EQ(Node("n0").unhealthy_gpus_size(), 0);
  EXPECT_EQ(FreeGpus("n0"), 4);
  EXPECT_EQ(MarkHealthy("n0", sick, &returned).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(MarkHealthy("n0", 9, &returned).error_code(), grpc::StatusCode::NOT_FOUND);
  // The raylet forgot the fault too: its heartbeats do not bring it back.
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(Node("n0").unhealthy_gpus_size(), 0);
}

TEST_F(GpuHealthTest, AFailingHealthCheckOrTooManyUnhealthyGpusDrainTheNode) {
  std::ofstream(sick_file_) << "NHC: check_fs_mount: /scratch not mounted\n";
  const v1::NodeInfo n1 = WaitDraining("n1");
  ASSERT_EQ(n1.state(), v1::NODE_STATE_DRAINING) << n1.DebugString();
  EXPECT_EQ(n1.drain_reason(),
            "unhealthy: health check failed: NHC: check_fs_mount: /scratch not mounted (exit 1)");

  Inject("0 ecc volatile double bit");
  Inject("2 remap-failed");
  const v1::NodeInfo n0 = WaitDraining("n0");
  ASSERT_EQ(n0.state(), v1::NODE_STATE_DRAINING) << n0.DebugString();
  EXPECT_EQ(n0.drain_reason(),
            "unhealthy: 2 GPUs unhealthy (more than 1); the first: GPU 0: double-bit ECC error: "
            "volatile double bit");
  EXPECT_EQ(n0.unhealthy_gpus_size(), 2);
}

}  // namespace
}  // namespace berth::testing
