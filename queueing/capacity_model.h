// CapacityModel: what the queue scheduler asks of the cluster's capacity.
//
// The queue scheduler decides quota, order and preemption; whether a gang
// fits the nodes is the placement core's answer, reached through this
// interface (PlacerCapacity over the BundlePlacer in the head and the
// replay; a counting fake in unit tests). Implementations are deterministic
// and hold what they placed for a gang until Release.
//
// What a model keeps of one gang (what it holds, what it learned of it) is
// a CapacityModel::Gang in the gang's own record, which the gang's owner
// keeps (QueueScheduler's QueuedGang): a gang's state has one home, and
// every call names the gang by a GangRef to its id and that record.
#ifndef BERTH_QUEUEING_CAPACITY_MODEL_H_
#define BERTH_QUEUEING_CAPACITY_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "placement/placement_decision.h"
#include "placement/placement_reason.h"
#include "placement/resource_set.h"

namespace berth {

// What CapacityModel::PlaceRemainder did for an admitted gang that lacks
// bundles.
struct RemainderPlacement {
  PlacementOutcome outcome = PlacementOutcome::kInfeasible;
  PlacementReasonPtr reason;            // unless placed
  std::vector<BundlePlacement> placed;  // kPlaced: held now too, in bundle order
  // What it held and let go of to be placed whole elsewhere (a required
  // topology whose domain cannot take its lost bundles back).
  std::vector<BundlePlacement> let_go;
};

class CapacityModel {
 public:
  // What the model keeps of one gang; made by the model (PlacerCapacity::Add),
  // kept by the gang's owner. A model keeping nothing per gang makes none.
  class Gang {
   public:
    virtual ~Gang() = default;
  };
  // A gang as the model is asked about it: its id, and its record (null
  // for an unknown gang, or under a model that keeps none).
  struct GangRef {
    const std::string* id = nullptr;
    Gang* record = nullptr;
  };

  virtual ~CapacityModel() = default;
  // Places the whole gang on free capacity and holds it: its charge (the
  // resources it takes, `GPU:<T>` for GPUs on nodes of type T included).
  // nullopt when it does not fit now; then *reason says why.
  virtual std::optional<ResourceSet> Place(GangRef gang, PlacementReasonPtr* reason) = 0;
  // As Place, but taking nothing on `avoid` (places as PlacesOf names them:
  // those of reservations the gang may not delay). nullopt when it does not
  // fit off them; no reason, as the gang waits for what Place said. A model
  // without places cannot keep off any: nullopt.
  virtual std::optional<ResourceSet> PlaceAvoiding(GangRef gang,
                                                   const std::vector<uint64_t>& avoid) {
    return std::nullopt;
  }
  // Whether the gang's last Place found that it fits not even the idle
  // cluster (a model the cluster lacks, more nodes than it has): no
  // preemption or reservation would make room.
  virtual bool Infeasible(GangRef gang) const { return false; }
  // Whether the gang's bundles fit on few places, which the model keeps
  // other gangs off while they fit elsewhere.
  virtual bool FitsFewPlaces(GangRef gang) const { return false; }
  // Whether `holder` (held) could run on many places yet holds one of the
  // few that `gang` can use at all: it yields them to such a gang
  // (kSparedNodes).
  virtual bool HoldsPlacesSparedFor(GangRef holder, GangRef gang) const { return false; }
  // Places what an admitted gang lacks (bundles lost, or of a failed
  // commit) beside what it holds, and holds it too. A model of whole gangs
  // only cannot.
  virtual RemainderPlacement PlaceRemainder(GangRef gang) {
    auto reason = std::make_shared<PlacementReason>();
    reason->why = PlacementWhy::kRefused;
    reason->text = "the capacity model places whole gangs only";
    return {PlacementOutcome::kInfeasible, std::move(reason), {}, {}};
  }
  // Gives back what Place holds for the gang (a gang that ended, was
  // preempted, or that the scheduler takes back within a pass).
  virtual void Release(GangRef gang) = 0;
  // Where the gang would go (see PlacesOf) if the held gangs `freed` were
  // gone; nullopt if it would not fit. Changes nothing.
  virtual std::optional<std::vector<uint64_t>> PlacesWithout(GangRef gang,
                                                             const std::vector<GangRef>& freed) = 0;
  bool FitsWithout(GangRef gang, const std::vector<GangRef>& freed) {
    return PlacesWithout(gang, freed).has_value();
  }
  // Where the gang would go on the cluster with nothing held; nullopt if
  // even then it would not fit. Changes nothing.
  virtual std::optional<std::vector<uint64_t>> PlacesWhenIdle(GangRef gang) = 0;
  // The cluster's totals, for fair shares.
  virtual ResourceSet Capacity() const = 0;
  // Where a held gang is (node indices, say): preemption frees places
  // whole, taking the victims that share one together. Empty: nowhere in
  // particular (each victim is its own place).
  virtual std::vector<uint64_t> PlacesOf(GangRef gang) const { return {}; }
  // Whether some bundle of the gang would fit `place` with nothing held on
  // it: emptying a place no bundle fits makes no room for the gang.
  virtual bool CouldHold(GangRef gang, uint64_t place) const { return true; }
};

}  // namespace berth

#endif  // BERTH_QUEUEING_CAPACITY_MODEL_H_
