// PlacementGroupManager: the head's placement groups, their queue and their
// life cycle. Pure: the caller passes the time in, serializes access and
// carries out the returned work (two-phase commits, cancellations) with the
// raylets; no gRPC, threads or clocks.
//
// Life cycle, as in Ray: PENDING -> (placed, reserved in the head's table)
// -> PREPARED -> CREATED; RESCHEDULING when bundles are lost with a node;
// REMOVED. Unlike Ray several groups may be in flight at once: the table
// reserves at decision time, so no GPU is promised twice.
//
// Admission goes through the QueueScheduler (queueing/queue_scheduler.h):
// every group is a gang of its queue, admitted whole against the queue's
// quota and the cluster (PlacerCapacity over the head's table), in priority,
// arrival and fair-share order, with reservations, backfill and preemption.
// A pass runs when something changed (a group came or went, nodes changed,
// a preempted group let go) and at least every max_backoff_ms. An admitted
// group that loses bundles, or whose commit fails, keeps its quota, and
// the queue scheduler admits what it lacks first (QueueScheduler::Lacks,
// PlaceLacking), with backoff (100 ms x1.5, capped at 1 s).
//
// Preemption: a victim is marked preempting (its bundles still held). One
// created directly is released at once and waits PENDING again; a train
// job's group waits for its job to stop its processes (LetGo).
//
// Drains: a group with bundles on a DRAINING node is moving. A train job's
// group moves when its job stopped its processes (at a checkpoint, or at
// the drain's deadline: LetGo); any other group at the deadline. A group
// with a bundle on an unhealthy GPU (NodeManager::UnhealthyGpus) moves that
// bundle at once: its job ends the attempt, then LetGo; any other group at
// the next look. The bundles moved are placed elsewhere first, like those
// of a dead node.
#ifndef BERTH_SCHEDULER_PLACEMENT_GROUP_MANAGER_H_
#define BERTH_SCHEDULER_PLACEMENT_GROUP_MANAGER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/state.pb.h"
#include "common/backoff.h"
#include "placement/bundle_placer.h"
#include "placement/placement_scorer.h"
#include "queueing/placer_capacity.h"
#include "queueing/queue_scheduler.h"
#include "scheduler/node_manager.h"

namespace berth {

struct SchedulerConfig {
  int64_t initial_backoff_ms = 100;
  double backoff_multiplier = 1.5;
  int64_t max_backoff_ms = 1000;
  // How long a group that does not fit waits before it is tried again.
  BackoffPolicy backoff() const {
    return {absl::Milliseconds(initial_backoff_ms), backoff_multiplier,
            absl::Milliseconds(max_backoff_ms)};
  }
  // Groups in two-phase commit at once. Single-node groups ride in batched
  // raylet calls (bundle_op_batcher.h), so many can be in flight cheaply.
  size_t max_in_flight = 1024;
  size_t max_removed_kept = 10000;  // REMOVED groups remembered for Get/List
  // Admission limits (berth-head flags); a request over one is refused
  // with an error naming the field and the flag, and changes nothing.
  size_t max_bundles_per_group = 1024;  // --max-bundles-per-group
  size_t max_pending_groups = 10000;    // --max-pending-groups
  size_t max_name_length = 128;         // --max-name-length
  // How to rank the nodes a bundle fits (--placement-scorer); the default
  // learns the GPU task distribution from the groups created (placement_scorer.h).
  ScorerKind placement_scorer = ScorerKind::kFragmentation;
  PlacementScorerOptions scorer_options;
  QueueSchedulerOptions queueing;
};

// One bundle to reserve on one raylet.
struct RayletBundle {
  uint32_t bundle_index = 0;
  ResourceSet resources;
  std::vector<GpuShare> gpus;
};

// The bundles of one group on one node.
struct NodeBundles {
  std::string node_id;
  std::string address;
  std::vector<RayletBundle> bundles;
};

// A two-phase commit to run: Prepare on every node, then Commit; on any
// failure Cancel what was prepared. Report the end with OnCommitDone.
struct CommitTask {
  std::string placement_group_id;
  uint64_t attempt = 0;
  std::vector<NodeBundles> nodes;
};

// Bundles to release on a raylet (a removed group, an abandoned commit).
struct CancelTask {
  std::string placement_group_id;
  std::string address;
  std::vector<uint32_t> bundle_indices;
  std::string request_id;  // unique per cancellation: raylets dedupe by it
};

// Hooks for the adapter's instruments (metrics). Called synchronously under
// the caller's lock; implementations must be quick and must not call back.
// BeforeDecision/AfterDecision bracket one core placement decision, so the
// adapter can time it.
class PlacementObserver : public PlacerCapacity::DecisionObserver {
 public:
  // A group became CREATED `latency_ms` after it was created, or after it
  // lost bundles and went RESCHEDULING.
  virtual void OnCreated(int64_t latency_ms) {}
  // A gang of `queue` was admitted after waiting `waited_ms`, or preempted.
  virtual void OnAdmitted(const std::string& queue, int64_t waited_ms) {}
  virtual void OnPreempted(const std::string& queue) {}
};

// What a pass's preemptions ask of the caller.
struct PreemptionWork {
  // Of groups created directly, released at once, and of a required-topology
  // gang's kept bundles when it moves whole to another domain.
  std::vector<CancelTask> cancels;
  // Train jobs' groups being preempted: their jobs stop, then LetGo.
  std::vector<std::string> job_groups;
};

class PlacementGroupManager {
 public:
  PlacementGroupManager(NodeResourceTable* table, const NodeManager* nodes, SchedulerConfig config)
      : table_(table),
        nodes_(nodes),
        config_(config),
        scorer_(config.placement_scorer, config.scorer_options),
        capacity_(table, &scorer_),
        queues_(QueueConfig(), config.queueing) {
    queues_.set_gang_name([this](const std::string& id) { return GangName(id); });
    queues_.set_lacking_backoff([policy = config.backoff()](int64_t previous_ms) {
      return absl::ToInt64Milliseconds(policy.After(absl::Milliseconds(previous_ms)));
    });
  }
  PlacementGroupManager(const PlacementGroupManager&) = delete;
  PlacementGroupManager& operator=(const PlacementGroupManager&) = delete;

