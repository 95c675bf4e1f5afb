#include "worker/trainer.h"

#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/log.h"
#include "worker/checkpoint_files.h"
#include "worker/head_reporter.h"
#include "worker/store_protocol.h"
#include "worker/train.h"

namespace berth {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// How long an ended trainer waits for an absent head to take its last
// report (a head restarted or failed over answers well within it).
constexpr absl::Duration kFinalReportPatience = absl::Minutes(10);

volatile std::sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int signal) { g_stop_signal = signal; }

// When the ranks got going (store_protocol.h, berth/startup/<rank>): the
// latest rank's main() and the latest rank's join of the group.
struct GroupStartup {
  int64_t ranks_running_unix_us = 0;
  int64_t group_joined_unix_us = 0;
};

// The head's report of the built-in ranks' progress.
void ReportBuiltin(HeadReporter& head, const Progress& progress,
                   const std::string& latest_checkpoint,
                   const std::optional<GroupStartup>& startup) {
  v1::ReportTrainProgressRequest request;
  request.set_step(progress.step);
  request.set_loss(progress.loss);
  request.set_latest_checkpoint(latest_checkpoint);
  if (startup.has_value()) {
    request.set_ranks_running_unix_us(startup->ranks_running_unix_us);
    request.set_group_joined_unix_us(startup->group_joined_unix_us);
  }
  head.Report(std::move(request));
}

// What the trainer has seen of the job so far.
struct JobView {
  std::string progress_text;
  Progress progress;
  std::string checkpoint_step_text;
  std::string latest_checkpoint;
};

std::string Get(c10d::Store& store, const std::string& key) { return FromBytes(store.get(key)); }

// Prints new progress; returns whether there was any.
bool RelayProgress(c10d::Store& store, JobView& view) {
  if (!store.check({kProgressKey})) return false;
  std::string text = Get(store, kProgressKey);
  if (text == view.progress_text) return false;
  view.progress_text = std::move(text);
  absl::StatusOr<Progress> progress = ParseProgress(view.progress_text, kProgressKey);
  if (!progress.ok()) {
    LogWarning(progress.status().message());
    return false;
  }
  view.progress = *progress;
  std::printf("step %llu loss %.6g\n", static_cast<unsigned long long>(progress->step),
              progress->loss);
  return true;
}

// Writes a new checkpoint to its file; returns whether there was one. The
// step is read from the checkpoint itself: the step key only signals that
// rank 0 published one, and a newer one may land between the two reads.
bool SaveNewCheckpoint(c10d::Store& store, const std::string& dir, JobView& view) {
  if (!store.check({kCheckpointStepKey})) return false;
  std::string step_text = Get(store, kCheckpointStepKey);
  if (step_text == view.checkpoint_step_text) return false;
  view.checkpoint_step_text = std::move(step_text);
  const std::string data = Get(store, kCheckpointDataKey);
  absl::StatusOr<uint64_t> step = CheckpointStep(data);
  if (!step.ok()) {
    LogWarning(kCheckpointDataKey, ": ", step.status().message());
    return false;
  }
  const std::string path = CheckpointPath(dir, *step);
  if (absl::Status s = WriteFileAtomically(path, data); !s.ok()) {
    LogError("checkpoint of step ", *step, " not saved: ", s.message());
    return false;
  }
  view.latest_checkpoint = path;
  std::printf("checkpoint %llu %s\n", static_cast<unsigned long long>(*step), path.c_str());
  return true;
}

// Once every rank has published its start-up times: the latest of each
// (nullopt, logged, if one is malformed; the job goes on without them).
std::optional<GroupStartup> CollectStartup(c10d::Store& store,
                                           const std::vector<std::string>& keys) {
  GroupStartup group;
  for (const std::string& key : keys) {
    absl::StatusOr<RankStartup> rank = ParseRankStartup(Get(store, key), key);
    if (!rank.ok()) {
      LogWarning(rank.status().message());
      return std::nullopt;
    }
    group.ranks_running_unix_us = std::max(group.ranks_running_unix_us, rank->main_unix_us);
    group.group_joined_unix_us = std::max(group.group_joined_unix_us, rank->joined_unix_us);
  }
  std::printf("all %zu ranks joined the group %.3f s after the last one started\n", keys.size(),
              static_cast<double>(group.group_joined_unix_us - group.ranks_running_unix_us) / 1e6);
  return group;
}

