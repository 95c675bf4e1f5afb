// What a JobReconciler (job_reconciler.h) and its driver say to each other:
// the world it is shown before each Step (what the head says now of the
// job's groups and nodes), the actions it asks its driver to carry out, and
// the results the driver hands back. Also what the reconciler's policies
// (failure_triage.h, elastic_membership.h) read of that world. Plain data
// and pure questions about it: no threads, clocks or RPCs.
#ifndef BERTH_TRAIN_JOB_WORLD_H_
#define BERTH_TRAIN_JOB_WORLD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/raylet.pb.h"
#include "berth/v1/state.pb.h"
#include "placement/placement_group_spec.h"

namespace berth {

// The processes of an attempt: worker id -> node id.
using JobProcesses = std::map<std::string, std::string>;

// What the head says now, read just before each Step.
struct JobWorld {
  // The job's group (read when placement_group_id() is set).
  absl::StatusOr<v1::PlacementGroupInfo> group = absl::NotFoundError("no placement group");
  // The job's elastic groups (elastic_group_ids()), by id.
  std::map<std::string, absl::StatusOr<v1::PlacementGroupInfo>> elastic;
  // Those of WatchedNodes() that are ALIVE or DRAINING (have a raylet).
  // WatchedNodes() covers every node any phase reached in one Step asks
  // about, so a Step that moves on may still use it.
  std::set<std::string> alive;
};

// The actions, each answered by the result of the same name below.
struct CreateGroup {
  PlacementGroupSpec spec;
  v1::CreatePlacementGroupRequest meta;
};
struct AllocatePort {  // the rendezvous port on rank 0's node
  std::string node_id;
};
struct StartProcesses {  // each node's in order; the nodes in parallel
  std::vector<std::pair<std::string, std::vector<v1::WorkerSpec>>> by_node;
};
struct ListWorkers {  // the job's workers on each node
  std::set<std::string> nodes;
};
struct StopProcesses {
  JobProcesses processes;
  absl::Duration grace;  // the job's: SIGTERM, then SIGKILL after it
};
struct RemoveGroup {
  std::string placement_group_id;
};
struct ReleaseGroup {  // a preempted or moving group's processes stopped: let go of its bundles
  std::string placement_group_id;
};
using JobAction = std::variant<CreateGroup, AllocatePort, StartProcesses, ListWorkers,
                               StopProcesses, RemoveGroup, ReleaseGroup>;

struct GroupCreated {
  absl::StatusOr<std::string> placement_group_id;
};
struct PortAllocated {
  absl::StatusOr<std::pair<std::string, uint16_t>> endpoint;  // host (as peers reach it), port
};
struct ProcessesStarted {
  absl::Status status;   // the first failure; the others were not started
  JobProcesses started;  // those that did start (to be stopped on a failure)
};
struct WorkersListed {
  // UNAVAILABLE for a node that is not alive or whose raylet did not answer.
  std::map<std::string, absl::StatusOr<v1::ListWorkersResponse>> by_node;
};
struct StopsSent {
  std::vector<std::string> awaited;  // the processes on live nodes, whose exits to wait for
};
struct GroupRemoved {};
struct GroupReleased {
  absl::Status status;
};
using JobActionResult = std::variant<GroupCreated, PortAllocated, ProcessesStarted, WorkersListed,
                                     StopsSent, GroupRemoved, GroupReleased>;

// The nodes `processes` run on.
std::set<std::string> NodesOf(const JobProcesses& processes);

// The job's group no longer exists: someone removed it (a job removes its
// groups only once its end is written, which a restarted head carries out).
bool GroupGone(const JobWorld& world);

// A group the attempt may run workers in: placed, and neither being
// preempted nor moving off a draining node.
bool GroupUsable(const absl::StatusOr<v1::PlacementGroupInfo>& group);

// The job's group, or else one of its elastic groups, that is moving off a
// draining node (and not being preempted, which comes first); null if none.
const v1::PlacementGroupInfo* MovingGroup(const JobWorld& world);

// The first of `nodes` that is no longer alive, if any.
std::optional<std::string> FirstLostNode(const std::set<std::string>& nodes, const JobWorld& world);

// The cause of an attempt whose node `node_id` was lost.
std::string NodeDeathCause(const std::string& node_id);

}  // namespace berth

#endif  // BERTH_TRAIN_JOB_WORLD_H_
