// ResourceSet: a bag of named resource quantities with exact, checked
// arithmetic.
//
// Kept canonical (sorted by name, no zero entries), so two sets with the same
// amounts compare equal and iteration order is deterministic. Arithmetic that
// would overflow or go negative returns an error and leaves the set as it
// was: nothing is half-applied.
#ifndef BERTH_PLACEMENT_RESOURCE_SET_H_
#define BERTH_PLACEMENT_RESOURCE_SET_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/quantity.h"
#include "placement/resource_name.h"

namespace berth {

inline constexpr absl::string_view kCpu = "CPU";
inline constexpr absl::string_view kGpu = "GPU";
inline constexpr absl::string_view kMemory = "memory";
// `accelerator_type:<T>`: 1 on a node whose GPUs are of model T. Internal:
// the train layer adds 0.001 of it to bundles that ask for accelerator type T.
inline constexpr absl::string_view kAcceleratorResourcePrefix = "accelerator_type:";
// Node label carrying the accelerator model, for label selectors.
inline constexpr absl::string_view kAcceleratorTypeLabel = "berth.io/accelerator-type";
// The autoscaler's node pool of a node; the one berth.io/ label a raylet
// sets itself (from its --node-pool flag).
inline constexpr absl::string_view kNodePoolLabel = "berth.io/node-pool";
// How the raylet confines its workers: "cgroup-v1", or "none" (why is in
// its log); set by the raylet itself.
inline constexpr absl::string_view kConfinementLabel = "berth.io/confinement";
// Topology label keys berth knows by name (placement_group_spec.h's
// Topology takes any key as well); nodes set them (berth start --labels,
// the autoscaler's pools), the berth.io/ ones included.
inline constexpr absl::string_view kTopologyLabels[] = {
    "berth.io/topology-block", "berth.io/topology-rack", "berth.io/nvlink-domain",
    "nvidia.com/gpu.clique"};
// Whether a node may carry label `key` as it registers: any key but the
// berth.io/ ones berth sets itself (the node pool, confinement and topology
// excepted).
bool NodeMaySetLabel(absl::string_view key);
// What a bundle takes of `accelerator_type:<T>`, as in Ray.
inline constexpr Quantity kAcceleratorRequest = Quantity::FromUnits(10);

// The one place that knows the `accelerator_type:<T>` resource's form:
// its name for model T, the model a resource name pins (nullopt for any
// other resource), a set without such entries (what users are shown), and
// the refusal of one a user wrote.
std::string AcceleratorResourceName(absl::string_view accelerator_type);
std::optional<absl::string_view> PinnedAcceleratorType(absl::string_view resource);
class ResourceSet;
ResourceSet WithoutAcceleratorTypes(const ResourceSet& set);
// "the accelerator_type: resource is internal; <instead>", `instead` with
// "$0" standing for the model (absl::Substitute): how to ask for it there.
std::string InternalAcceleratorResourceText(absl::string_view type, absl::string_view instead);
// INVALID_ARGUMENT "<where>: " and that text.
absl::Status InternalAcceleratorResource(absl::string_view where, absl::string_view type,
                                         absl::string_view instead);

class ResourceSet {
 public:
  // Most sets (a bundle's, a gang's charge) name one resource: it is kept
  // inline, without an allocation of its own.
  using Entry = std::pair<ResourceName, Quantity>;
  using Entries = absl::InlinedVector<Entry, 1>;

  ResourceSet() = default;
  // From user input. Validates names and amounts; `field` prefixes errors,
  // e.g. `bundles[2].resources`.
  static absl::StatusOr<ResourceSet> FromDoubles(const std::map<std::string, double>& amounts,
                                                 absl::string_view field);
  // Trusted construction, for code and tests: amounts must be >= 0.
  static ResourceSet Of(std::initializer_list<std::pair<absl::string_view, double>> amounts);

  Quantity Get(absl::string_view name) const;
  // Sets `name` to `amount` (removing it when zero).
  void Set(absl::string_view name, Quantity amount);

  // Adds or subtracts `other`; on error the set is unchanged.
  absl::Status Add(const ResourceSet& other);
  absl::Status Subtract(const ResourceSet& other);
  // True when every amount in `request` is available here.
  bool Contains(const ResourceSet& request) const;
  // The first resource of `request` not available here, or empty.
  std::string FirstShortfall(const ResourceSet& request) const;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  const Entries& entries() const { return entries_; }
  // "{CPU: 4, GPU: 1, memory: 200Gi}": memory shown in binary units.
  std::string ToString() const;

  friend bool operator==(const ResourceSet& a, const ResourceSet& b) {
    return a.entries_ == b.entries_;
  }
  friend bool operator!=(const ResourceSet& a, const ResourceSet& b) { return !(a == b); }
  // For hash maps keyed by resource sets (absl::Hash).
  template <typename H>
  friend H AbslHashValue(H h, const ResourceSet& set) {
    for (const auto& [name, amount] : set.entries_)
      h = H::combine(std::move(h), name.str(), amount.units());
    return H::combine(std::move(h), set.entries_.size());
  }

 private:
  Entries::iterator Find(absl::string_view name);
  // Add (subtract = false) or Subtract: both sorted, one merge pass to
  // check, and the set is copied only when a name comes or goes.
  absl::Status Combine(const ResourceSet& other, bool subtract);
  Entries entries_;  // sorted by name, no zero amounts
};

// Validates a resource name: non-empty, at most 128 characters of
// [A-Za-z0-9_.:/-].
absl::Status ValidateResourceName(absl::string_view name, absl::string_view field);

// `NAME=QUANTITY,...` ("GPU=1,CPU=2,memory=16Gi"), the one parser of berth's
// resource lists (the CLI's --bundle and resource flags, the raylet's
// --resources): the amounts in the order written, zeros kept (a caller may
// refuse an all-zero list), each name valid and given once, each amount a
// quantity. Blank text is an empty list. Errors name `field`
// (`field["NAME"]` for an amount) and end with `example` when it is given.
absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> ParseResourceList(
    absl::string_view text, absl::string_view field, absl::string_view example = "");

// Shows a memory amount (bytes) in the largest binary unit that keeps it
// short: 200Gi, 1.5Ti, 512Mi.
std::string FormatMemory(Quantity bytes);

}  // namespace berth

#endif  // BERTH_PLACEMENT_RESOURCE_SET_H_
