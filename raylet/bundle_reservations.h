// BundleReservations: the bundles a node holds for placement groups, and the
// node's free resources.
//
// The raylet's side of the head's two-phase commit. Prepare reserves a
// placement group's bundles on this node, all or nothing; Commit makes them
// usable by workers; Cancel and ReleaseUnused give them back. GPU instances
// are taken exactly as the head's placement core chose them, so the head's
// view and the node's agree instance by instance. Every operation either
// applies completely or changes nothing, and releasing a bundle restores the
// free resources to the exact bits they had. Pure: no I/O, no threads, not
// thread-safe (the caller locks).
#ifndef BERTH_RAYLET_BUNDLE_RESERVATIONS_H_
#define BERTH_RAYLET_BUNDLE_RESERVATIONS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "placement/gpu_instances.h"
#include "placement/resource_set.h"

namespace berth {

struct BundleKey {
  std::string placement_group_id;
  uint32_t bundle_index = 0;

  std::string ToString() const;
  friend bool operator<(const BundleKey& a, const BundleKey& b) {
    return std::tie(a.placement_group_id, a.bundle_index) <
           std::tie(b.placement_group_id, b.bundle_index);
  }
  friend bool operator==(const BundleKey& a, const BundleKey& b) {
    return a.placement_group_id == b.placement_group_id && a.bundle_index == b.bundle_index;
  }
};

// One bundle to reserve, as the head sends it.
struct BundleRequest {
  uint32_t bundle_index = 0;
  ResourceSet resources;
  // Instances and shares chosen by the head; they sum to resources["GPU"].
  std::vector<GpuShare> gpus;
};

enum class BundleState { kPrepared, kCommitted };

struct ReservedBundle {
  BundleKey key;
  ResourceSet resources;
  std::vector<GpuShare> gpus;  // sorted by index
  BundleState state = BundleState::kPrepared;
};

// Not enough free resources is an outcome, not an error.
struct PrepareOutcome {
  bool prepared = false;
  std::string reason;  // why not prepared, e.g. "bundle 3: GPU 2 has 0.5 free, needs 1"
};

class BundleReservations {
 public:
  // `total` is everything the node can reserve, including GPU (= gpu_count)
  // and its accelerator_type:<T> resource, if any.
  BundleReservations(ResourceSet total, uint32_t gpu_count);

  const ResourceSet& total() const { return total_; }
  const ResourceSet& free() const { return free_; }
  const GpuInstances& free_gpus() const { return free_gpus_; }

  // Reserves all of `bundles` for `placement_group_id`, or none. A bundle
  // already held with the same resources and GPU shares counts as prepared;
  // one held with different ones is FAILED_PRECONDITION. Malformed bundles
  // (no resources, duplicate index, GPU shares that name a missing instance
  // or do not sum to the GPU amount) are INVALID_ARGUMENT naming the field,
  // e.g. `bundles[1].gpus[0].index`.
  absl::StatusOr<PrepareOutcome> Prepare(const std::string& placement_group_id,
                                         const std::vector<BundleRequest>& bundles);
  // Commits the listed bundles, all or none: each must be prepared or
  // committed here, else FAILED_PRECONDITION naming `bundle_indices[i]`.
  absl::Status Commit(const std::string& placement_group_id,
                      const std::vector<uint32_t>& bundle_indices);
  // Releases the listed bundles (empty = all of the group's); unknown ones
  // are skipped. Returns the keys released.
  std::vector<BundleKey> Cancel(const std::string& placement_group_id,
                                const std::vector<uint32_t>& bundle_indices);
  // Releases every bundle not in `in_use`. Returns the keys released.
  // `expected`: bundles of `in_use` as the caller holds them; one held here
  // with other resources or GPUs is released too.
  std::vector<BundleKey> ReleaseUnused(const std::set<BundleKey>& in_use,
                                       const std::vector<ReservedBundle>& expected = {});

  // nullptr if the bundle is not held here.
  const ReservedBundle* Find(const BundleKey& key) const;
  // Every held bundle, ordered by key.
  std::vector<ReservedBundle> List() const;
  // What the committed bundles `indices` of `placement_group_id` hold
  // together (a worker's limits); FAILED_PRECONDITION naming `field` for
  // one not committed here.
  absl::StatusOr<ResourceSet> CommittedSum(const std::string& placement_group_id,
                                           const std::set<uint32_t>& indices,
                                           absl::string_view field) const;

 private:
  void Release(std::map<BundleKey, ReservedBundle>::iterator it);

  ResourceSet total_;
  ResourceSet free_;
  GpuInstances free_gpus_;
  std::map<BundleKey, ReservedBundle> bundles_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_BUNDLE_RESERVATIONS_H_
