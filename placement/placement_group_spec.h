// PlacementGroupSpec: a validated gang of bundles and its strategy.
//
// The only way to build one is Create()/FromInput(), which check every field
// of untrusted input (empty bundle list, empty bundles, negative or NaN
// amounts, fractional GPUs above 1, bad selectors, unknown strategies) and
// return INVALID_ARGUMENT naming the field. Everything downstream (the
// BundlePlacer) can then assume a well-formed group.
#ifndef BERTH_PLACEMENT_PLACEMENT_GROUP_SPEC_H_
#define BERTH_PLACEMENT_PLACEMENT_GROUP_SPEC_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "placement/label_selector.h"
#include "placement/resource_set.h"

namespace berth {

// Ray's four strategies (see DESIGN.md for berth's scoring).
enum class PlacementStrategy { kPack, kSpread, kStrictPack, kStrictSpread };
absl::string_view PlacementStrategyName(PlacementStrategy strategy);
// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD" (case-insensitive).
absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(absl::string_view text,
                                                         absl::string_view field);

struct Bundle {
  ResourceSet resources;
  LabelSelector selector;
  friend bool operator==(const Bundle& a, const Bundle& b) {
    return a.resources == b.resources && a.selector == b.selector;
  }
};

// Where the bundles may go by the nodes' topology labels: nodes sharing a
// value of a label key form a domain (a rack, a block, an NVLink domain).
// required: all bundles in one domain of the key. preferred: in one domain
// of the first key that has one with room, else of the next, else
// anywhere (innermost key first). At most one of the two.
struct Topology {
  static constexpr size_t kMaxPreferred = 8;
  std::string required;
  std::vector<std::string> preferred;
  bool empty() const { return required.empty() && preferred.empty(); }
  // The keys to try, innermost first.
  std::vector<std::string> keys() const {
    return required.empty() ? preferred : std::vector<std::string>{required};
  }
  friend bool operator==(const Topology& a, const Topology& b) {
    return a.required == b.required && a.preferred == b.preferred;
  }
};

// Untrusted input, as it arrives from the API, a job file or a test.
struct BundleInput {
  std::map<std::string, double> resources;
  std::vector<LabelRequirement> selector;
};
struct PlacementGroupInput {
  std::vector<BundleInput> bundles;
  std::string strategy;
};

class PlacementGroupSpec {
 public:
  static constexpr size_t kMaxBundles = 4096;

  // Errors name the field: `bundles[i]...`, `topology.required`,
  // `topology.preferred[i]`.
  static absl::StatusOr<PlacementGroupSpec> Create(std::vector<Bundle> bundles,
                                                   PlacementStrategy strategy,
                                                   Topology topology = {});
  static absl::StatusOr<PlacementGroupSpec> FromInput(const PlacementGroupInput& input);

  absl::Span<const Bundle> bundles() const { return bundles_; }
  PlacementStrategy strategy() const { return strategy_; }
  const Topology& topology() const;
  // Sum of all bundles (cannot overflow: Create checks it).
  const ResourceSet& total() const { return total_; }

  // Same bundles (resources and selectors, in order), strategy and topology: the
  // same placement problem.
  friend bool operator==(const PlacementGroupSpec& a, const PlacementGroupSpec& b) {
    return a.strategy_ == b.strategy_ && a.bundles_ == b.bundles_ && a.topology() == b.topology();
  }
  // Hashes what == compares: a gang pinned to a GPU model and one that is
  // not, with the same bundles, are different placement problems (the
  // queue scheduler's GangRequest::shape is this hash).
  template <typename H>
  friend H AbslHashValue(H h, const PlacementGroupSpec& spec) {
    for (const Bundle& b : spec.bundles_) h = H::combine(std::move(h), b.resources, b.selector);
    return H::combine(std::move(h), spec.bundles_.size(), spec.strategy_, spec.topology().required,
                      spec.topology().preferred);
  }

 private:
  PlacementGroupSpec() = default;
  // Most groups have one bundle: kept inline.
  absl::InlinedVector<Bundle, 1> bundles_;
  PlacementStrategy strategy_ = PlacementStrategy::kPack;
  // Null when empty, as most groups' is: shared by copies of the spec.
  std::shared_ptr<const Topology> topology_;
  ResourceSet total_;
};

// The accelerator types bundles `indices` of `bundles` may run on together:
// each `accelerator_type:<T>` resource pins T and each selector
// `berth.io/accelerator-type in (...)` lists types, all intersected (so two
// different pins allow none). Sorted; nullopt: any type.
std::optional<std::vector<std::string>> AllowedAcceleratorTypes(
    absl::Span<const Bundle> bundles, const std::vector<uint32_t>& indices);

}  // namespace berth

#endif  // BERTH_PLACEMENT_PLACEMENT_GROUP_SPEC_H_
