// RayletService driven through a real gRPC channel on 127.0.0.1, with real
// worker processes; no head involved.
#include "raylet/raylet_service.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// 8 CPUs, 2 T4 GPUs.
ResourceSet NodeTotal() {
  ResourceSet total = ResourceSet::Of({{"CPU", 8}, {"GPU", 2}, {"memory", 1 << 30}});
  total.Set(AcceleratorResourceName("T4"), Quantity::Whole(1));
  return total;
}

class RayletServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "/raylet_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = std::filesystem::canonical(pattern).string();
    WorkerProcessManager::Options workers{dir_ + "/logs", dir_ + "/work", nullptr};
    workers.cgroups = cgroups_.get();
    workers_ = std::make_unique<WorkerProcessManager>(workers);
    RayletService::Options options;
    options.refuse_prepare_file = dir_ + "/refuse";
    options.bundle_release_grace = absl::Milliseconds(200);
    options.worker_pythonpath = "/opt/berth/python";
    service_ = std::make_unique<RayletService>(options, BundleReservations(NodeTotal(), 2),
                                               workers_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::RayletService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  // Every call with a deadline, as the head makes them.
  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    return context;
  }

  v1::PrepareBundleResourcesRequest PrepareRequest(const std::string& pg, const std::string& id,
                                                   double cpus, std::vector<uint32_t> gpus) {
    v1::PrepareBundleResourcesRequest request;
    request.set_placement_group_id(pg);
    request.set_request_id(id);
    v1::BundleReservation* bundle = request.add_bundles();
    bundle->set_bundle_index(0);
    (*bundle->mutable_resources()->mutable_amounts())["CPU"] = cpus;
    if (!gpus.empty()) (*bundle->mutable_resources()->mutable_amounts())["GPU"] = gpus.size();
    for (uint32_t g : gpus) {
      v1::GpuShare* share = bundle->add_gpus();
      share->set_index(g);
      share->set_units(10000);
    }
    return request;
  }

  grpc::Status Prepare(const v1::PrepareBundleResourcesRequest& request,
                       v1::PrepareBundleResourcesResponse* response) {
    return stub_->PrepareBundleResources(Context().get(), request, response);
  }

  grpc::Status Commit(const std::string& pg, const std::string& id, uint32_t index = 0) {
    v1::CommitBundleResourcesRequest request;
    request.set_placement_group_id(pg);
    request.add_bundle_indices(index);
    request.set_request_id(id);
    v1::CommitBundleResourcesResponse response;
    return stub_->CommitBundleResources(Context().get(), request, &response);
  }

  // Prepares and commits bundle 0 of `pg`.
  void Reserve(const std::string& pg, double cpus, std::vector<uint32_t> gpus) {
    v1::PrepareBundleResourcesResponse response;
    ASSERT_TRUE(Prepare(PrepareRequest(pg, pg + "-prepare", cpus, gpus), &response).ok());
    ASSERT_TRUE(response.prepared()) << response.reason();
    ASSERT_TRUE(Commit(pg, pg + "-commit").ok());
  }

  v1::StartWorkerRequest StartRequest(const std::string& worker, const std::string& pg,
                                      const std::string& script) {
    v1::StartWorkerRequest request;
    request.set_request_id("start-" + worker);
    v1::WorkerSpec* spec = request.mutable_spec();
    spec->set_worker_id(worker);
    spec->set_job_id("job");
    spec->set_placement_group_id(pg);
    spec->set_bundle_index(0);
    for (const char* arg : {"/bin/sh", "-c"}) spec->add_argv(arg);
    spec->add_argv(script);
    (*spec->mutable_env())["RANK"] = "0";
    return request;
  }

  std::vector<v1::WorkerStatus> ListWorkers() {
    v1::ListWorkersResponse response;
    EXPECT_TRUE(stub_->ListWorkers(Context().get(), v1::ListWorkersRequest(), &response).ok());
    return {response.workers().begin(), response.workers().end()};
  }

  // Polls until the worker reaches `state`.
  bool WaitForState(const std::string& worker, v1::WorkerState state) {
    for (int i = 0; i < 500; ++i) {
      for (const v1::WorkerStatus& w : ListWorkers()) {
        if (w.worker_id() == worker && w.state() == state) return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  std::unique_ptr<WorkerCgroups> cgroups_;  // ConfinedRayletServiceTest's
  std::unique_ptr<WorkerProcessManager> workers_;
  std::unique_ptr<RayletService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::RayletService::Stub> stub_;
};

TEST_F(RayletServiceTest, PrepareCommitStartListCancel) {
  Reserve("pg", 2, {1});
  EXPECT_EQ(service_->Available().Get("CPU"), Quantity::Whole(6));

  v1::StartWorkerResponse started;
  ASSERT_TRUE(stub_
                  ->StartWorker(Context().get(),
                                StartRequest("w0", "pg",
                                             "echo \"$RANK:$CUDA_VISIBLE_DEVICES\"; "
                                             "exec sleep 60"),
                                &started)
                  .ok());
  EXPECT_GT(started.pid(), 0);
  EXPECT_FALSE(started.already_running());

  std::vector<v1::WorkerStatus> workers = ListWorkers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].worker_id(), "w0");
  EXPECT_EQ(workers[0].pid(), started.pid());
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_RUNNING);
  EXPECT_EQ(workers[0].placement_group_id(), "pg");
  for (int i = 0; i < 500 && ReadFileOrEmpty(dir_ + "/logs/w0.out").empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/w0.out"), "0:1\n");  // the bundle's GPU

  v1::CancelResourceReserveRequest cancel;
  cancel.set_placement_group_id("pg");
  cancel.set_request_id("cancel-1");
  v1::CancelResourceReserveResponse cancelled;
  ASSERT_TRUE(stub_->CancelResourceReserve(Context().get(), cancel, &cancelled).ok());
  EXPECT_TRUE(WaitForState("w0", v1::WORKER_STATE_KILLED));
  EXPECT_EQ(service_->Available(), NodeTotal());
  // Idempotent: a new cancel of the released group succeeds.
  cancel.set_request_id("cancel-2");
  EXPECT_TRUE(stub_->CancelResourceReserve(Context().get(), cancel, &cancelled).ok());

  v1::ListWorkersRequest other_job;
  other_job.set_job_id("other");
  v1::ListWorkersResponse none;
  ASSERT_TRUE(stub_->ListWorkers(Context().get(), other_job, &none).ok());
  EXPECT_EQ(none.workers_size(), 0);
}

