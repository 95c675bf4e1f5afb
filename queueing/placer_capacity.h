// PlacerCapacity: the CapacityModel of the real placement core. Each gang
// is a PlacementGroupSpec placed by the BundlePlacer on a NodeResourceTable,
// ranked by a PlacementScorer as the head ranks (which observes each gang
// as it is added); what it places is reserved in that table until Release.
// What it keeps of a gang (its spec, the bundles it holds) is the record
// Add makes, which the gang's owner keeps (the queue scheduler's
// QueuedGang) and hands back in each GangRef; dropping it releases them.
//
// A gang's charge is what its bundles took, plus `GPU:<T>` for the GPUs it
// took on nodes of accelerator type T; its places are node indices.
// PlacesWithout places the gang on the table with the freed gangs'
// allocations given back, then restores the table exactly; PlacesWhenIdle
// places it on an idle copy of the table (copied again when the ALIVE nodes
// change), once per spec. Within a run of Place calls with no Release between them
// free capacity only shrinks, so a spec that did not fit is not placed
// again, nor is one that asks at least as much, bundle by bundle, with the
// same strategy and selectors (thousands of alike pending gangs cost a few
// decisions; the placer is a heuristic, so such a gang may be skipped once
// where a decision of its own would have found room; its reason then names
// the gang that did not fit). A gang asking
// more CPU, GPU or memory than the cluster has free, or more GPUs of the
// types its bundles are pinned to, fails without a decision once it had
// one of its own since the nodes last changed, which told whether it could
// ever fit (the free sums follow this adapter's own changes, and are summed
// again when anything else changed the table).
//
// Nodes that few gangs can use are spared (set_spare_few_node_places): a
// gang whose bundles fit, by the nodes' totals, on at least kFewPlaces
// nodes is placed off the nodes where a known gang (added, running or
// waiting) that fits on fewer could go, and on them only when it fits
// nowhere else; as Slurm's node Weight keeps jobs off the big-memory nodes
// while others have room. Else a small or ordinary gang takes the few
// nodes a large one can use when they are the emptiest, and may run there
// for days within its queue's quota. One that is there all the same (it
// came first, or fitted nowhere else) yields them to such a gang
// (HoldsPlacesSparedFor, the queue scheduler's kSparedNodes).
#ifndef BERTH_QUEUEING_PLACER_CAPACITY_H_
#define BERTH_QUEUEING_PLACER_CAPACITY_H_

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "placement/bundle_placer.h"
#include "placement/placement_scorer.h"
#include "queueing/capacity_model.h"

namespace berth {

class PlacerCapacity : public CapacityModel {
 public:
  // CPU, GPU and memory, in units; wide, as a cluster's memory passes int64.
  using Wide = __int128;
  using Sums = std::array<Wide, 3>;

  // Brackets each placement decision Place makes (the head times them);
  // called synchronously, must not call back.
  class DecisionObserver {
   public:
    virtual ~DecisionObserver() = default;
    virtual void BeforeDecision() {}
    virtual void AfterDecision(const PlacementDecision& decision) {}
  };

  // Neither is owned; both must outlive this. `scorer` may be null (the
  // placer's built-in ranking).
  PlacerCapacity(NodeResourceTable* table, PlacementScorer* scorer)
      : table_(table), scorer_(scorer) {}

  // A gang of these bundles: the record its owner keeps (QueuedGang) and
  // hands back in every GangRef; destroying it releases what it holds and
  // forgets it. `learn`: the scorer observes it (not for a gang it has
  // already seen). The spec is immutable and may be shared with the caller.
  // Gangs of equal specs share one (the first's: many groups of one job
  // shape are common); SpecOf gives the one it keeps, for the caller to
  // keep instead of its own. The record must not outlive this model.
  std::unique_ptr<CapacityModel::Gang> Add(std::shared_ptr<const PlacementGroupSpec> spec,
                                           bool learn = true);
  std::unique_ptr<CapacityModel::Gang> Add(PlacementGroupSpec spec, bool learn = true) {
    return Add(std::make_shared<const PlacementGroupSpec>(std::move(spec)), learn);
  }
  // The spec the gang's record keeps; null for an unknown gang.
  static std::shared_ptr<const PlacementGroupSpec> SpecOf(GangRef gang);
  // What the gang holds; empty when nothing.
  static absl::Span<const BundlePlacement> Held(GangRef gang);
  // Adds to what the gang holds a bundle the caller reserved in the table
  // itself (a restored group's, a lost bundle placed again); Release gives
  // it back with the rest.
  void Hold(GangRef gang, BundlePlacement placement);
  // A decision (observed) for what an admitted gang lacks (bundles lost
  // with a node or of a failed commit) beside the bundles it holds, which
  // it then holds too; as BundlePlacement::Place with those kept. A gang of
  // a required topology whose domain can never take its lost bundles back
  // lets go of what it holds and is placed whole, anywhere the topology
  // allows (a second decision). The one placer of admitted gangs: a
  // waiting gang is placed by Place.
  RemainderPlacement PlaceRemainder(GangRef gang) override;
  // Gives back some of the gang's bundles (those lost with a node, those of
  // a failed commit).
  void ReleaseBundles(GangRef gang, const std::vector<uint32_t>& bundle_indices);
  // Of the gang's last Place: no set of nodes could ever hold it (as
  // opposed to none free now).
  bool Infeasible(GangRef gang) const override;
  // The set of nodes changed (one joined, died, left): every spec is worth
  // a try again.
  void NodesChanged();

