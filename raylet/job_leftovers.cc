#include "raylet/job_leftovers.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// A folder no known worker used is that old before it goes: a worker being
// started makes its folder a moment before the node records the worker.
constexpr absl::Duration kUnknownFolderAge = absl::Minutes(1);
constexpr char kNoJob[] = "no-job";  // WorkerProcessManager's folder for them

struct JobOnNode {
  bool in_use = false;   // a worker runs, or a bundle of its groups is held
  int64_t ended_ms = 0;  // its last worker's end
  std::vector<std::string> workers;
};

}  // namespace

Leftovers FindLeftovers(absl::Time now, absl::Duration retention,
                        const std::vector<WorkerRecord>& workers,
                        const std::set<std::string>& held_groups,
                        const std::vector<WorkFolder>& folders) {
  std::map<std::string, JobOnNode> jobs;  // by job id; a worker without one, by its own id
  bool no_job_runs = false;
  for (const WorkerRecord& w : workers) {
    const bool runs = w.state == WorkerState::kRunning;
    no_job_runs |= runs && w.job_id.empty();
    JobOnNode& job = jobs[w.job_id.empty() ? absl::StrCat("worker/", w.worker_id) : w.job_id];
    job.in_use |= runs || held_groups.count(w.placement_group_id) > 0;
    job.ended_ms = std::max(job.ended_ms, w.ended_unix_ms);
    job.workers.push_back(w.worker_id);
  }
  Leftovers leftovers;
  for (const WorkFolder& folder : folders) {
    auto job = jobs.find(folder.name);
    const bool known = job != jobs.end();
    const bool in_use =
        folder.name == kNoJob ? no_job_runs : job != jobs.end() && job->second.in_use;
    if (!in_use && (known || now - folder.modified >= kUnknownFolderAge)) {
      leftovers.work_dirs.push_back(folder.name);
    }
  }
  const int64_t kept_since_ms = absl::ToUnixMillis(now - retention);
  for (const auto& [id, job] : jobs) {
    if (!job.in_use && job.ended_ms <= kept_since_ms) {
      leftovers.workers.insert(leftovers.workers.end(), job.workers.begin(), job.workers.end());
    }
  }
  return leftovers;
}

}  // namespace berth