  // Not owned; must outlive the manager. nullptr = no observer.
  void set_observer(PlacementObserver* observer) {
    observer_ = observer;
    capacity_.set_observer(observer);
  }

  // The queues groups are admitted through (QueueService's configuration).
  const QueueConfig& queue_config() const { return queues_.config(); }
  // Replaces it; a queue that a live group names may not be deleted
  // (FAILED_PRECONDITION naming it), and then nothing changes.
  absl::Status Reconfigure(QueueConfig config);
  // A queue's usage, borrowing, fair share and gangs.
  QueueView Queue(const std::string& name) const;
  // Every queue's state (or only `only`'s), by name, with its first waiting gangs.
  std::vector<v1::QueueStatus> QueueStatuses(
      const std::optional<std::string>& only = std::nullopt) const;

  // Validates and queues a group under `new_id`. Idempotent by request_id:
  // a retry returns the first call's id; the same request_id with other
  // arguments is INVALID_ARGUMENT. A name used by a live group is
  // ALREADY_EXISTS.
  absl::StatusOr<std::string> Create(const v1::CreatePlacementGroupRequest& request,
                                     const std::string& new_id, int64_t now_ms);
  // Queues a group whose bundles berth built itself (the train layer's, which
  // carry `accelerator_type:` resources users may not write). `meta` gives
  // name, job_id, priority and request_id; its bundles are ignored. A
  // request_id that already made a group of the same job returns that
  // group: a head restarted between creating a job's group and recording
  // it in the job asks again.
  absl::StatusOr<std::string> CreateFromSpec(PlacementGroupSpec spec,
                                             const v1::CreatePlacementGroupRequest& meta,
                                             const std::string& new_id, int64_t now_ms);
  // Creates many groups, all or nothing: each request is checked as Create
  // checks it (errors prefixed `requests[i].`; the batch must fit under
  // max_pending_groups) before any is created. new_ids[i] is the id of a new
  // group for requests[i]; a retried request keeps its first id.
  absl::StatusOr<std::vector<std::string>> CreateBatch(
      const google::protobuf::RepeatedPtrField<v1::CreatePlacementGroupRequest>& requests,
      const std::vector<std::string>& new_ids, int64_t now_ms);
  // Removes a group and returns what to release on the raylets. Idempotent;
  // an unknown id is NOT_FOUND. A group in two-phase commit is released when
  // its commit ends.
  absl::StatusOr<std::vector<CancelTask>> Remove(const std::string& id);

