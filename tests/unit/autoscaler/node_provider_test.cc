#include "autoscaler/node_provider.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/berth-provider-XXXXXX";
    path_ = mkdtemp(dir);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

NodePool A10gPool() {
  NodePool pool;
  pool.name = "a10g";
  pool.accelerator_type = "A10G";
  pool.gpus = 4;
  pool.resources.Set(kGpu, Quantity::Whole(4));
  pool.resources.Set(kCpu, Quantity::Whole(48));
  pool.resources.Set(kMemory, Quantity::Whole(int64_t{192} << 30));
  pool.labels = {{"tier", "prod"}};
  pool.deployment = "berth-raylet-a10g";
  return pool;
}

TEST(CommandProviderTest, PassesActionPoolAndShape) {
  TempDir dir;
  const std::string out = dir.path() + "/calls";
  CommandProvider provider({"/bin/sh", "-c",
                            "echo \"$* | $BERTH_POOL $BERTH_POOL_GPUS $BERTH_POOL_ACCELERATOR_TYPE "
                            "$BERTH_POOL_CPUS $BERTH_POOL_MEMORY "
                            "$BERTH_POOL_LABELS $BERTH_HEAD_ADDRESS\" >> " +
                                out,
                            "pool.sh"},
                           "10.0.0.1:6380");
  ASSERT_TRUE(provider.Scale(A10gPool(), 3).ok());
  ASSERT_TRUE(provider.Remove(A10gPool(), 1, {"node-a", "node-b"}).ok());
  EXPECT_EQ(Read(out),
            "scale a10g 3 | a10g 4 A10G 48 206158430208 tier=prod 10.0.0.1:6380\n"
            "remove a10g 1 node-a node-b | a10g 4 A10G 48 206158430208 tier=prod 10.0.0.1:6380\n");
}

TEST(CommandProviderTest, AFailureCarriesTheExitCodeAndOutput) {
  CommandProvider provider({"/bin/sh", "-c", "echo quota exceeded for a10g >&2; exit 3", "pool.sh"},
                           "h:1");
  absl::Status s = provider.Scale(A10gPool(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("exit 3"));
  EXPECT_THAT(s.message(), HasSubstr("quota exceeded for a10g"));
  EXPECT_THAT(CommandProvider({"/nonexistent/pool.sh"}, "h:1").Scale(A10gPool(), 1).message(),
              HasSubstr("exit 127"));
}

TEST(CommandProviderTest, AHungCommandIsKilledAtTheDeadline) {
  CommandProvider provider({"/bin/sh", "-c", "sleep 30", "pool.sh"}, "h:1",
                           absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  absl::Status s = provider.Scale(A10gPool(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// KubernetesProvider against a stand-in API server (plain HTTP, loopback).
class KubernetesProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_.path() + "/requests";
    const std::string port_file = dir_.path() + "/port";
    server_ = fork();
    if (server_ == 0) {
      execlp("python3", "python3", BERTH_AUTOSCALER_TESTDATA "/fake_kube_api.py", port_file.c_str(),
             log_.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 250 && Read(port_file).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_FALSE(Read(port_file).empty()) << "the fake API server did not start";
    std::ofstream(dir_.path() + "/token") << "secret-token\n";
    config_.type = "kubernetes";
    config_.ns = "berth";
    config_.api_server = "http://127.0.0.1:" + Read(port_file);
    config_.token_file = dir_.path() + "/token";
    config_.ca_file = "";
  }
  void TearDown() override {
    kill(server_, SIGKILL);
    waitpid(server_, nullptr, 0);
  }

  TempDir dir_;
  std::string log_;
  pid_t server_ = -1;
  ProviderConfig config_;
};

TEST_F(KubernetesProviderTest, ScalesTheDeploymentThroughTheScaleSubresource) {
  absl::StatusOr<std::unique_ptr<KubernetesProvider>> provider =
      KubernetesProvider::Create(config_);
  ASSERT_TRUE(provider.ok()) << provider.status();
  ASSERT_TRUE((*provider)->Scale(A10gPool(), 3).ok());
  EXPECT_EQ(
      Read(log_),
      R"({"method": "PATCH", "path": "/apis/apps/v1/namespaces/berth/deployments/berth-raylet-a10g/scale", )"
      R"("authorization": "Bearer secret-token", "content_type": "application/merge-patch+json", )"
      R"("body": {"spec": {"replicas": 3}}})"
      "\n");
}

TEST_F(KubernetesProviderTest, RemovalMarksThePodsThenScalesDown) {
  absl::StatusOr<std::unique_ptr<KubernetesProvider>> provider =
      KubernetesProvider::Create(config_);
  ASSERT_TRUE(provider.ok());
  ASSERT_TRUE((*provider)->Remove(A10gPool(), 1, {"berth-raylet-a10g-7d9f-x2"}).ok());
  const std::string log = Read(log_);
  EXPECT_THAT(log,
              HasSubstr(R"("path": "/api/v1/namespaces/berth/pods/berth-raylet-a10g-7d9f-x2")"));
  EXPECT_THAT(log, HasSubstr(R"("controller.kubernetes.io/pod-deletion-cost": "-1000000")"));
  EXPECT_LT(log.find("/pods/"), log.find("/scale"));  // marked first
  EXPECT_THAT(log, HasSubstr(R"("body": {"spec": {"replicas": 1}})"));
}

TEST_F(KubernetesProviderTest, ErrorsCarryTheApiServersAnswer) {
  absl::StatusOr<std::unique_ptr<KubernetesProvider>> provider =
      KubernetesProvider::Create(config_);
  ASSERT_TRUE(provider.ok());
  NodePool pool = A10gPool();
  pool.deployment = "missing";
  absl::Status s = (*provider)->Scale(pool, 2);
  EXPECT_THAT(s.message(), HasSubstr("HTTP 404"));
  EXPECT_THAT(s.message(), HasSubstr("NotFound"));
  config_.token_file = dir_.path() + "/no-token";
  EXPECT_THAT((*KubernetesProvider::Create(config_))->Scale(A10gPool(), 2).message(),
              HasSubstr("provider.token_file"));
}

TEST(KubernetesProviderCreateTest, OutsideAPodWithoutAnApiServerIsAClearError) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  ProviderConfig config;
  config.type = "kubernetes";
  absl::StatusOr<std::unique_ptr<KubernetesProvider>> provider = KubernetesProvider::Create(config);
  EXPECT_EQ(provider.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(provider.status().message(), HasSubstr("provider.api_server"));
}

}  // namespace
}  // namespace berth
