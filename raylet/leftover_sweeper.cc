#include "raylet/leftover_sweeper.h"

#include <chrono>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/log.h"
#include "raylet/job_leftovers.h"

namespace berth {

LeftoverSweeper::LeftoverSweeper(Options options, WorkerProcessManager* workers)
    : options_(std::move(options)),
      workers_(workers),
      thread_(options_.every, [this] { SweepOnce(absl::Now()); }) {}

void LeftoverSweeper::SweepOnce(absl::Time now) {
  namespace fs = std::filesystem;
  std::vector<WorkFolder> folders;
  std::error_code error;
  for (fs::directory_iterator it(options_.work_root, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code ignored;
    const fs::file_time_type modified = it->last_write_time(ignored);
    folders.push_back({it->path().filename().string(),
                       absl::FromChrono(std::chrono::system_clock::now() +
                                        (modified - fs::file_time_type::clock::now()))});
  }
  // Workers listed after the folders: one started between the two is known.
  const std::set<std::string> held = options_.held_groups();
  const Leftovers left = FindLeftovers(now, options_.retention, workers_->List(), held, folders);
  for (const std::string& name : left.work_dirs) {
    const fs::path dir = fs::path(options_.work_root) / name;
    fs::remove_all(dir, error);
    if (error) {
      LogWarning("removing ", dir.string(), ": ", error.message());
    } else {
      LogInfo("removed ", dir.string(), ": no job runs in it on this node");
    }
  }
  if (!left.workers.empty()) workers_->Forget(left.workers);
}

}  // namespace berth