  absl::Status Get(const v1::GetPlacementGroupRequest& request, v1::PlacementGroupInfo* info) const;
  // Group `id` as Get shows it; NOT_FOUND naming placement_group_id.
  absl::StatusOr<v1::PlacementGroupInfo> Info(const std::string& id) const;
  void List(const v1::ListPlacementGroupsRequest& request,
            v1::ListPlacementGroupsResponse* response) const;
  std::optional<v1::PlacementGroupState> State(const std::string& id) const;
  // Whether the group is a train job's (its job is told of its changes).
  bool OfJob(const std::string& id) const;
  // Whether `team` may use group `id` (its queue's grant, QueueConfig::MayUse);
  // an unknown group is OK here (the call names it NOT_FOUND).
  absl::Status MayUse(const std::string& id, absl::string_view team, absl::string_view field) const;
  // Whether the keys of `topology` are known: some node carries each, or it
  // is one of kTopologyLabels. INVALID_ARGUMENT names the key under `field`.
  absl::Status CheckTopologyKeys(const Topology& topology, absl::string_view field) const;
  // Whether a gang may be queued as asked: its queue and priority class
  // known, its topology's keys known. The one check of both a group's
  // create request and a train job's spec; errors name the request's own
  // fields (`fields`).
  struct QueueingFields {
    absl::string_view queue = "queue";
    absl::string_view priority_class = "priority_class";
    absl::string_view topology = "topology";
  };
  absl::Status CheckQueueing(absl::string_view queue, absl::string_view priority_class,
                             int32_t priority, const Topology& topology,
                             const QueueingFields& fields) const;
  // What places the groups, and what it has learned.
  const PlacementScorer& scorer() const { return scorer_; }

  // Places every due group that fits, reserving in the table; returns the
  // commits to run.
  std::vector<CommitTask> Schedule(int64_t now_ms);
  // When the next waiting group is due, if any is waiting on time.
  std::optional<int64_t> NextDue() const;
  // Every node of the commit prepared its bundles.
  void OnPrepared(const std::string& id, uint64_t attempt);
  // The commit ended; `result` is not OK if a prepare or commit failed (the
  // committer has already cancelled what it prepared). Returns releases to
  // send when the group was removed meanwhile.
  std::vector<CancelTask> OnCommitDone(const std::string& id, uint64_t attempt,
                                       const absl::Status& result, int64_t now_ms);
  // A node joined or came back: infeasible groups are worth another try.
  void OnNodesChanged(int64_t now_ms);
  // A node died: its bundles are lost and their groups go RESCHEDULING.
  // Returns those groups.
  std::vector<std::string> OnNodeDead(const std::string& node_id, int64_t now_ms);
  // `node_id`'s raylet let go of `released` (a release of what it held
  // beyond a snapshot of this head's books, sent while bundles placed after
  // the snapshot could reach it): those the books say it holds are lost as
  // with a dead node, those of a group in two-phase commit once it ends.
  // Returns the groups that lost bundles.
  std::vector<std::string> OnBundlesReleased(
      const std::string& node_id, const google::protobuf::RepeatedPtrField<v1::BundleKey>& released,
      int64_t now_ms);
  // What the last Schedule calls' preemptions ask of the caller.
  PreemptionWork TakePreemptions();
  // A job stopped its processes as its group asked: a preempted group lets
  // go of its bundles and waits PENDING, in its old place in line; a moving
  // one (below) lets go of those on DRAINING nodes and goes RESCHEDULING,
  // placing them elsewhere first. Returns what to release on the raylets.
  // FAILED_PRECONDITION if it is neither, or is in two-phase commit (ask
  // again when that ends).
  absl::StatusOr<std::vector<CancelTask>> LetGo(const std::string& id, int64_t now_ms);
  // Drains (NodeManager::Drain). A group holding bundles on a DRAINING node
  // is `moving` (PlacementGroupInfo): derived from the nodes, so a drain's
  // change, an undrain or a head restart needs no record of its own. The
  // groups on `node_id` (whose jobs to tell when its drain begins or ends).
  std::vector<std::string> GroupsOn(const std::string& node_id) const;
  // Groups not of a job let go of their bundles on nodes whose drain
  // deadline passed by `now_ms` (a job's group moves with its job, LetGo).
  // Returns what to release on the raylets.
  std::vector<CancelTask> MoveAtDrainDeadlines(int64_t now_ms);
  // The group's job saved a checkpoint: preempting the group now loses only
  // the work since (QueueScheduler::Checkpointed). Unknown ids are ignored.
  void OnCheckpoint(const std::string& id, int64_t now_ms) { queues_.Checkpointed(id, now_ms); }

