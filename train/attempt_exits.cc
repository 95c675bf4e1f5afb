#include "train/attempt_exits.h"

#include <algorithm>
#include <csignal>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "train/attempt_plan.h"

namespace berth {
namespace {

// What the raylet of a new life (which killed the old one's workers with
// it) says of a worker it no longer knows.
v1::WorkerStatus LostWorker(absl::Time now, const std::string& worker, const std::string& node) {
  v1::WorkerStatus lost;
  lost.set_worker_id(worker);
  lost.set_state(v1::WORKER_STATE_FAILED);
  lost.set_signal(SIGKILL);
  lost.set_error(
      absl::StrCat("its raylet on node ", node, " no longer knows it (the raylet restarted)"));
  lost.set_failed_unix_us(absl::ToUnixMicros(now));
  return lost;
}

}  // namespace

bool ExitedWithFailure(const v1::WorkerStatus& s) { return s.signal() != 0 || s.exit_code() != 0; }

bool StillRuns(const v1::WorkerStatus& w) {
  return w.state() == v1::WORKER_STATE_RUNNING || w.state() == v1::WORKER_STATE_STARTING;
}

ExitTally TallyExits(const JobProcesses& processes, const ProcessExits& exits) {
  ExitTally tally;
  for (const auto& [id, node] : processes) {
    if (!IsHelperProcess(id)) ++tally.ranks;
    auto exit = exits.find(id);
    if (exit == exits.end()) continue;
    if (ExitedWithFailure(exit->second)) {
      tally.any_failed = true;
    } else if (!IsHelperProcess(id)) {
      ++tally.ranks_done;
    }
  }
  return tally;
}

bool ReachableRanksExited(const JobProcesses& processes, const std::set<std::string>& unreachable,
                          const ProcessExits& exits) {
  bool all_exited = true;
  for (const auto& [id, node] : processes) {
    if (!IsHelperProcess(id) && unreachable.count(node) == 0 && exits.count(id) == 0) {
      all_exited = false;
    }
  }
  return all_exited;
}

bool AllExited(const std::vector<std::string>& workers, const ProcessExits& exits) {
  return std::all_of(workers.begin(), workers.end(),
                     [&](const std::string& w) { return exits.count(w) > 0; });
}

std::set<std::string> NodesOwingExits(const JobProcesses& processes, const ProcessExits& exits) {
  std::set<std::string> nodes;
  for (const auto& [id, node] : processes) {
    if (exits.count(id) == 0) nodes.insert(node);
  }
  return nodes;
}

void RecordListedExits(absl::Time now, const JobProcesses& processes, const WorkersListed& listed,
                       ProcessExits* exits) {
  for (const auto& [worker, node] : processes) {
    auto on_node = listed.by_node.find(node);
    // A dead node ends the attempt by itself; an unreachable one's
    // heartbeats decide.
    if (on_node == listed.by_node.end() || !on_node->second.ok()) continue;
    if (exits->count(worker) > 0) continue;
    const v1::WorkerStatus* known = nullptr;
    for (const v1::WorkerStatus& w : on_node->second->workers()) {
      if (w.worker_id() == worker) known = &w;
    }
    if (known == nullptr) {
      (*exits)[worker] = LostWorker(now, worker, node);
    } else if (!StillRuns(*known)) {
      (*exits)[worker] = *known;
    }
  }
}

std::set<std::string> TakeListedExits(const JobProcesses& processes, const WorkersListed& listed,
                                      ProcessExits* exits) {
  std::set<std::string> unreachable;
  for (const auto& [node, workers] : listed.by_node) {
    if (!workers.ok()) {
      unreachable.insert(node);
      continue;
    }
    // Exits the raylets know and whose reports have not come yet.
    for (const v1::WorkerStatus& w : workers->workers()) {
      if (processes.count(w.worker_id()) > 0 && !StillRuns(w)) exits->emplace(w.worker_id(), w);
    }
  }
  return unreachable;
}

uint32_t ScanForResume(const std::string& job_id, uint32_t attempt, const WorkersListed& listed,
                       JobProcesses* running) {
  uint32_t next = attempt;
  for (const auto& [node, workers] : listed.by_node) {
    if (!workers.ok()) continue;
    for (const v1::WorkerStatus& w : workers->workers()) {
      if (std::optional<uint32_t> a = AttemptOf(job_id, w.worker_id())) {
        next = std::max(next, *a + 1);
      }
      if (StillRuns(w)) (*running)[w.worker_id()] = node;
    }
  }
  return next;
}

}  // namespace berth
