// Elastic membership: how many workers a train job's next attempt gets,
// and when a running attempt grows or shrinks (as Ray Train V2's
// ScalingPolicy, for num_workers=(min, max): scaling_config.min_workers).
//
// An elastic job's own group holds its first min_workers bundles (rank 0's,
// with the trainer, among them); each further worker has a one-bundle group
// of its own, made once the job's group is placed. An attempt runs on the
// job's group (all of it once CREATED; after a lost node, the bundles the
// last attempt kept, rank 0's among them) plus the elastic groups placed by
// then, while they make min_workers. A running attempt grows at the first
// checkpoint reported after more workers were placed, so no step is lost,
// and shrinks (restarts on what is left) when a node, bundle or group it
// runs on is lost or preempted. A job that is not elastic runs on all of
// its group once it is CREATED and never resizes.
//
// Pure: it reads the job's record and what the head says now (JobWorld);
// the reconciler (job_reconciler.h) makes and removes the groups and
// restarts the attempts.
#ifndef BERTH_TRAIN_ELASTIC_MEMBERSHIP_H_
#define BERTH_TRAIN_ELASTIC_MEMBERSHIP_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "berth/v1/train.pb.h"
#include "train/job_world.h"
#include "train/rank_assignment.h"

namespace berth {

// The workers of the next attempt, each where its bundle is.
struct AttemptMembers {
  std::vector<BundleSite> sites;
  // Site i's bundle: its group ("": the job's own) and index in it.
  std::vector<std::pair<std::string, uint32_t>> bundles;
};

class ElasticMembership {
 public:
  // A job of `core_bundles` bundles in its own group, `num_workers` at
  // most and (when `elastic`) `min_workers` at least.
  ElasticMembership(bool elastic, size_t core_bundles, uint32_t min_workers, uint32_t num_workers);

  bool elastic() const { return elastic_; }

  // Whether the job makes another elastic group (once its own is placed).
  bool WantsAnotherGroup(const v1::TrainJobInfo& job) const;
  // The bundles of the job's group an attempt may start on (rank 0's
  // first). Empty: the job waits.
  std::vector<uint32_t> CoreBundlesToRun(const v1::TrainJobInfo& job, const JobWorld& world) const;
  // The next attempt's workers: bundles `core` of the job's group, then
  // each elastic group placed by now.
  AttemptMembers NextAttempt(const v1::TrainJobInfo& job, const JobWorld& world,
                             const std::vector<uint32_t>& core) const;
  // Records in the job a resize to `world_size` workers if the attempt
  // about to start differs from the last (or restarts for `reason`).
  void RecordResize(absl::Time now, uint32_t attempt, uint32_t world_size,
                    const std::string& reason, v1::TrainJobInfo* job) const;

  // Why a running attempt on `nodes`, placed at `placed_unix_ms` (0: as
  // found), must restart with the workers placed now (a node it runs on
  // died, a bundle it uses was lost, a group it uses is being preempted),
  // or "".
  std::string Loss(const v1::TrainJobInfo& job, const JobWorld& world,
                   const std::set<std::string>& nodes, int64_t placed_unix_ms) const;
  // The next elastic group to let go of (being preempted or moving off a
  // draining node, and not used by the attempt when it is `running`), or "".
  std::string ToRelease(const v1::TrainJobInfo& job, const JobWorld& world, bool running) const;

  // A running attempt that did not fail: why it grows now ("" while it
  // does not). More workers placed mark the latest checkpoint; the next
  // one grows the job.
  std::string GrowReason(const v1::TrainJobInfo& job, const JobWorld& world);
  // A new attempt starts: no growth is pending.
  void AttemptStarted() { grow_after_checkpoint_ = -1; }

 private:
  // Workers placed (and not being preempted) that the attempt does not
  // use: elastic groups, and the job's own bundles placed again.
  size_t Ready(const v1::TrainJobInfo& job, const JobWorld& world) const;

  bool elastic_;
  size_t core_bundles_;
  uint32_t min_workers_;
  uint32_t num_workers_;
  int64_t grow_after_checkpoint_ = -1;  // grows at a checkpoint after this step
};

}  // namespace berth

#endif  // BERTH_TRAIN_ELASTIC_MEMBERSHIP_H_