// A group with no other participant commits with its prepare: a worker can
// start at once, with no CommitBundleResources.
TEST_F(RayletServiceTest, PrepareWithCommitCommitsInOneCall) {
  v1::PrepareBundleResourcesRequest request = PrepareRequest("pg-one", "one-prepare", 1, {0});
  request.set_commit(true);
  v1::PrepareBundleResourcesResponse response;
  ASSERT_TRUE(Prepare(request, &response).ok());
  ASSERT_TRUE(response.prepared()) << response.reason();
  v1::StartWorkerResponse started;
  EXPECT_TRUE(
      stub_->StartWorker(Context().get(), StartRequest("w-one", "pg-one", "exit 0"), &started)
          .ok());
  // Without commit, the bundle is only prepared: no worker may start.
  ASSERT_TRUE(Prepare(PrepareRequest("pg-two", "two-prepare", 1, {1}), &response).ok());
  ASSERT_TRUE(response.prepared());
  grpc::Status refused =
      stub_->StartWorker(Context().get(), StartRequest("w-two", "pg-two", "exit 0"), &started);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
}

// Ops apply in order, each with its own result: a cancel frees what the
// next prepare needs; a bad op fails alone; a retried op answers as before.
TEST_F(RayletServiceTest, ApplyBundleOpsAppliesInOrderWithAResultEach) {
  v1::ApplyBundleOpsRequest request;
  auto prepare = [&](const std::string& pg, double cpus) {
    v1::PrepareBundleResourcesRequest* p = request.add_ops()->mutable_prepare();
    *p = PrepareRequest(pg, pg + "-prepare", cpus, {});
    p->set_commit(true);
  };
  prepare("pg-a", 6);
  prepare("pg-b", 6);  // 2 CPUs free: not prepared
  v1::CancelResourceReserveRequest* cancel = request.add_ops()->mutable_cancel();
  cancel->set_placement_group_id("pg-a");
  cancel->set_request_id("pg-a-cancel");
  prepare("pg-c", 6);  // fits after the cancel
  v1::CommitBundleResourcesRequest* commit = request.add_ops()->mutable_commit();
  commit->set_placement_group_id("pg-unknown");
  commit->add_bundle_indices(0);
  commit->set_request_id("unknown-commit");
  v1::ApplyBundleOpsResponse response;
  ASSERT_TRUE(stub_->ApplyBundleOps(Context().get(), request, &response).ok());
  ASSERT_EQ(response.results_size(), 5);
  EXPECT_EQ(response.results(0).code(), 0);
  EXPECT_TRUE(response.results(0).prepare().prepared());
  EXPECT_EQ(response.results(1).code(), 0);
  EXPECT_FALSE(response.results(1).prepare().prepared());
  EXPECT_EQ(response.results(1).prepare().reason(), "bundle 0 needs CPU: 6, the node has 2 free");
  EXPECT_EQ(response.results(2).code(), 0);
  EXPECT_TRUE(response.results(3).prepare().prepared());
  EXPECT_EQ(response.results(4).code(), grpc::StatusCode::FAILED_PRECONDITION);
  v1::StartWorkerResponse started;
  EXPECT_TRUE(
      stub_->StartWorker(Context().get(), StartRequest("w-c", "pg-c", "exit 0"), &started).ok());
  // The same ops again: every one answers from its request_id, nothing changes.
  v1::ApplyBundleOpsResponse again;
  ASSERT_TRUE(stub_->ApplyBundleOps(Context().get(), request, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), response.SerializeAsString());
  // An op with nothing set is refused before any op applies.
  request.add_ops();
  grpc::Status empty = stub_->ApplyBundleOps(Context().get(), request, &response);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty.error_message(), "ops[5]: one of prepare, commit or cancel is required");
}