  std::optional<ResourceSet> Place(GangRef gang, PlacementReasonPtr* reason) override;
  // A failure here is not remembered as unfit: the gang may fit elsewhere.
  std::optional<ResourceSet> PlaceAvoiding(GangRef gang,
                                           const std::vector<uint64_t>& avoid) override;
  void Release(GangRef gang) override;
  std::optional<std::vector<uint64_t>> PlacesWithout(GangRef gang,
                                                     const std::vector<GangRef>& freed) override;
  std::optional<std::vector<uint64_t>> PlacesWhenIdle(GangRef gang) override;
  ResourceSet Capacity() const override;
  std::vector<uint64_t> PlacesOf(GangRef gang) const override;
  bool CouldHold(GangRef gang, uint64_t place) const override;
  bool FitsFewPlaces(GangRef gang) const override;
  bool HoldsPlacesSparedFor(GangRef holder, GangRef gang) const override;

  // Not owned; nullptr = none.
  void set_observer(DecisionObserver* observer) { observer_ = observer; }
  // On by default. A gang fits on few nodes when they are fewer than
  // kFewPlaces and at most an eighth of the ALIVE nodes; none is spared
  // when the nodes to spare would be over a quarter of them.
  void set_spare_few_node_places(bool spare) { spare_ = spare; }
  static constexpr size_t kFewPlaces = 16;
  // What the gang's held bundles charge (as Place's answer).
  ResourceSet Charge(GangRef gang) const { return ChargeOf(Held(gang)); }

  // Placement decisions made (Place, PlacesWithout, PlacesWhenIdle), for the benches.
  int64_t decisions() const { return decisions_; }

 private:
  // A spec as the checks below see it: the strategy and each bundle's
  // selector and resource names (its structure), and each bundle's amounts
  // in the order the structure names them.
  using ShapeKey = std::pair<std::string, std::vector<int64_t>>;
  // What the gangs of one ShapeKey share; an entry goes with its last gang.
  struct Shape {
    // The first gang's spec; gangs whose spec equals it share it.
    std::shared_ptr<const PlacementGroupSpec> spec;
    size_t structure_hash = 0;  // of the structure, the key of unfit_
    // The GPUs (units) its bundles pinned to accelerator types ask, by the
    // types they allow.
    std::vector<std::pair<std::vector<std::string>, int64_t>> typed_gpus;
    int32_t gangs = 0;
    // As of few_version_ (when few_known): the nodes it could go on, when
    // they are few (see kFewPlaces).
    bool few_known = false;
    std::optional<std::vector<NodeIndex>> few_nodes;
  };
  using Shapes = std::map<ShapeKey, Shape>;
  // A gang's record. Linked into gangs_ (the model walks every gang when
  // the nodes change); it unlinks itself, and gives back what it holds,
  // when its owner drops it.
  struct Gang : CapacityModel::Gang {
    Gang(PlacerCapacity* model, std::shared_ptr<const PlacementGroupSpec> gang_spec,
         Shapes::iterator gang_shape)
        : owner(model), spec(std::move(gang_spec)), shape(gang_shape) {}
    Gang(const Gang&) = delete;
    Gang& operator=(const Gang&) = delete;
    ~Gang() override { owner->Forget(*this); }
    PlacerCapacity* owner;
    Gang* prev = nullptr;
    Gang* next = nullptr;
    std::shared_ptr<const PlacementGroupSpec> spec;
    Shapes::iterator shape;
    absl::InlinedVector<BundlePlacement, 1> held;  // most gangs: one bundle, inline
    // What it holds was placed by the placements_-th decision that placed
    // a gang; 0: held otherwise (Hold), or nothing held.
    uint64_t placed_by = 0;
    bool infeasible = false;   // of the last Place's decision
    bool decided = false;      // a decision of its own since the nodes last changed
    bool counted_few = false;  // counted in few_gangs_on_ (CountFewPlaces)
    const std::string& structure() const { return shape->first.first; }
    const std::vector<int64_t>& amounts() const { return shape->first.second; }
    // Whether its bundles fit on few nodes.
    bool few() const { return counted_few && shape->second.few_nodes.has_value(); }
  };
  // A spec that did not fit (its shape's structure and amounts), and why.
  struct Unfit {
    const std::string* structure;
    const std::vector<int64_t>* amounts;
    PlacementReasonPtr reason;
    // The reason of a gang that asks more: it names the gang that did not fit
    // rather than give that gang's numbers as its own. Made once and shared,
    // as thousands of waiting gangs are skipped a pass.
    PlacementReasonPtr reason_for_larger;
    bool infeasible;
    uint64_t after_placements;  // placements_ when it did not fit
  };
  static Gang* Of(GangRef gang) { return static_cast<Gang*>(gang.record); }
  // Releases what the gang holds and unlinks it: its record is going.
  void Forget(Gang& g);
  // Whether a gang asks at least what `unfit` asked, amount by amount (both
  // of one structure).
  static bool AsksAtLeast(const std::vector<int64_t>& amounts, const std::vector<int64_t>& unfit);
  ResourceSet ChargeOf(absl::Span<const BundlePlacement> placements) const;
  static std::vector<std::pair<std::vector<std::string>, int64_t>> TypedGpus(
      const PlacementGroupSpec& spec);
  // The unfit_ entry of a spec that asks at least what `g` asks, or null.
  const Unfit* KnownUnfit(const Gang& g);
  // One decision of the placer for `g` (observed), its bundles held if placed;
  // else *reason says why (`waiting` when it was the free room it lacked,
  // not any set of nodes).
  std::optional<ResourceSet> Decide(Gang& g, const absl::flat_hash_set<NodeIndex>* avoid,
                                    PlacementReasonPtr* reason);
  void ReleaseHeld(Gang& g);
  static std::vector<uint64_t> NodesOf(absl::Span<const BundlePlacement> placements);
  // PlaceRemainder's decision for `g` (observed), beside what it holds.
  absl::StatusOr<PlacementDecision> DecideRemainder(Gang& g);
  // Sums the free CPU, GPU and memory again if the table changed since the
  // last call (not through this adapter); `delta` then applies a change of
  // this adapter's own.
  void SyncFree();
  void AfterChange(const ResourceSet& taken, const ResourceSet& given);
  // Whether the free sums (plus `extra`) could hold `demand`; else why not.
  bool FreeCovers(const ResourceSet& demand, const Sums& extra, PlacementReason* why) const;
  // FreeCovers for the gang's demand, and whether the free GPUs of the
  // types each of its pinned bundles allow could hold them; else why not.
  bool FreeCoversGang(const Gang& g, PlacementReason* why) const;
  // Whether some bundle of `spec` fits on the node by its totals.
  bool CouldHoldSpec(const PlacementGroupSpec& spec, NodeIndex node) const;
  // Counts the gang, when its bundles fit on few nodes, under each of them
  // in few_gangs_on_ (`sign` 1), or takes it out (-1).
  void CountFewPlaces(Gang& g, int sign);
  // Counts every gang's few nodes again if the ALIVE nodes changed.
  void RefreshFewPlaces();
  // The nodes `g` is placed off first, or null when none.
  const absl::flat_hash_set<NodeIndex>* SparedFor(const Gang& g);

