#include "bench/loadgen/pending_jobs.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/loadgen/proc_stats.h"
#include "bench/loadgen/simulated_raylets.h"
#include "berth/v1/head.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/integration/local_cluster.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

// Counts of the head's train jobs by state.
std::map<v1::TrainJobState, uint32_t> JobsByState(testing::LocalCluster& cluster) {
  std::map<v1::TrainJobState, uint32_t> by_state;
  v1::GetClusterStatusResponse status;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!cluster.cluster().GetClusterStatus(&context, {}, &status).ok()) return by_state;
  for (const auto& c : status.train_jobs()) by_state[c.state()] = c.count();
  return by_state;
}

// Calls `call(i)` for i in [0, n) on `clients` threads; returns the failures.
template <typename Call>
uint64_t Fan(int n, int clients, Call call) {
  std::atomic<int> next{0};
  std::atomic<uint64_t> failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < n;) {
        if (!call(i)) ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failed;
}

}  // namespace

int PendingJobs(const PendingJobsRun& flags) {
  const int jobs = flags.jobs;
  std::vector<std::string> head_flags = flags.head_flags;
  for (const std::string& f :
       {std::string("--max-active-jobs"), std::string("--max-pending-groups")}) {
    head_flags.insert(head_flags.end(), {f, absl::StrCat(jobs)});
  }
  testing::LocalCluster cluster(60000, head_flags);
  SimulatedRaylets simulated;
  SimulatedNodeShape shape;
  shape.gpus = flags.gpus_per_node;
  if (absl::Status s = simulated.Start(cluster.head_address(), "", flags.nodes, shape, false);
      !s.ok()) {
    std::fprintf(stderr, "berth-loadgen: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const pid_t head = cluster.head_pid();
  const int64_t threads_idle = ProcStatus(head, "Threads:");
  const int64_t rss_idle = ResidentBytes(head);
  auto channel = grpc::CreateChannel(cluster.head_address(), grpc::InsecureChannelCredentials());
  auto train = v1::TrainJobService::NewStub(channel);
  auto deadline = [](grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  };
  std::vector<std::string> ids(jobs);
  const Clock::time_point submit_start = Clock::now();
  const uint64_t submit_failed = Fan(jobs, 16, [&](int i) {
    v1::SubmitTrainJobRequest request;
    request.set_request_id(absl::StrCat("pending-", i));
    v1::TrainJobSpec& spec = *request.mutable_spec();
    spec.set_name(absl::StrCat("pending-", i));
    spec.mutable_scaling_config()->set_num_workers(2);
    spec.mutable_scaling_config()->set_use_gpu(true);
    spec.mutable_scaling_config()->set_accelerator_type("H100");  // no node has one
    grpc::ClientContext context;
    deadline(&context);
    v1::SubmitTrainJobResponse response;
    const grpc::Status s = train->SubmitTrainJob(&context, request, &response);
    if (!s.ok()) {
      static std::atomic<int> printed{0};
      if (printed++ < 5)
        std::fprintf(stderr, "berth-loadgen: submit: %s\n", s.error_message().c_str());
      return false;
    }
    ids[i] = response.job_id();
    return true;
  });
  const double submit_s = std::chrono::duration<double>(Clock::now() - submit_start).count();
  // Every job has its group and waits for placement.
  uint32_t waiting = 0;
  for (int i = 0; i < 600 && waiting < static_cast<uint32_t>(jobs); ++i) {
    v1::ListTrainJobsRequest request;
    request.add_states(v1::TRAIN_JOB_STATE_PENDING);
    grpc::ClientContext context;
    deadline(&context);
    v1::ListTrainJobsResponse response;
    if (train->ListTrainJobs(&context, request, &response).ok()) {
      waiting = 0;
      for (const v1::TrainJobInfo& job : response.jobs()) {
        if (absl::StartsWith(job.message(), "waiting for placement")) ++waiting;
      }
    }
    if (waiting < static_cast<uint32_t>(jobs))
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const int64_t threads_pending = ProcStatus(head, "Threads:");
  const int64_t rss_pending = ResidentBytes(head);
  // What the waiting costs: the head's CPU with every job pending, over
  // the first 10 s and over 10 s a minute later (a waiting job looks at its
  // group less and less often; its placement wakes it at once).
  auto cpu_over_10s = [&] {
    const double before = CpuSeconds(head);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    return (CpuSeconds(head) - before) / 10;
  };
  const double first_cpu = cpu_over_10s();
  std::this_thread::sleep_for(std::chrono::seconds(50));
  const double idle_cpu = cpu_over_10s();
  const int64_t threads_after_wait = ProcStatus(head, "Threads:");
  const Clock::time_point stop_start = Clock::now();
  const uint64_t stop_failed = Fan(jobs, 16, [&](int i) {
    v1::StopTrainJobRequest request;
    request.set_job_id(ids[i]);
    grpc::ClientContext context;
    deadline(&context);
    v1::StopTrainJobResponse response;
    return train->StopTrainJob(&context, request, &response).ok();
  });
  uint32_t stopped = 0;
  for (int i = 0; i < 1200 && stopped < static_cast<uint32_t>(jobs); ++i) {
    stopped = JobsByState(cluster)[v1::TRAIN_JOB_STATE_STOPPED];
    if (stopped < static_cast<uint32_t>(jobs))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double stop_s = std::chrono::duration<double>(Clock::now() - stop_start).count();
  std::printf(
      "berth-loadgen pending jobs: %d train jobs waiting at once on %d simulated nodes, state in "
      "%s\n",
      jobs, flags.nodes, flags.state.c_str());
  std::printf("  submitted in %.1f s (%.0f/s, %llu failed); %u waiting for placement\n", submit_s,
              jobs / submit_s, static_cast<unsigned long long>(submit_failed), waiting);
  std::printf(
      "  head threads: %lld with no job, %lld with %d pending, %lld after 70 s of waiting\n",
      static_cast<long long>(threads_idle), static_cast<long long>(threads_pending), jobs,
      static_cast<long long>(threads_after_wait));
  std::printf("  head RSS: %.1f MiB with no job, %.1f MiB pending (%.0f bytes/job)\n",
              rss_idle / 1048576.0, rss_pending / 1048576.0,
              static_cast<double>(rss_pending - rss_idle) / jobs);
  std::printf(
      "  head CPU while they wait: %.1f%% of a core in the first 10 s, %.1f%% a minute later\n",
      first_cpu * 100, idle_cpu * 100);
  std::printf("  all %u STOPPED %.1f s after the stops began (%llu stop calls failed)\n", stopped,
              stop_s, static_cast<unsigned long long>(stop_failed));
  if (!flags.json.empty()) {
    std::ofstream(flags.json) << absl::StrFormat(
        "{\"pending_jobs\": %d, \"waiting\": %u, \"head_threads_idle\": %d, "
        "\"head_threads_pending\": %d, "
        "\"idle_cpu_cores\": %.3f, \"stop_all_s\": %.2f}\n",
        jobs, waiting, threads_idle, threads_pending, idle_cpu, stop_s);
  }
  return waiting == static_cast<uint32_t>(jobs) && stopped == static_cast<uint32_t>(jobs) ? 0 : 1;
}

}  // namespace berth
