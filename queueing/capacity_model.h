// CapacityModel: what the queue scheduler asks of the cluster's capacity.
//
// The queue scheduler decides quota, order and preemption; whether a gang
// fits the nodes is the placement core's answer, reached through this
// interface (PlacerCapacity over the BundlePlacer in the head and the
// replay; a counting fake in unit tests). Implementations are deterministic
// and hold, by gang id, what they placed until Release.
#ifndef BERTH_QUEUEING_CAPACITY_MODEL_H_
#define BERTH_QUEUEING_CAPACITY_MODEL_H_

#include <optional>
#include <string>
#include <vector>

#include "placement/resource_set.h"

namespace berth {

class CapacityModel {
 public:
  virtual ~CapacityModel() = default;
  // Places the whole gang on free capacity and holds it: its charge (the
  // resources it takes, `GPU:<T>` for GPUs on nodes of type T included).
  // nullopt when it does not fit now; then *reason says why.
  virtual std::optional<ResourceSet> Place(const std::string& gang_id, std::string* reason) = 0;
  // Gives back what Place holds for the gang (a gang that ended, was
  // preempted, or that the scheduler takes back within a pass).
  virtual void Release(const std::string& gang_id) = 0;
  // Whether the gang would fit if the held gangs `freed` were gone. Changes
  // nothing.
  virtual bool FitsWithout(const std::string& gang_id, const std::vector<std::string>& freed) = 0;
  // The cluster's totals, for fair shares.
  virtual ResourceSet Capacity() const = 0;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_CAPACITY_MODEL_H_