  NodeResourceTable* table_;
  PlacementScorer* scorer_;
  DecisionObserver* observer_ = nullptr;
  NodeScorer* ranking() const { return scorer_ == nullptr ? nullptr : scorer_->current(); }
  Gang* gangs_ = nullptr;  // every gang's record, linked through prev and next
  Shapes shapes_;          // of the gangs; node-based: unfit_ points into it
  // By the hash of their structure, specs that did not fit with no more
  // room free than now (a few per structure: the check is linear). A
  // Release takes out those that failed after the released gang was
  // placed: a gang placed and given back within a pass (it would delay a
  // reservation) leaves the others, which would otherwise all decide
  // again after each such gang. Keyed by the hash computed
  // once at Add, not the string: Place is asked for thousands of waiting
  // gangs a pass.
  static constexpr size_t kUnfitPerStructure = 32;
  absl::flat_hash_map<size_t, std::vector<Unfit>> unfit_;
  int64_t decisions_ = 0;
  uint64_t placements_ = 0;  // decisions that placed a gang
  Sums free_{};              // free over the ALIVE nodes
  // The free GPUs over the ALIVE nodes, by accelerator type.
  absl::flat_hash_map<std::string, Wide> free_gpus_of_type_;
  std::optional<NodeResourceTable> idle_;  // the table with nothing held
  uint64_t idle_version_ = 0;              // table_->alive_version() it was copied at
  // PlacesWhenIdle's answers on idle_, by spec (structure, amounts): each
  // placement there is given back, so a spec always lands the same way
  // (reservations of waiting gangs ask again every pass).
  std::map<ShapeKey, std::optional<std::vector<uint64_t>>> idle_places_;
  // Capacity() as of table_->alive_version() (totals change only with the nodes).
  mutable std::optional<std::pair<uint64_t, ResourceSet>> capacity_;
  bool spare_ = true;
  // As of table_->alive_version() few_version_: by node, how many known
  // gangs fit on few nodes including it; and the union of those nodes,
  // made again when few_gangs_on_ changed keys.
  uint64_t few_version_ = std::numeric_limits<uint64_t>::max();
  absl::flat_hash_map<NodeIndex, int32_t> few_gangs_on_;
  absl::flat_hash_set<NodeIndex> spared_;
  bool spared_stale_ = true;
  uint64_t free_synced_at_ = ~uint64_t{0};
};

}  // namespace berth

#endif  // BERTH_QUEUEING_PLACER_CAPACITY_H_
