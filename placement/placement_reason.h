// PlacementReason: why the placer (or a capacity model over it) did not
// place a group, as a typed value: the kind of shortfall and what it names
// (bundles, resources and amounts, nodes, a topology domain, a gang).
// PlacementReasonText renders it once, where a person reads it (a group's
// pending reason, a gang's wait, the replays' tables); nothing decides by
// that text.
//
// Promises: plain values, compared by value (a gang that waits for the same
// reason pass after pass is not rewritten); `waiting` says the group fits
// the ALIVE nodes' totals but not what is free now, and is the one thing
// the rendered text's "waiting for resources: " comes from.
#ifndef BERTH_PLACEMENT_PLACEMENT_REASON_H_
#define BERTH_PLACEMENT_PLACEMENT_REASON_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"
#include "placement/quantity.h"
#include "placement/resource_name.h"
#include "placement/resource_set.h"

namespace berth {

enum class PlacementWhy : uint8_t {
  kNone,                 // placed
  kRefused,              // the placer refused the spec (`text`: its error)
  kUnknownGang,          // a capacity model does not know `gang`
  kNoAliveNodes,         // the cluster has no ALIVE node
  kShortfall,            // `demand` does not fit one node (`gap`)
  kPackShortfall,        // STRICT_PACK: the whole group, `demand`, does not fit one node (`gap`)
  kSpreadOwnNode,        // STRICT_SPREAD: `demand` fits only nodes that hold another of its bundles
  kTooFewDistinctNodes,  // STRICT_SPREAD: `count` distinct nodes needed, `found` found
  kClusterTotal,         // the group needs `amount` in all; the ALIVE nodes have less
  kNotTogether,          // `count` bundles (`strategy`, `demand`) do not fit the free room together
  kDomainSplit,          // topology: the group's placed bundles no longer share one domain
  kDomainLost,           // topology: `count` lost bundles and the group's domain (`domain`)
  kNoDomainLabel,        // topology: no ALIVE node carries the key's label
  kNoDomain,             // topology: no domain holds (or has room for) the group's `count` bundles
  kClusterFree,          // the gang asks `amount`; the cluster has less free
  kTypedGpusFree,        // the gang asks `amount` GPUs of `types`; the cluster has less free
  kAsksAtLeast,          // it asks at least what `gang` asks, which did not fit (`like`)
};

struct PlacementReason {
  // An Amount's resource before it is set: "", interned once (a reason is
  // made on every failed decision).
  static ResourceName NoResource();
  // What one node (or one domain, or the cluster) was asked for and has.
  struct Amount {
    ResourceName resource = NoResource();
    Quantity need;
    Quantity have;
    friend bool operator==(const Amount& a, const Amount& b) {
      return a.resource == b.resource && a.need == b.need && a.have == b.have;
    }
  };
  // Bundles asked of one node: their indices, their sum (accelerator types
  // included) and the selectors they carry.
  struct Demand {
    std::vector<uint32_t> bundles;
    ResourceSet sum;
    std::vector<LabelSelector> selectors;
    friend bool operator==(const Demand& a, const Demand& b) {
      return a.bundles == b.bundles && a.sum == b.sum && a.selectors == b.selectors;
    }
  };
  // How a demand misses every node: none matches it, the best one has too
  // little of `amount`'s resource, or none has all of it at once.
  enum class Gap : uint8_t { kNoMatchingNode, kTooLittle, kNotAtOnce };
  // A topology domain of `key`: `value` names the one meant, and `amount`
  // what it lacks, if one resource is short.
  struct Domain {
    std::string key;
    std::string value;
    std::optional<Amount> lacks;
    friend bool operator==(const Domain& a, const Domain& b) {
      return a.key == b.key && a.value == b.value && a.lacks == b.lacks;
    }
  };

  PlacementWhy why = PlacementWhy::kNone;
  bool waiting = false;  // no room now, as opposed to never
  Gap gap = Gap::kNoMatchingNode;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  uint32_t count = 0;
  uint32_t found = 0;
  bool besides_own = false;  // kTooFewDistinctNodes: the group's own nodes excluded
  Demand demand;
  Amount amount;
  Domain domain;
  std::vector<std::string> types;               // kTypedGpusFree: the accelerator types it may use
  std::string gang;                             // kUnknownGang, kAsksAtLeast
  std::string text;                             // kRefused
  std::shared_ptr<const PlacementReason> like;  // kAsksAtLeast

  friend bool operator==(const PlacementReason& a, const PlacementReason& b);
  friend bool operator!=(const PlacementReason& a, const PlacementReason& b) { return !(a == b); }
};

// Shared: gangs of one shape that did not fit share their reason.
using PlacementReasonPtr = std::shared_ptr<const PlacementReason>;
// The same reason (or both none), by pointer first.
bool SamePlacementReason(const PlacementReasonPtr& a, const PlacementReasonPtr& b);

// What a person reads: "waiting for resources: bundle 0 needs GPU: 2; the
// most free node has GPU: 1 free".
std::string PlacementReasonText(const PlacementReason& reason);
// For logs and test failures.
std::ostream& operator<<(std::ostream& out, const PlacementReason& reason);

}  // namespace berth

#endif  // BERTH_PLACEMENT_PLACEMENT_REASON_H_