  void ClusterStatus(v1::GetClusterStatusResponse* response) const;

  // Persistence (the head writes these to its StateStore). Ids of groups
  // whose record changed since the last call; a group that is gone or
  // REMOVED has no record (Export returns nullopt: delete it).
  std::vector<std::string> TakeChanged();
  std::optional<v1::PlacementGroupRecord> Export(const std::string& id) const;
  // Brings back a group written by Export, after the nodes were restored:
  // its committed bundles are reserved again exactly (same nodes, same GPU
  // instances); bundles on nodes that are gone are lost, so the group
  // waits RESCHEDULING; a group caught in two-phase commit is retried.
  absl::Status Restore(const v1::PlacementGroupRecord& record, int64_t now_ms);
  // Bundles the head believes `node_id` holds (committed or in commit).
  std::vector<v1::HeldBundle> BundlesOn(const std::string& node_id) const;
  // What the default scorer learned, when it was (re)built or its window
  // grew by an eighth since the last call; nullopt otherwise.
  std::optional<v1::WorkloadWindowRecord> TakeWorkloadChange();
  // An earlier head's WorkloadWindowRecord, before any group is restored:
  // the scorer places by it at once, and restored groups (already in it)
  // are not learned again. INVALID_ARGUMENT naming the entry otherwise.
  absl::Status RestoreWorkload(const v1::WorkloadWindowRecord& record);

 private:
  // The id of the group created earlier with request's request_id, if any;
  // *status says INVALID_ARGUMENT if it was created with other arguments.
  std::optional<std::string> Existing(const v1::CreatePlacementGroupRequest& request,
                                      absl::Status* status) const;
  // Whether a new group may be created, with `also_pending` more groups
  // about to be queued before it.
  absl::Status CheckNew(const PlacementGroupSpec& spec, const v1::CreatePlacementGroupRequest& meta,
                        size_t also_pending) const;
  // Creates and queues a checked group; returns its id.
  std::string Insert(PlacementGroupSpec spec, const v1::CreatePlacementGroupRequest& meta,
                     const std::string& new_id, int64_t now_ms);

  // Why a group waits (or was let go of): the kind, rendered to text by
  // ReasonText; Group::detail and Group::lost carry what it names.
  enum class Reason : uint8_t {
    kNone,                // CREATED
    kToBeScheduled,       // new, before its first pass
    kRestarted,           // restored PENDING after a head restart
    kRestartedLost,       // restored with `lost` bundles missing
    kQueue,               // waiting in its queue: the queue scheduler's reason
    kPlacer,              // admitted, placing what it lacks (QueueScheduler::WhyLacking)
    kCommitting,          // in two-phase commit
    kCommitFailed,        // detail: the commit's error
    kNodeDiedInCommit,    // a node died during its commit
    kLostWithNode,        // `lost` bundles lost with a node that died (detail: its id)
    kReleasedByNode,      // `lost` bundles let go of by a node as it synced (detail: its id)
    kStopping,            // preempted, its job stopping (preempted_by says why)
    kWaitingReadmission,  // preempted and let go (preempted_by says why)
    kMovedOffNode,        // `lost` bundles moved off a draining node (detail: its id)
    kMovedOffGpu,         // `lost` bundles moved off an unhealthy GPU (detail: which, why)
    kRemoved,
  };

