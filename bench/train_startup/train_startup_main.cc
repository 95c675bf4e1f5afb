// berth-train-bench: time to train. Starts a local cluster (a berth-head and
// K berth-raylet processes on 127.0.0.1, as `berth up` does), submits for
// each N a built-in CPU job of N workers with tiny resources (so that 16
// fit on a laptop) and one training step, and reads the job's
// StartupTimeline (train.proto) once the job is done. Prints, per N, the
// median over --repeat jobs of each stage:
//
//   placement  submitted -> placed           (head: placement group CREATED)
//   launch     placed -> workers_started     (StartWorker of trainer + ranks)
//   process    workers_started -> ranks_running  (the latest rank's main())
//   rendezvous ranks_running -> group_joined (the latest rank in the group)
//
// berth's own overhead is everything but "process" (loading berth-worker
// and libtorch) and Gloo's connections inside "rendezvous".
//
//   berth-train-bench --workers 2,4,8,16 --repeat 5 --raylets 2 --strategy spread
//
// With --script PY (and --python), the jobs run a user's PyTorch program
// instead: bench/train_startup/timed_ddp.py runs examples/pytorch-ddp for
// one step and prints when each rank's interpreter was up, `import torch`
// done and init_process_group() returned; read from the ranks' logs:
//
//   process    workers_started -> the latest rank's interpreter up
//   import     -> the latest rank's `import torch` done
//   rendezvous -> the latest rank's init_process_group() returned
//
// and the overhead is berth's: total - process - import.
//
// Talks gRPC to the head only: no torch here.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "berth/v1/head.grpc.pb.h"
#include "tests/integration/local_cluster.h"
#include "wire/train_job_state.h"

namespace berth {
namespace {

struct Flags {
  std::string workers = "2,4,8,16";
  int repeat = 5;
  int raylets = 2;
  std::string strategy = "spread";
  double cpu_per_worker = 0.1;
  std::string state = "sqlite";
  std::string markdown;
  std::string script;  // a user program (timed_ddp.py) instead of the built-in job
  std::string python = "/usr/bin/python3";
};

// One job's stages, milliseconds.
struct Stages {
  double placement = 0;
  double launch = 0;
  double process = 0;
  double import_torch = 0;  // --script only
  double rendezvous = 0;
  double total = 0;
};

double Ms(int64_t from_us, int64_t to_us) { return static_cast<double>(to_us - from_us) / 1000.0; }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

v1::TrainJobSpec Job(const Flags& flags, int workers) {
  v1::TrainJobSpec spec;
  spec.set_name(absl::StrCat("train-bench-", workers));
  v1::ScalingConfig& scaling = *spec.mutable_scaling_config();
  scaling.set_num_workers(static_cast<uint32_t>(workers));
  (*scaling.mutable_resources_per_worker()->mutable_amounts())["CPU"] = flags.cpu_per_worker;
  (*scaling.mutable_trainer_resources()->mutable_amounts())["CPU"] = flags.cpu_per_worker;
  scaling.set_placement_strategy(flags.strategy == "pack" ? v1::PLACEMENT_STRATEGY_PACK
                                                          : v1::PLACEMENT_STRATEGY_SPREAD);
  if (!flags.script.empty()) {
    auto& command = *spec.mutable_entrypoint()->mutable_command();
    command.add_argv(flags.python);
    command.add_argv(flags.script);
    return spec;
  }
  auto& builtin = *spec.mutable_entrypoint()->mutable_builtin_trainer();
  builtin.set_steps(1);
  builtin.set_batch_size(8);
  return spec;
}

// The latest of each time the ranks of a --script job printed
// ("berth-startup rank <r> main_unix_us <t> torch_unix_us <t> joined_unix_us <t>").
struct ScriptStartup {
  int64_t main_us = 0, torch_us = 0, joined_us = 0;
  int ranks = 0;
};

absl::StatusOr<ScriptStartup> ReadScriptStartup(testing::LocalCluster& cluster,
                                                const std::string& job_id) {
  v1::StreamTrainJobLogsRequest request;
  request.set_job_id(job_id);
  auto context = cluster.context();
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
      cluster.jobs().StreamTrainJobLogs(context.get(), request);
  std::map<std::pair<uint32_t, int>, std::string> logs;  // (rank, stream) -> text
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) logs[{chunk.rank(), chunk.stream()}] += chunk.data();
  if (grpc::Status s = reader->Finish(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("StreamTrainJobLogs: ", s.error_message()));
  }
  ScriptStartup out;
  for (const auto& [key, text] : logs) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t main_us = 0, torch_us = 0, joined_us = 0;
      if (f.size() != 9 || f[0] != "berth-startup" || !absl::SimpleAtoi(f[4], &main_us) ||
          !absl::SimpleAtoi(f[6], &torch_us) || !absl::SimpleAtoi(f[8], &joined_us)) {
        continue;
      }
      out.main_us = std::max(out.main_us, main_us);
      out.torch_us = std::max(out.torch_us, torch_us);
      out.joined_us = std::max(out.joined_us, joined_us);
      ++out.ranks;
    }
  }
  return out;
}