TEST_F(RayletServiceTest, NotEnoughResourcesIsNotPreparedWithAReason) {
  v1::PrepareBundleResourcesResponse response;
  ASSERT_TRUE(Prepare(PrepareRequest("pg", "p1", 9, {}), &response).ok());
  EXPECT_FALSE(response.prepared());
  EXPECT_EQ(response.reason(), "bundle 0 needs CPU: 9, the node has 8 free");
}

TEST_F(RayletServiceTest, RetriesWithTheSameRequestIdReturnTheFirstResult) {
  v1::PrepareBundleResourcesResponse response;
  const v1::PrepareBundleResourcesRequest request = PrepareRequest("pg", "p1", 6, {});
  ASSERT_TRUE(Prepare(request, &response).ok());
  ASSERT_TRUE(response.prepared());
  ASSERT_TRUE(Commit("pg", "c1").ok());

  // The retry answers as the first call did and reserves nothing more.
  ASSERT_TRUE(Prepare(request, &response).ok());
  EXPECT_TRUE(response.prepared());
  EXPECT_EQ(service_->Available().Get("CPU"), Quantity::Whole(2));

  // The same id with other arguments is a client bug.
  grpc::Status reused = Prepare(PrepareRequest("pg", "p1", 1, {}), &response);
  EXPECT_EQ(reused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(reused.error_message().find("request_id"), std::string::npos);

  v1::StartWorkerRequest start = StartRequest("w", "pg", "sleep 60");
  v1::StartWorkerResponse first, retry, again;
  ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &first).ok());
  ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &retry).ok());
  EXPECT_EQ(retry.pid(), first.pid());
  EXPECT_FALSE(retry.already_running());  // the first call's answer
  start.set_request_id("another-start");
  ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &again).ok());
  EXPECT_TRUE(again.already_running());
  EXPECT_EQ(again.pid(), first.pid());
  EXPECT_EQ(ListWorkers().size(), 1u);
}