  // What the manager keeps of a group: its API identity and life cycle.
  // How it is scheduled (queue, priority, admission, preemption, place in
  // line) and what is placed of it are its gang's record in the queue
  // scheduler (queues_; the placement record in it is capacity_'s); a
  // removed group, whose gang is gone, keeps what Get and List show of it
  // (`removed`).
  struct Group {
    Group(std::string group_id, std::shared_ptr<const PlacementGroupSpec> group_spec)
        : id(std::move(group_id)), spec(std::move(group_spec)) {}
    std::string id;
    std::string name;
    std::string job_id;
    std::string request_id;
    uint64_t fingerprint = 0;  // of the create request, to detect reused request ids
    // Shared with its gang's placement record (PlacementOf), which holds
    // what is placed of it (Placed()).
    std::shared_ptr<const PlacementGroupSpec> spec;
    v1::PlacementGroupState state = v1::PLACEMENT_GROUP_STATE_PENDING;
    struct Removed {
      v1::PlacementGroupInfo info;  // as it was when removed
      uint64_t arrival = 0;
    };
    std::unique_ptr<const Removed> removed;
    // The two-phase commit in flight, if any: its bundles, and those their
    // raylet released meanwhile (lost when it ends). Apart: few groups are
    // in flight at once.
    struct Commit {
      std::vector<uint32_t> bundles;
      std::vector<uint32_t> released;
      // Of a group removed during its commit, which the queue scheduler has
      // forgotten: its placement record, which holds its bundles until the
      // commit ends.
      std::unique_ptr<CapacityModel::Gang> removed_placement;
    };
    std::unique_ptr<Commit> commit;
    bool in_flight() const { return commit != nullptr; }
    bool Committing(uint32_t bundle) const {
      return commit != nullptr && std::find(commit->bundles.begin(), commit->bundles.end(),
                                            bundle) != commit->bundles.end();
    }
    uint64_t attempt = 0;
    Reason reason = Reason::kToBeScheduled;
    // Of `reason`; null when it needs none (most groups: apart).
    std::unique_ptr<const std::string> detail;
    int64_t created_ms = 0;
    int64_t placed_ms = 0;
    int64_t waiting_since_ms = 0;  // created, or last went RESCHEDULING
    uint32_t attempts = 0;
    uint32_t lost = 0;  // bundles, of kRestartedLost, kLostWithNode, kReleasedByNode, kMovedOffNode
  };
  // How capacity_ is asked about the group: its gang's placement record,
  // which the queue scheduler keeps (a group removed during its commit:
  // the commit keeps it). Its record is null once the group holds nothing.
  CapacityModel::GangRef PlacementOf(const Group& g) const;
  // The queue scheduler's request and view of a live (not REMOVED) group.
  const GangRequest& RequestOf(const Group& g) const { return *queues_.Request(g.id); }
  const GangView& ViewOf(const Group& g) const { return *queues_.Find(g.id); }
  // Chosen as a victim; its bundles are still held until it lets go.
  bool Preempting(const Group& g) const { return ViewOf(g).state == GangState::kPreempting; }
  // Waiting for a node change: a waiting group that fits not even the idle
  // cluster, or an admitted one whose lost bundles can never be placed.
  bool Infeasible(const Group& g) const;
  void IndexRequestId(const Group& g);
  // Restore's steps: the group a record describes (checked), its placed
  // bundles reserved again (how many were lost), its gang in the queue
  // scheduler.
  absl::StatusOr<Group> GroupFromRecord(const v1::PlacementGroupRecord& r, int64_t now_ms) const;
  absl::StatusOr<size_t> RestorePlacements(CapacityModel::GangRef placement,
                                           const v1::PlacementGroupRecord& r);
  void RestoreGang(const Group& g, const v1::PlacementGroupRecord& r, bool complete, int64_t now_ms,
                   std::unique_ptr<CapacityModel::Gang> placement);
  // Releases the table reservations of `bundles` and forgets them.
  void ReleaseBundles(Group& g, const std::vector<uint32_t>& bundles);
  // `lost` (placed, not in two-phase commit) are gone with `node_id`
  // (`why`: kLostWithNode, kReleasedByNode or kMovedOffNode): the group lets go of them and
  // goes RESCHEDULING, unless it is being preempted.
  void LoseBundles(Group& g, const std::vector<uint32_t>& lost, Reason why,
                   const std::string& node_id, int64_t now_ms);
  // `why` makes the raylets' dedupe key unique ("remove", "preempt-3").
  std::vector<CancelTask> CancelsFor(const Group& g, const std::vector<uint32_t>& bundles,
                                     absl::string_view why = "remove") const;
  std::vector<CancelTask> CancelsFor(const Group& g, const std::vector<BundlePlacement>& placed,
                                     absl::string_view why) const;
  // The queue scheduler's gang for a group (what its spec decides: id,
  // demand, shape; the caller adds queue, priority, preemptible and time
  // limit), and how its reasons name it ("job X", or "placement group X"
  // for one created directly).
  GangRequest GangOf(const Group& g) const;
  std::string GangName(const std::string& id) const;
  // Hands an admitted or re-placed group's new placements to two-phase commit.
  CommitTask StartCommit(Group& g, absl::Span<const BundlePlacement> placements);
  // Places what admitted groups lack (lost bundles, failed commits): the
  // queue scheduler's turn, PlacerCapacity's placement; of those due, or
  // of all of them (`all`, or room was freed).
  void PlaceLacking(int64_t now_ms, bool all, std::vector<CommitTask>* tasks);
  // Runs a queue scheduler pass and carries out its decisions.
  void RunPass(int64_t now_ms, std::vector<CommitTask>* tasks);
  void StartPreemption(const Preemption& p, int64_t now_ms);
  // A preempted group lets go of its bundles and waits again.
  std::vector<CancelTask> FinishPreemption(Group& g, int64_t now_ms);
  // What moves of a group (its bundles on DRAINING nodes or holding an
  // unhealthy GPU), why, and by when.
  struct Move {
    std::vector<uint32_t> bundles;
    std::string node_id;                               // the first of those nodes
    int64_t deadline_ms = 0;                           // the earliest of their deadlines; 0 = none
    v1::MoveCause cause = v1::MOVE_CAUSE_UNSPECIFIED;  // an unhealthy GPU comes first
    std::string reason;  // "node node-1 is draining: ...", "GPU 2 of node-1: XID 79 (...)"
  };
  Move MoveOf(const Group& g) const;
  // The first unhealthy GPU `allocation` holds, or null.
  const v1::UnhealthyGpu* UnhealthyGpuOf(const Allocation& allocation) const;
  // The group lets go of the bundles of `move` and places them elsewhere.
  std::vector<CancelTask> FinishMove(Group& g, const Move& move, int64_t now_ms);
  // What is placed of the group (capacity_ holds it), by bundle index.
  // Pointers into its placement record: valid until the group's bundles change.
  std::vector<const BundlePlacement*> Placed(const Group& g) const;
  std::vector<uint32_t> PlacedBundles(const Group& g) const;
  void SetReason(Group& g, Reason reason, std::string detail = {});
  std::string ReasonText(const Group& g) const;
  // Its last preemption as text; "" when none.
  std::string PreemptedBy(const Group& g) const;
  void ToProto(const Group& g, v1::PlacementGroupInfo* info) const;
  void Forget(const std::string& id);

