// PoolCapacity: a CapacityModel for the queueing tests, one pool of
// resources with no nodes: a gang fits when the pool's free amounts cover
// its demand. Simple enough to check the scheduler's decisions by hand.
// Victims: the gangs a pass preempted, in its order.
#ifndef BERTH_TESTS_UNIT_QUEUEING_POOL_CAPACITY_TEST_UTIL_H_
#define BERTH_TESTS_UNIT_QUEUEING_POOL_CAPACITY_TEST_UTIL_H_

#include <map>
#include <string>
#include <vector>

#include "queueing/capacity_model.h"
#include "queueing/queue_scheduler.h"

namespace berth::testing {

class PoolCapacity : public CapacityModel {
 public:
  explicit PoolCapacity(ResourceSet total) : total_(total), free_(std::move(total)) {}

  // A pool keeps what it knows of a gang by id, not in the gang's record.
  void Add(const std::string& id, ResourceSet demand) { demand_[id] = std::move(demand); }

  std::optional<ResourceSet> Place(GangRef gang, PlacementReasonPtr* reason) override {
    const std::string& id = *gang.id;
    if (held_.count(id)) return demand_.at(id);
    const ResourceSet& d = demand_.at(id);
    if (!free_.Contains(d)) {
      auto why = std::make_shared<PlacementReason>();
      why->why = PlacementWhy::kNotTogether;
      why->waiting = true;
      why->demand.sum = d;
      *reason = std::move(why);
      return std::nullopt;
    }
    free_.Subtract(d).IgnoreError();
    held_[id] = d;
    return d;
  }
  void Release(GangRef gang) override { Release(*gang.id); }
  void Release(const std::string& id) {
    auto it = held_.find(id);
    if (it == held_.end()) return;
    free_.Add(it->second).IgnoreError();
    held_.erase(it);
  }
  // A pool has no places: a gang that fits is nowhere in particular.
  std::optional<std::vector<uint64_t>> PlacesWithout(GangRef gang,
                                                     const std::vector<GangRef>& freed) override {
    ResourceSet room = free_;
    for (GangRef f : freed) {
      if (held_.count(*f.id) && *f.id != *gang.id) room.Add(held_.at(*f.id)).IgnoreError();
    }
    if (!room.Contains(demand_.at(*gang.id))) return std::nullopt;
    return std::vector<uint64_t>{};
  }
  std::optional<std::vector<uint64_t>> PlacesWhenIdle(GangRef gang) override {
    if (!total_.Contains(demand_.at(*gang.id))) return std::nullopt;
    return std::vector<uint64_t>{};
  }
  bool Infeasible(GangRef gang) const override { return !total_.Contains(demand_.at(*gang.id)); }
  ResourceSet Capacity() const override { return total_; }

  bool Holds(const std::string& id) const { return held_.count(id) != 0; }
  const ResourceSet& free() const { return free_; }

 private:
  ResourceSet total_;
  ResourceSet free_;
  std::map<std::string, ResourceSet> demand_;
  std::map<std::string, ResourceSet> held_;
};

inline std::vector<std::string> Victims(const PassResult& r) {
  std::vector<std::string> out;
  for (const Preemption& p : r.preempted) out.push_back(p.victim);
  return out;
}

}  // namespace berth::testing

#endif  // BERTH_TESTS_UNIT_QUEUEING_POOL_CAPACITY_TEST_UTIL_H_