TEST_F(RayletServiceTest, BadRequestsAreRejectedNamingTheField) {
  v1::PrepareBundleResourcesResponse response;
  grpc::Status s = Prepare(PrepareRequest("pg", "p1", 1, {5}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("bundles[0].gpus[0].index"), std::string::npos)
      << s.error_message();

  v1::PrepareBundleResourcesRequest negative = PrepareRequest("pg", "p2", 1, {});
  (*negative.mutable_bundles(0)->mutable_resources()->mutable_amounts())["CPU"] = -1;
  s = Prepare(negative, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("bundles[0].resources.amounts"), std::string::npos)
      << s.error_message();

  s = Prepare(PrepareRequest("pg", "", 1, {}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("request_id"), std::string::npos);
  s = Prepare(PrepareRequest("", "p3", 1, {}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("placement_group_id"), std::string::npos);
  EXPECT_EQ(service_->Available(), NodeTotal());

  EXPECT_EQ(Commit("pg", "c1").error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // Prepared but not committed: no workers yet.
  ASSERT_TRUE(Prepare(PrepareRequest("pg", "p4", 1, {0}), &response).ok());
  ASSERT_TRUE(response.prepared());
  v1::StartWorkerResponse started;
  s = stub_->StartWorker(Context().get(), StartRequest("w", "pg", "exit 0"), &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("spec.bundle_index"), std::string::npos);

  ASSERT_TRUE(Commit("pg", "c2").ok());
  v1::StartWorkerRequest foreign_gpu = StartRequest("w", "pg", "exit 0");
  foreign_gpu.set_request_id("start-foreign-gpu");
  foreign_gpu.mutable_spec()->add_visible_gpu_indices(1);  // not this group's
  s = stub_->StartWorker(Context().get(), foreign_gpu, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("spec.visible_gpu_indices[0]"), std::string::npos);

  v1::StartWorkerRequest no_argv = StartRequest("w", "pg", "");
  no_argv.set_request_id("start-no-argv");
  no_argv.mutable_spec()->clear_argv();
  s = stub_->StartWorker(Context().get(), no_argv, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("spec.argv"), std::string::npos);

  v1::StartWorkerRequest missing = StartRequest("w", "pg", "");
  missing.mutable_spec()->clear_argv();
  missing.mutable_spec()->add_argv("berth-no-such-program-anywhere");
  missing.set_request_id("start-missing");
  s = stub_->StartWorker(Context().get(), missing, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);

  v1::StopWorkerRequest stop;
  stop.set_worker_id("nobody");
  stop.set_request_id("stop-1");
  v1::StopWorkerResponse stopped;
  EXPECT_EQ(stub_->StopWorker(Context().get(), stop, &stopped).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(RayletServiceTest, VisibleGpusMayNameAnyGpuOfTheGroupOnThisNode) {
  v1::PrepareBundleResourcesRequest request = PrepareRequest("pg", "p1", 1, {0});
  v1::BundleReservation* second = request.add_bundles();
  second->set_bundle_index(1);
  (*second->mutable_resources()->mutable_amounts())["GPU"] = 1;
  second->add_gpus()->set_index(1);
  second->mutable_gpus(0)->set_units(10000);
  v1::PrepareBundleResourcesResponse prepared;
  ASSERT_TRUE(Prepare(request, &prepared).ok());
  ASSERT_TRUE(prepared.prepared()) << prepared.reason();
  v1::CommitBundleResourcesRequest commit;
  commit.set_placement_group_id("pg");
  commit.add_bundle_indices(0);
  commit.add_bundle_indices(1);
  commit.set_request_id("c1");
  v1::CommitBundleResourcesResponse committed;
  ASSERT_TRUE(stub_->CommitBundleResources(Context().get(), commit, &committed).ok());

  v1::StartWorkerRequest start = StartRequest("w", "pg", "echo $CUDA_VISIBLE_DEVICES");
  start.mutable_spec()->add_visible_gpu_indices(1);
  start.mutable_spec()->add_visible_gpu_indices(0);
  v1::StartWorkerResponse started;
  ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &started).ok());
  ASSERT_TRUE(WaitForState("w", v1::WORKER_STATE_EXITED));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/w.out"), "1,0\n");
}

TEST_F(RayletServiceTest, WorkersGetBerthsPythonPackageAfterTheirOwnPythonPath) {
  Reserve("pg", 1, {});
  v1::StartWorkerRequest own = StartRequest("own", "pg", "echo $PYTHONPATH");
  (*own.mutable_spec()->mutable_env())["PYTHONPATH"] = "/srv/lib";
  v1::StartWorkerRequest none = StartRequest("none", "pg", "echo $PYTHONPATH");
  for (const v1::StartWorkerRequest& start : {own, none}) {
    v1::StartWorkerResponse started;
    ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &started).ok());
    ASSERT_TRUE(WaitForState(start.spec().worker_id(), v1::WORKER_STATE_EXITED));
  }
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/own.out"), "/srv/lib:/opt/berth/python\n");
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/none.out"), "/opt/berth/python\n");
}

// With cgroups (real ones: the tests run as root, as a confining raylet).
class ConfinedRayletServiceTest : public RayletServiceTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<WorkerCgroups>> cgroups =
        WorkerCgroups::Open({"service-test", testing::TempDir() + "/" + std::to_string(getpid())});
    ASSERT_TRUE(cgroups.ok()) << cgroups.status();
    cgroups_ = *std::move(cgroups);
    RayletServiceTest::SetUp();
  }
  void TearDown() override {
    RayletServiceTest::TearDown();
    service_.reset();
    workers_.reset();
    cgroups_.reset();
  }

  // Prepares and commits bundles 0 and 1 of `pg`, each 1 CPU and 64Mi.
  void ReserveTwo(const std::string& pg) {
    v1::PrepareBundleResourcesRequest request;
    request.set_placement_group_id(pg);
    request.set_request_id(pg + "-prepare");
    for (uint32_t index : {0, 1}) {
      v1::BundleReservation* bundle = request.add_bundles();
      bundle->set_bundle_index(index);
      (*bundle->mutable_resources()->mutable_amounts())["CPU"] = 1;
      (*bundle->mutable_resources()->mutable_amounts())["memory"] = 64 << 20;
    }
    v1::PrepareBundleResourcesResponse prepared;
    ASSERT_TRUE(Prepare(request, &prepared).ok());
    ASSERT_TRUE(prepared.prepared()) << prepared.reason();
    v1::CommitBundleResourcesRequest commit;
    commit.set_placement_group_id(pg);
    commit.add_bundle_indices(0);
    commit.add_bundle_indices(1);
    commit.set_request_id(pg + "-commit");
    v1::CommitBundleResourcesResponse committed;
    ASSERT_TRUE(stub_->CommitBundleResources(Context().get(), commit, &committed).ok());
  }
};