  NodeResourceTable* table_;
  const NodeManager* nodes_;
  SchedulerConfig config_;
  PlacementScorer scorer_;  // observes every group created or restored (through capacity_)
  uint64_t workload_written_builds_ = 0;  // scorer_.builds() when last exported
  uint64_t workload_written_added_ = 0;   // the window's added() then
  bool workload_restored_ = false;        // restored groups are in the window already
  // Holds every group's table reservations, in the placement records of
  // the queue scheduler's gangs: declared first, it outlives them.
  PlacerCapacity capacity_;
  QueueScheduler queues_;
  std::map<std::string, Group> groups_;
  // Keys view Group::request_id (groups_ is node-based: stable addresses).
  absl::flat_hash_map<absl::string_view, const Group*> by_request_id_;
  absl::flat_hash_map<std::string, std::string> by_name_;  // live groups only
  std::set<std::string> waiting_;  // groups the queue scheduler has not admitted
  bool pass_due_ = true;           // something changed since the last pass
  size_t waiting_feasible_ = 0;    // of waiting_, those not infeasible at the last pass
  int64_t next_pass_ms_ = 0;
  // NodeManager::gpu_health_version() at the last look (MoveAtDrainDeadlines).
  uint64_t gpu_health_seen_ = 0;
  // Drain deadlines are looked at no more often than this (MoveAtDrainDeadlines).
  int64_t next_drain_look_ms_ = 0;
  PreemptionWork preemption_work_;
  std::deque<std::string> removed_order_;
  size_t in_flight_ = 0;
  bool freed_ = false;  // a removal freed resources since the last Schedule
  PlacementObserver* observer_ = nullptr;
  std::set<std::string> changed_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_PLACEMENT_GROUP_MANAGER_H_