// Submits one job, waits until it is over (so the next one starts on an
// idle machine) and returns its stages.
absl::StatusOr<Stages> RunOne(testing::LocalCluster& cluster, const Flags& flags, int workers,
                              const std::string& request_id) {
  v1::SubmitTrainJobRequest submit;
  *submit.mutable_spec() = Job(flags, workers);
  submit.set_request_id(request_id);
  v1::SubmitTrainJobResponse submitted;
  if (grpc::Status s = cluster.jobs().SubmitTrainJob(cluster.context().get(), submit, &submitted);
      !s.ok()) {
    return absl::UnavailableError(absl::StrCat("SubmitTrainJob: ", s.error_message()));
  }
  v1::GetTrainJobRequest get;
  get.set_job_id(submitted.job_id());
  v1::TrainJobInfo job;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (true) {
    v1::GetTrainJobResponse response;
    if (grpc::Status s = cluster.jobs().GetTrainJob(cluster.context().get(), get, &response);
        !s.ok()) {
      return absl::UnavailableError(absl::StrCat("GetTrainJob: ", s.error_message()));
    }
    job = response.job();
    if (IsTerminal(job.state())) break;
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(job.job_id(), " not done after 2 minutes: ", job.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (job.state() != v1::TRAIN_JOB_STATE_SUCCEEDED) {
    return absl::InternalError(absl::StrCat(
        job.job_id(), " ended ", v1::TrainJobState_Name(job.state()), ": ", job.message()));
  }
  const v1::StartupTimeline& t = job.startup();
  if (!flags.script.empty()) {
    absl::StatusOr<ScriptStartup> ranks = ReadScriptStartup(cluster, job.job_id());
    if (!ranks.ok()) return ranks.status();
    if (ranks->ranks != workers) {
      return absl::InternalError(absl::StrCat(job.job_id(), ": ", ranks->ranks, " of ", workers,
                                              " ranks printed their start-up times"));
    }
    return Stages{Ms(t.submitted_unix_us(), t.placed_unix_us()),
                  Ms(t.placed_unix_us(), t.workers_started_unix_us()),
                  Ms(t.workers_started_unix_us(), ranks->main_us),
                  Ms(ranks->main_us, ranks->torch_us),
                  Ms(ranks->torch_us, ranks->joined_us),
                  Ms(t.submitted_unix_us(), ranks->joined_us)};
  }
  if (t.group_joined_unix_us() == 0) {
    return absl::InternalError(
        absl::StrCat(job.job_id(), ": no start-up times: ", t.ShortDebugString()));
  }
  return Stages{Ms(t.submitted_unix_us(), t.placed_unix_us()),
                Ms(t.placed_unix_us(), t.workers_started_unix_us()),
                Ms(t.workers_started_unix_us(), t.ranks_running_unix_us()),
                0,
                Ms(t.ranks_running_unix_us(), t.group_joined_unix_us()),
                Ms(t.submitted_unix_us(), t.group_joined_unix_us())};
}

int Main(const Flags& flags) {
  std::vector<int> sizes;
  for (absl::string_view w : absl::StrSplit(flags.workers, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1 || n > 256) {
      std::fprintf(stderr, "berth-train-bench: --workers: '%s' is not 1..256\n",
                   std::string(w).c_str());
      return 2;
    }
    sizes.push_back(n);
  }
  std::vector<std::string> head_flags;
  if (flags.state == "memory") head_flags = {"--state-store", "memory:"};
  testing::LocalCluster cluster(500, head_flags);
  for (int i = 0; i < flags.raylets; ++i) {
    cluster.AddRaylet({absl::StrCat("node-", i), 0, "", 8, "32Gi"});
  }
  const std::string setup = absl::StrCat(
      "head + ", flags.raylets, " berth-raylet processes on 127.0.0.1, state in ", flags.state,
      flags.script.empty() ? "; built-in CPU jobs (Gloo), "
                           : absl::StrCat("; ", flags.python, " ", flags.script, " (Gloo), "),
      flags.strategy, ", CPU ", flags.cpu_per_worker, " per worker, 1 step; ",
      std::thread::hardware_concurrency(), " cores; median of ", flags.repeat);
  std::printf("berth-train-bench: %s\n", setup.c_str());
  const std::string run = absl::StrCat(getpid());
  // One job first, unmeasured: the page cache gets berth-worker and libtorch.
  if (absl::StatusOr<Stages> warm = RunOne(cluster, flags, 2, absl::StrCat("warm-", run));
      !warm.ok()) {
    std::fprintf(stderr, "berth-train-bench: %s\n", std::string(warm.status().message()).c_str());
    return 1;
  }
  const std::string header =
      absl::StrFormat("%4s %10s %8s %8s %8s %11s %8s %9s", "N", "placement", "launch", "process",
                      "import", "rendezvous", "total", "overhead");
  std::printf("%s\n", header.c_str());
  std::vector<std::string> rows;
  for (int n : sizes) {
    std::vector<double> placement, launch, process, import_torch, rendezvous, total, overhead;
    for (int r = 0; r < flags.repeat; ++r) {
      absl::StatusOr<Stages> s = RunOne(cluster, flags, n, absl::StrCat(run, "-", n, "-", r));
      if (!s.ok()) {
        std::fprintf(stderr, "berth-train-bench: N=%d: %s\n", n,
                     std::string(s.status().message()).c_str());
        return 1;
      }
      placement.push_back(s->placement);
      launch.push_back(s->launch);
      process.push_back(s->process);
      import_torch.push_back(s->import_torch);
      rendezvous.push_back(s->rendezvous);
      total.push_back(s->total);
      overhead.push_back(s->total - s->process - s->import_torch);
    }
    const double m[] = {Median(placement),  Median(launch), Median(process), Median(import_torch),
                        Median(rendezvous), Median(total),  Median(overhead)};
    std::printf("%4d %10.1f %8.1f %8.1f %8.1f %11.1f %8.1f %9.1f\n", n, m[0], m[1], m[2], m[3],
                m[4], m[5], m[6]);
    std::fflush(stdout);
    rows.push_back(absl::StrFormat("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |", n,
                                   m[0], m[1], m[2], m[3], m[4], m[5], m[6]));
  }
  std::printf(
      "ms, median per column: placement = submit -> group CREATED; launch -> every StartWorker "
      "returned; process -> the last rank's main(); import -> the last rank's `import torch` done "
      "(--script); rendezvous -> the last rank in the group; overhead = total - process - "
      "import\n");
  if (!flags.markdown.empty()) {
    std::ofstream out(flags.markdown);
    out << setup << "\n\n"
        << "| N | placement | launch | process | import | rendezvous | total | overhead |\n"
        << "|---|---|---|---|---|---|---|---|\n";
    for (const std::string& row : rows) out << row << "\n";
    if (!out) {
      std::fprintf(stderr, "berth-train-bench: --markdown: cannot write %s\n",
                   flags.markdown.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  berth::Flags flags;
  CLI::App app{"berth-train-bench: time from SubmitTrainJob to every rank in its collective group"};
  app.add_option("--workers", flags.workers, "comma-separated job sizes N")->capture_default_str();
  app.add_option("--repeat", flags.repeat, "jobs per size (the median is shown)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--raylets", flags.raylets, "berth-raylet processes (8 CPUs each)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--strategy", flags.strategy, "placement strategy of the jobs")
      ->check(CLI::IsMember({"pack", "spread"}))
      ->capture_default_str();
  app.add_option("--cpu-per-worker", flags.cpu_per_worker, "CPU of each worker and the trainer")
      ->check(CLI::Range(0.0001, 8.0))
      ->capture_default_str();
  app.add_option("--state", flags.state, "head state: sqlite (durable, fsync) or memory")
      ->check(CLI::IsMember({"sqlite", "memory"}))
      ->capture_default_str();
  app.add_option("--markdown", flags.markdown, "also write the table here");
  app.add_option("--script", flags.script,
                 "run this Python program as the jobs' command (bench/train_startup/timed_ddp.py)");
  app.add_option("--python", flags.python, "the interpreter for --script")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return berth::Main(flags);
}