// 0 if every rank ended with the same parameters, 1 if not.
int JudgeEnd(c10d::Store& store, uint32_t world_size) {
  std::vector<std::string> hashes;
  for (uint32_t r = 0; r < world_size; ++r) {
    hashes.push_back(Get(store, DoneKey(r)));
    std::printf("rank %u params %s\n", r, hashes.back().c_str());
  }
  for (uint32_t r = 1; r < world_size; ++r) {
    if (hashes[r] != hashes[0]) {
      LogError("ranks ended with different parameters (rank 0 ", hashes[0], ", rank ", r, " ",
               hashes[r], ")");
      return 1;
    }
  }
  std::printf("all %u ranks done: params %s\n", world_size, hashes[0].c_str());
  return 0;
}

int Serve(const TrainerFlags& flags, const std::optional<std::string>& resume_checkpoint,
          uint64_t resume_step) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(flags.port);
  options.isServer = true;  // listens on every interface
  options.waitWorkers = false;
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  for (const auto& [key, value] : ResumePointWrites(resume_checkpoint, resume_step)) {
    store->set(key, ToBytes(value));
  }
  std::printf("store on port %u for %u ranks%s\n", flags.port, flags.world_size,
              resume_checkpoint.has_value()
                  ? absl::StrCat(", resuming after step ", resume_step).c_str()
                  : "");

  std::optional<HeadReporter> head;
  if (!flags.head.empty()) head.emplace(flags.head, flags.job_id);
  std::vector<std::string> done_keys;
  std::vector<std::string> startup_keys;
  for (uint32_t r = 0; r < flags.world_size; ++r) {
    done_keys.push_back(DoneKey(r));
    startup_keys.push_back(StartupKey(r));
  }
  std::optional<GroupStartup> startup;
  bool startup_collected = false;
  JobView view;
  const absl::Time deadline = absl::Now() + absl::Seconds(flags.timeout_s);
  while (g_stop_signal == 0) {
    // Checked before the checkpoint: rank 0 publishes its last checkpoint
    // before it reports done, so this pass still saves it.
    const bool all_done = store->check(done_keys);
    const bool progressed = RelayProgress(*store, view);
    const bool checkpointed = SaveNewCheckpoint(*store, flags.checkpoint_dir, view);
    bool joined = false;
    if (!startup_collected && store->check(startup_keys)) {
      startup = CollectStartup(*store, startup_keys);
      startup_collected = true;
      joined = startup.has_value();
    }
    if (head.has_value() && (progressed || checkpointed || joined)) {
      ReportBuiltin(*head, view.progress, view.latest_checkpoint, startup);
    } else if (head.has_value()) {
      head->Retry();
    }
    if (all_done) {
      const int code = JudgeEnd(*store, flags.world_size);
      // The job's last step and checkpoint reach the head before the
      // trainer's exit does, even if the head is away now.
      if (head.has_value()) head->Flush(kFinalReportPatience, g_stop_signal);
      return code;
    }
    if (absl::Now() > deadline) {
      LogError("--timeout-s ", flags.timeout_s, " passed before all ranks were done");
      return 1;
    }
    absl::SleepFor(kPollInterval);
  }
  LogInfo("received ", strsignal(g_stop_signal), ": exiting");
  return 128 + g_stop_signal;
}

}  // namespace

int RunTrainer(const TrainerFlags& flags) {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  if (absl::Status s = MakeDirectories(flags.checkpoint_dir); !s.ok()) {
    LogError("--checkpoint-dir: ", s.message());
    return kUsageExitCode;
  }
  std::optional<std::string> resume_checkpoint;
  uint64_t resume_step = 0;
  if (!flags.resume_from.empty()) {
    absl::StatusOr<CheckpointFile> file = ReadCheckpointFile(flags.resume_from);
    if (!file.ok()) {
      LogError("--resume-from: ", file.status().message());
      return kUsageExitCode;
    }
    resume_checkpoint = std::move(file->bytes);
    resume_step = file->step;
  }
  try {
    return Serve(flags, resume_checkpoint, resume_step);
  } catch (const c10::Error& e) {
    LogError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    LogError(e.what());
  }
  return 1;
}

}  // namespace berth