// What the worker itself reads of its memory limit.
constexpr const char* kPrintMemoryLimit =
    "p=$(grep ':memory:' /proc/self/cgroup | cut -d: -f3); "
    "cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes";

TEST_F(ConfinedRayletServiceTest, AWorkerIsHeldToTheSumOfTheBundlesItHolds) {
  ReserveTwo("pg");
  v1::StartWorkerRequest one = StartRequest("one", "pg", kPrintMemoryLimit);
  v1::StartWorkerRequest both = StartRequest("both", "pg", kPrintMemoryLimit);
  both.mutable_spec()->add_bundle_indices(0);
  both.mutable_spec()->add_bundle_indices(1);
  for (const v1::StartWorkerRequest& start : {one, both}) {
    v1::StartWorkerResponse started;
    ASSERT_TRUE(stub_->StartWorker(Context().get(), start, &started).ok());
    ASSERT_TRUE(WaitForState(start.spec().worker_id(), v1::WORKER_STATE_EXITED));
  }
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/one.out"), absl::StrCat(64 << 20, "\n"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/logs/both.out"), absl::StrCat(128 << 20, "\n"));
}

TEST_F(ConfinedRayletServiceTest, BundleIndicesMustHoldItsOwnAndOnlyCommittedOnes) {
  ReserveTwo("pg");
  v1::StartWorkerRequest without_own = StartRequest("w1", "pg", "true");
  without_own.mutable_spec()->add_bundle_indices(1);
  v1::StartWorkerResponse started;
  grpc::Status s = stub_->StartWorker(Context().get(), without_own, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "spec.bundle_indices: must include bundle_index 0");
  v1::StartWorkerRequest missing = StartRequest("w2", "pg", "true");
  missing.mutable_spec()->add_bundle_indices(0);
  missing.mutable_spec()->add_bundle_indices(5);
  s = stub_->StartWorker(Context().get(), missing, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("spec.bundle_indices: bundle 5 of placement group pg"),
            std::string::npos)
      << s.error_message();
}

