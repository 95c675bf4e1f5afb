// GpuInstances: the unit-instance GPU resource of one node.
//
// A node with n GPUs has instances 0..n-1 of capacity 1 each. A request of
// at most 1 GPU takes a share of one instance (a whole 1 takes a fully free
// one; a fraction best-fits onto the instance with the least room that still
// fits); a request above 1 must be whole and takes that many fully free
// instances. Choices are deterministic (lowest index on ties), and Release()
// of what Allocate() returned restores the exact previous state. A withheld
// instance (an unhealthy GPU) offers no room: what bundles hold of it stays
// theirs, and what they release of it is kept back until it is offered again.
#ifndef BERTH_PLACEMENT_GPU_INSTANCES_H_
#define BERTH_PLACEMENT_GPU_INSTANCES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/quantity.h"

namespace berth {

// A share of one GPU instance.
struct GpuShare {
  uint32_t index = 0;
  Quantity amount;
  friend bool operator==(const GpuShare& a, const GpuShare& b) {
    return a.index == b.index && a.amount == b.amount;
  }
};

// Checks the shape of a GPU request: fractions only up to 1.
absl::Status ValidateGpuRequest(Quantity gpus, absl::string_view field);

class GpuInstances {
 public:
  GpuInstances() = default;
  explicit GpuInstances(uint32_t count) : free_(count, Quantity::kUnitsPerWhole) {}

  uint32_t count() const { return static_cast<uint32_t>(free_.size()); }
  // The room instance `index` offers: none while it is withheld.
  Quantity free(uint32_t index) const { return Quantity::FromUnits(Offered(index)); }
  // What may be allocated: the free room of the instances not withheld.
  Quantity TotalFree() const;
  // Withholds instance `index` from allocation, or offers it again; false if
  // there is no such instance.
  bool SetWithheld(uint32_t index, bool withheld);
  bool withheld(uint32_t index) const { return index < withheld_.size() && withheld_[index]; }
  // The GPU of `shares` on instances not withheld: what releasing them offers.
  Quantity OfferedOf(const std::vector<GpuShare>& shares) const;
  // The largest request that fits now: the number of fully free instances,
  // or when none is, the most room on one instance.
  Quantity LargestRequest() const;

  // Whether a valid request (see ValidateGpuRequest) fits now.
  bool CanAllocate(Quantity gpus) const;
  // Whether it could fit on an idle node with this many instances.
  static bool FitsCapacity(Quantity gpus, uint32_t count);
  // Takes `gpus`; empty result for zero. Fails without change if it does not fit.
  absl::StatusOr<std::vector<GpuShare>> Allocate(Quantity gpus);
  // Returns shares taken by Allocate. Fails without change if any share would
  // overfill its instance or names a missing one.
  absl::Status Release(const std::vector<GpuShare>& shares);
  // Takes exactly `shares` (chosen elsewhere, e.g. by the head for a raylet),
  // all or nothing: INVALID_ARGUMENT if a share names a missing instance or
  // is not in (0, 1]; RESOURCE_EXHAUSTED if an instance lacks room. The
  // counterpart of Release.
  absl::Status Take(const std::vector<GpuShare>& shares);

 private:
  // Index of the instance a fraction (< 1) best-fits onto, or -1.
  int BestFitFraction(int64_t units) const;
  int64_t Offered(size_t i) const { return withheld(static_cast<uint32_t>(i)) ? 0 : free_[i]; }
  std::vector<int64_t> free_;  // units free per instance
  std::vector<bool> withheld_;  // by instance; empty while none ever was
};

std::string GpuIdsToString(const std::vector<GpuShare>& shares);

}  // namespace berth

#endif  // BERTH_PLACEMENT_GPU_INSTANCES_H_
