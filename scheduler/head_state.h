// HeadState: what berth-head knows, shared by its services and its
// scheduler: the node table, NodeManager and PlacementGroupManager behind
// one mutex, the nodes' heartbeats behind their own, the store they are
// written to, the head's metrics, and the train job controller once it is
// started.
//
// One path for every change: under `mu`, change the state machines, stage
// the changed records (PersistLocked, PersistNodeLocked), release `mu`, then
// Durable(seq) before answering. Nothing calls out (an RPC, the train
// controller) while holding `mu`.
#ifndef BERTH_SCHEDULER_HEAD_STATE_H_
#define BERTH_SCHEDULER_HEAD_STATE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "auth/admission.h"
#include "auth/cluster_tls.h"
#include "berth/v1/head.pb.h"
#include "berth/v1/raylet.pb.h"
#include "berth/v1/state.pb.h"
#include "common/working_dir_package.h"
#include "queueing/queue_config.h"
#include "scheduler/head_metrics.h"
#include "scheduler/heartbeat_book.h"
#include "scheduler/node_manager.h"
#include "scheduler/package_store.h"
#include "scheduler/placement_group_manager.h"
#include "scheduler/state_store.h"
#include "scheduler/state_writer.h"
#include "train/train_job_controller.h"

namespace berth {

struct HeadConfig {
  LivenessConfig liveness;
  TrainControllerConfig train;
  SchedulerConfig scheduler;
  absl::Duration raylet_rpc_timeout = absl::Seconds(2);
  // The head's threads that call raylets (reservations, and train jobs'
  // process starts): how many such calls are in flight at most.
  int committer_threads = 32;
  size_t max_worker_exits_kept = 10000;
  // A node with more unhealthy GPUs than this is drained (--max-unhealthy-gpus).
  uint32_t max_unhealthy_gpus = 1;
  int max_message_bytes = 4 << 20;  // largest request accepted (--max-message-bytes)
  // Every RPC must carry it (auth/cluster_token.h); empty = no check.
  // Also used on the head's calls to raylets.
  std::string cluster_token;
  // TLS (auth/cluster_tls.h): the head's certificate, on its endpoint and
  // its calls to raylets; node RPCs then need a berth-node certificate.
  TlsConfig tls;
  // The largest working-directory package accepted (--package-limit-mb).
  uint64_t package_limit_bytes = kDefaultPackageLimitBytes;
};

int64_t HeadNowMs();
// A clock that only goes forward, for durations (node liveness).
int64_t HeadMonotonicMs();

class HeadState;
// Every call carries the cluster token, or a team's token for a user's
// method (submit, list, watch and stop jobs and groups, read the cluster's
// status and queues); those only a raylet makes (`node_methods`:
// RegisterNode, Heartbeat, ReportWorkerExit) need a node certificate when
// the cluster speaks TLS.
AdmissionPolicy HeadAdmission(const HeadState& state, bool node_methods);

// The call that makes a raylet let go of every bundle but `held` (the
// head's books for its node), and of any of those it holds with other
// resources or GPUs than the books say.
v1::ReleaseUnusedBundlesRequest ReleaseAllBut(const std::vector<v1::HeldBundle>& held,
                                              std::string request_id);

class HeadState {
 private:
  // First: the state machines below report to the metrics, and the writer
  // writes to the store.
  const HeadConfig config_;
  HeadMetrics metrics_;
  std::unique_ptr<StateStore> store_;
  StateWriter writer_;
  std::atomic<TrainJobController*> jobs_{nullptr};

 public:
  static constexpr char kNodesTable[] = "nodes";
  static constexpr char kGroupsTable[] = "groups";
  static constexpr char kJobsTable[] = "jobs";
  static constexpr char kQueuesTable[] = "queues";  // one record, key kQueuesKey
  static constexpr char kQueuesKey[] = "config";
  static constexpr char kCredentialsTable[] = "credentials";  // digest -> team
  static constexpr char kWorkloadTable[] = "workload";        // one record, key kWorkloadKey
  static constexpr char kWorkloadKey[] = "window";

  // `store` nullptr = in memory only.
  HeadState(HeadConfig config, std::unique_ptr<StateStore> store);
  HeadState(const HeadState&) = delete;
  HeadState& operator=(const HeadState&) = delete;