TEST_F(RayletServiceTest, RefusePrepareFileMakesPreparesFailUntilRemoved) {
  const std::string refuse = dir_ + "/refuse";
  std::ofstream(refuse) << "";
  v1::PrepareBundleResourcesResponse response;
  ASSERT_TRUE(Prepare(PrepareRequest("pg", "p1", 1, {}), &response).ok());
  EXPECT_FALSE(response.prepared());
  EXPECT_EQ(response.reason(), absl::StrCat("refusing prepares: ", refuse, " exists"));
  EXPECT_EQ(service_->Available(), NodeTotal());

  ASSERT_EQ(unlink(refuse.c_str()), 0);
  ASSERT_TRUE(Prepare(PrepareRequest("pg", "p2", 1, {}), &response).ok());
  EXPECT_TRUE(response.prepared());
}

TEST_F(RayletServiceTest, ReleaseUnusedBundlesKeepsOnlyTheListedOnes) {
  Reserve("keep", 1, {0});
  Reserve("drop", 1, {1});
  v1::StartWorkerResponse started;
  ASSERT_TRUE(
      stub_->StartWorker(Context().get(), StartRequest("w", "drop", "sleep 60"), &started).ok());

  v1::ReleaseUnusedBundlesRequest request;
  request.set_request_id("r1");
  v1::BundleKey* keep = request.add_in_use();
  keep->set_placement_group_id("keep");
  keep->set_bundle_index(0);
  v1::ReleaseUnusedBundlesResponse response;
  ASSERT_TRUE(stub_->ReleaseUnusedBundles(Context().get(), request, &response).ok());
  ASSERT_EQ(response.released_size(), 1);
  EXPECT_EQ(response.released(0).placement_group_id(), "drop");
  EXPECT_TRUE(WaitForState("w", v1::WORKER_STATE_KILLED));
  EXPECT_EQ(service_->Available().Get("GPU"), Quantity::Whole(1));
}

