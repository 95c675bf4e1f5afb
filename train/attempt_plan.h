// What one attempt of a train job starts, and where: the trainer (the job's
// driver, first on rank 0's node), a store host for a per-rank Python
// command, then the ranks (or one launcher per node), each with torchrun's
// environment (worker_env.h). Pure: the caller has placed the group and
// reserved the rendezvous port, and starts the processes itself.
#ifndef BERTH_TRAIN_ATTEMPT_PLAN_H_
#define BERTH_TRAIN_ATTEMPT_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/raylet.pb.h"
#include "berth/v1/train.pb.h"
#include "train/rank_assignment.h"

namespace berth {

// An attempt's processes are named <job>-a<attempt>-<role>: -trainer, -store,
// -r<rank> (a rank), -n<node rank> (a launcher).

// The worker id of an attempt's process in `role` ("trainer", "r1").
std::string AttemptProcessId(const std::string& job_id, uint32_t attempt, const std::string& role);
// The processes of the attempt `job` records (its attempt and ranks),
// worker id -> node id: each rank's, and the trainer's and the store
// host's on rank 0's node.
std::map<std::string, std::string> RecordedProcesses(const v1::TrainJobInfo& job);

// "rank 1", "the trainer", "the launcher of node rank 0": what a process of
// an attempt is, from its worker id.
std::string DescribeProcess(const std::string& worker_id);
// "was killed by signal 9", "exited with code 1".
std::string DescribeExit(const v1::WorkerStatus& status);
// A failure cause a person can act on: which process, on which node, how it
// ended, and what it said (the raylet's WorkerStatus.error: the headline,
// then its context, indented).
std::string DescribeFailure(const std::string& worker_id, const std::string& node_id,
                            const v1::WorkerStatus& status);
// When a process failed (its error's time, else its end), to find an
// attempt's first failure.
int64_t FailedAtUs(const v1::WorkerStatus& status);
// The attempt a worker id of the job belongs to.
std::optional<uint32_t> AttemptOf(const std::string& job_id, const std::string& worker_id);
// The trainer and the store host: the processes of an attempt that are not
// ranks.
bool IsHelperProcess(const std::string& worker_id);

// Where the group's bundles are, by bundle index.
std::vector<BundleSite> SitesOf(const v1::PlacementGroupInfo& group);

struct AttemptInputs {
  std::string job_id;
  v1::TrainJobSpec spec;
  std::string placement_group_id;
  uint32_t attempt = 0;
  std::vector<RankedWorker> ranks;  // AssignRanks of the group's placement
  std::string master_addr;          // rank 0's node, as its peers reach it
  uint16_t master_port = 0;         // reserved on rank 0's node
  std::string job_dir;              // storage_path (or the head's root) / job id
  std::string latest_checkpoint;    // to resume from; "" = start afresh
  std::string head_address;         // the trainer reports here
  std::string worker_binary;        // berth-worker, as the raylets find it
  std::string relay_binary;         // berth-relay (a command's driver), likewise
  std::string cluster_token;        // the trainer's only (ReportTrainProgress)
};

struct AttemptPlan {
  // The processes to start on each node, in order: rank 0's node first, the
  // trainer first on it.
  std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> by_node;
  // Every rank (world-rank order), with the worker id of its process.
  std::vector<v1::WorkerRank> ranks;
};

// Errors when the placement does not suit the launcher (torchrun needs as
// many ranks on every node) or its argv cannot be built.
absl::StatusOr<AttemptPlan> PlanAttempt(const AttemptInputs& in);

}  // namespace berth

#endif  // BERTH_TRAIN_ATTEMPT_PLAN_H_
