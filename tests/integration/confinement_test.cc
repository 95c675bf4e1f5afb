// Workers confined to their bundles on real raylets (issue 50), which run as
// root here with cgroup v1: a rank past its bundle's memory is killed alone
// and its job's cause names the limit while a neighbour job on the node
// succeeds; a rank may not open another bundle's (simulated) GPU; the node
// says how it confines.
#include "absl/strings/str_cat.h"
#include "tests/integration/train_job_fixture.h"

namespace berth::testing {
namespace {

constexpr double kMi = 1024.0 * 1024;

class ConfinementTest : public TrainJobTest {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>();
    cluster_->AddRaylet({"n0", 2, "A10G", 8, "32Gi", "", {"--cgroups", "auto"}});
  }
};

TEST_F(ConfinementTest, TheNodeSaysItConfinesWithCgroupV1) {
  EXPECT_EQ(Node("n0").labels().at("berth.io/confinement"), "cgroup-v1");
}

TEST_F(ConfinementTest, ARankPastItsBundlesMemoryIsKilledAloneAndTheJobSaysSo) {
  v1::TrainJobSpec hog;
  hog.set_name("hog");
  hog.mutable_scaling_config()->set_num_workers(2);
  auto& amounts = *hog.mutable_scaling_config()->mutable_resources_per_worker()->mutable_amounts();
  amounts["CPU"] = 1;
  amounts["memory"] = 512 * kMi;
  hog.mutable_failure_config()->set_max_failures(0);
  // Rank 1 allocates 2 GiB; rank 0 waits to be stopped.
  SetCommand(&hog, {"python3", "-c",
                    "import os, time\n"
                    "if os.environ['RANK'] == '1':\n"
                    "    b = bytearray(2 << 30)\n"
                    "time.sleep(60)\n"});
  v1::TrainJobSpec neighbour;
  neighbour.set_name("neighbour");
  neighbour.mutable_scaling_config()->set_num_workers(1);
  SetCommand(&neighbour, {"/bin/sh", "-c", "sleep 4"});
  const std::string neighbour_id = Submit(neighbour);
  const std::string hog_id = Submit(hog);

  const v1::TrainJobInfo hog_done = WaitDone(hog_id, seconds(60));
  EXPECT_EQ(hog_done.state(), v1::TRAIN_JOB_STATE_FAILED) << hog_done.DebugString();
  ASSERT_GE(hog_done.failure_causes_size(), 1) << hog_done.DebugString();
  EXPECT_THAT(hog_done.failure_causes(0), HasSubstr("out of memory: bundle limit 512Mi"));
  const v1::TrainJobInfo neighbour_done = WaitDone(neighbour_id, seconds(60));
  EXPECT_EQ(neighbour_done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << neighbour_done.message();
}

TEST_F(ConfinementTest, ARankCannotOpenAnotherBundlesGpu) {
  v1::TrainJobSpec spec = GpuJob(1);
  // The node's other GPU is denied (EPERM); its own opens as far as the
  // missing driver lets it (ENXIO).
  const std::string dev = cluster_->state_dir("n0") + "/dev/nvidia";
  SetCommand(&spec, {"/bin/sh", "-c",
                     absl::StrCat("other=$((1 - CUDA_VISIBLE_DEVICES)); cat ", dev,
                                  "$other 2>&1 | grep -q 'Operation not permitted' || exit 3; "
                                  "cat ",
                                  dev,
                                  "$CUDA_VISIBLE_DEVICES 2>&1 | "
                                  "grep -q 'Operation not permitted' && exit 4; exit 0")});
  spec.mutable_failure_config()->set_max_failures(0);
  const v1::TrainJobInfo done = WaitDone(Submit(spec), seconds(60));
  EXPECT_EQ(done.state(), v1::TRAIN_JOB_STATE_SUCCEEDED) << done.DebugString();
}

}  // namespace
}  // namespace berth::testing
