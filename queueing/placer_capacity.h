// PlacerCapacity: the CapacityModel of the real placement core. Each gang
// is a PlacementGroupSpec placed by the BundlePlacer on a NodeResourceTable;
// what it places is reserved in that table until Release.
//
// A gang's charge is what its bundles took, plus `GPU:<T>` for the GPUs it
// took on nodes of accelerator type T. FitsWithout places the gang on a
// table with the freed gangs' allocations given back, then restores the
// table exactly. Within a run of Place calls with no Release between them
// free capacity only shrinks, so a spec that did not fit is not placed
// again (thousands of equal pending gangs cost one decision).
#ifndef BERTH_QUEUEING_PLACER_CAPACITY_H_
#define BERTH_QUEUEING_PLACER_CAPACITY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "placement/bundle_placer.h"
#include "placement/node_scorer.h"
#include "queueing/capacity_model.h"

namespace berth {

class PlacerCapacity : public CapacityModel {
 public:
  // Neither is owned; both must outlive this. `scorer` may be null.
  PlacerCapacity(NodeResourceTable* table, NodeScorer* scorer) : table_(table), scorer_(scorer) {}

  // The gang's bundles, before the scheduler sees its id.
  void Add(const std::string& gang_id, PlacementGroupSpec spec);
  // Forgets the gang, releasing what it holds.
  void Remove(const std::string& gang_id);
  // What the gang holds; empty when nothing.
  const std::vector<BundlePlacement>& Held(const std::string& gang_id) const;
  // The set of nodes changed (one joined, died, left): every spec is worth
  // a try again.
  void NodesChanged() { unfit_.clear(); }

  std::optional<ResourceSet> Place(const std::string& gang_id, std::string* reason) override;
  void Release(const std::string& gang_id) override;
  bool FitsWithout(const std::string& gang_id, const std::vector<std::string>& freed) override;
  ResourceSet Capacity() const override;

  // Placement decisions made (Place and FitsWithout), for the benches.
  int64_t decisions() const { return decisions_; }

 private:
  struct Gang {
    PlacementGroupSpec spec;
    std::vector<BundlePlacement> held;
  };
  ResourceSet ChargeOf(const std::vector<BundlePlacement>& placements) const;

  NodeResourceTable* table_;
  NodeScorer* scorer_;
  std::map<std::string, Gang> gangs_;
  struct SpecHash {
    size_t operator()(const PlacementGroupSpec* s) const { return absl::HashOf(*s); }
  };
  struct SpecEq {
    bool operator()(const PlacementGroupSpec* a, const PlacementGroupSpec* b) const {
      return *a == *b;
    }
  };
  // Specs that did not fit since the last Release, and why.
  absl::flat_hash_map<const PlacementGroupSpec*, std::string, SpecHash, SpecEq> unfit_;
  int64_t decisions_ = 0;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_PLACER_CAPACITY_H_