  const HeadConfig& config() const { return config_; }
  HeadMetrics& metrics() { return metrics_; }
  // Read by the head's Restore alone, before it serves.
  StateStore& store() { return *store_; }

  TeamCredentials teams;  // thread-safe; not under mu
  PackageStore packages;  // thread-safe; not under mu
  // Heartbeats and liveness: thread-safe, not under mu (a heartbeat never
  // waits behind a pass); taken after mu where both are.
  HeartbeatBook heartbeats;

  absl::Mutex mu;
  NodeResourceTable table ABSL_GUARDED_BY(mu);
  NodeManager nodes ABSL_GUARDED_BY(mu);
  PlacementGroupManager groups ABSL_GUARDED_BY(mu);
  std::deque<v1::ReportWorkerExitRequest> worker_exits ABSL_GUARDED_BY(mu);
  bool kick ABSL_GUARDED_BY(mu) = false;  // wake the scheduling loop
  bool stopping ABSL_GUARDED_BY(mu) = false;
  v1::AutoscalerStatus autoscaler ABSL_GUARDED_BY(mu);
  std::string metrics_address ABSL_GUARDED_BY(mu);
  uint64_t snapshots_taken ABSL_GUARDED_BY(mu) = 0;  // the last GroupSnapshot's version

  // Stage changed records for the store; returns the sequence number to
  // pass to Durable() once mu is released. A change is acknowledged (or
  // shown) only after it is durable.
  uint64_t PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  uint64_t PersistNodeLocked(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  uint64_t PersistQueuesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // What is staged so far: a read shows only what is durable.
  uint64_t StagedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return writer_.staged(); }
  // Waits (without mu) until `seq` is durable; logs a failure.
  absl::Status Durable(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu);
  // Stages a train job's record; pass the sequence to Durable.
  uint64_t StageJob(const v1::TrainJobRecord& record);
  // A team token's digest (nullopt: revoked), durable before it returns.
  absl::Status PersistCredential(const std::string& digest, std::optional<std::string> team);

  // `node_id` no longer holds `released` (its raylet let go of them, or
  // could not reserve them again): the groups that held them place them
  // again. Stages their records (the returned seq, 0 when none lost) and
  // kicks the scheduling loop; pass `lost` to TellJobs once mu is released.
  struct BundleLoss {
    std::vector<std::string> groups;
    std::vector<GroupSnapshot> told;  // of the jobs' groups among them
    uint64_t seq = 0;
  };
  BundleLoss LoseBundlesLocked(const std::string& node_id,
                               const google::protobuf::RepeatedPtrField<v1::BundleKey>& released)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // What a group is now, for its job: a snapshot taken later has a larger
  // version.
  GroupSnapshot SnapshotLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Snapshots of those of `ids` that are train jobs' groups.
  std::vector<GroupSnapshot> JobSnapshotsLocked(const std::vector<std::string>& ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Tells the train controller, if started, that these groups changed.
  void TellJobs(std::vector<GroupSnapshot> groups) ABSL_LOCKS_EXCLUDED(mu);

  // The train job controller: nullptr until the head started it.
  TrainJobController* jobs() const { return jobs_.load(); }
  void set_jobs(TrainJobController* jobs) { jobs_.store(jobs); }

  static std::string NewPlacementGroupId();

  // Active (the default), or not serving yet: starting, or standing by for
  // the head that holds the state store (berth-head's main decides). Until
  // BecomeActive every call is answered UNAVAILABLE with `why` (a standby's
  // names the active head).
  void StandBy(std::string why) ABSL_LOCKS_EXCLUDED(role_mu_);
  void BecomeActive(v1::HeadInfo head) ABSL_LOCKS_EXCLUDED(role_mu_);
  // OK while active; the standby's UNAVAILABLE otherwise.
  grpc::Status Serving() const ABSL_LOCKS_EXCLUDED(role_mu_);
  v1::HeadInfo head() const ABSL_LOCKS_EXCLUDED(role_mu_);
  // head().epoch() without the copy: read on every heartbeat.
  uint64_t epoch() const { return epoch_.load(); }

 private:
  mutable absl::Mutex role_mu_;
  std::optional<std::string> not_serving_ ABSL_GUARDED_BY(role_mu_);  // why
  v1::HeadInfo head_ ABSL_GUARDED_BY(role_mu_);
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_HEAD_STATE_H_