TEST_F(RayletServiceTest, SyncHeldBundlesRestoresWhatTheHeadBelievesAndReleasesTheRest) {
  Reserve("stale", 1, {0});
  google::protobuf::RepeatedPtrField<v1::HeldBundle> held;
  v1::HeldBundle* bundle = held.Add();
  bundle->mutable_key()->set_placement_group_id("pg");
  bundle->mutable_key()->set_bundle_index(2);
  (*bundle->mutable_resources()->mutable_amounts())["GPU"] = 1;
  bundle->add_gpus()->set_index(0);  // the GPU "stale" holds now
  bundle->mutable_gpus(0)->set_units(10000);
  bundle->set_committed(true);
  service_->BeginRegistration();  // as a restarted head's node registers again
  ASSERT_TRUE(service_->SyncHeldBundles(held).ok());

  v1::StartWorkerRequest start = StartRequest("w", "pg", "exit 0");
  start.mutable_spec()->set_bundle_index(2);
  v1::StartWorkerResponse started;
  EXPECT_TRUE(stub_->StartWorker(Context().get(), start, &started).ok());
  EXPECT_EQ(service_->Available().Get("CPU"), Quantity::Whole(8));
  EXPECT_EQ(service_->Available().Get("GPU"), Quantity::Whole(1));
}

// A held bundle that no longer fits (the head's books and the node
// disagree) is reported for the head until it acknowledges it.
TEST_F(RayletServiceTest, AHeldBundleThatCannotBeRestoredIsReportedUntilAcknowledged) {
  google::protobuf::RepeatedPtrField<v1::HeldBundle> held;
  v1::HeldBundle* bundle = held.Add();
  bundle->mutable_key()->set_placement_group_id("pg");
  bundle->mutable_key()->set_bundle_index(1);
  (*bundle->mutable_resources()->mutable_amounts())["CPU"] = 64;  // more than the node has
  bundle->set_committed(true);
  service_->BeginRegistration();
  EXPECT_FALSE(service_->SyncHeldBundles(held).ok());
  std::vector<v1::BundleKey> unrestored = service_->Unrestored();
  ASSERT_EQ(unrestored.size(), 1u);
  EXPECT_EQ(unrestored[0].placement_group_id(), "pg");
  EXPECT_EQ(unrestored[0].bundle_index(), 1u);
  EXPECT_EQ(service_->Unrestored().size(), 1u);  // until acknowledged
  service_->AcknowledgeUnrestored(unrestored);
  EXPECT_TRUE(service_->Unrestored().empty());
}

// The head may place a bundle here between answering a registration and
// the raylet reading the answer: what was prepared since the registration
// began is kept, what is older and unlisted is released.
TEST_F(RayletServiceTest, SyncKeepsBundlesPreparedSinceTheRegistrationBegan) {
  Reserve("old", 1, {0});
  service_->BeginRegistration();
  Reserve("new", 1, {1});
  ASSERT_TRUE(service_->SyncHeldBundles({}).ok());
  v1::StartWorkerResponse started;
  EXPECT_TRUE(
      stub_->StartWorker(Context().get(), StartRequest("w-new", "new", "exit 0"), &started).ok());
  EXPECT_EQ(stub_->StartWorker(Context().get(), StartRequest("w-old", "old", "exit 0"), &started)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// A bundle the node does not hold is NOT_FOUND (the head places it again),
// but while a registration's answer is not synced yet it may still be
// restored: UNAVAILABLE, and the head tries again later.
TEST_F(RayletServiceTest, StartingOnABundleNotHeldIsNotFoundOnceSynced) {
  v1::StartWorkerResponse started;
  auto start = [&](const std::string& worker) {
    return stub_->StartWorker(Context().get(), StartRequest(worker, "gone", "exit 0"), &started)
        .error_code();
  };
  EXPECT_EQ(start("w0"), grpc::StatusCode::NOT_FOUND);
  service_->BeginRegistration();
  EXPECT_EQ(start("w1"), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(service_->SyncHeldBundles({}).ok());
  EXPECT_EQ(start("w2"), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RayletServiceTest, AllocatePortReturnsAFreePortOnTheAdvertisedHost) {
  v1::AllocatePortResponse response;
  ASSERT_TRUE(stub_->AllocatePort(Context().get(), v1::AllocatePortRequest(), &response).ok());
  EXPECT_EQ(response.host(), "127.0.0.1");
  ASSERT_GT(response.port(), 0u);
  ASSERT_LE(response.port(), 65535u);
  // Free: a plain listener can take it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(response.port()));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
}

}  // namespace
}  // namespace berth
