#include "placement/gpu_instances.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {

absl::Status ValidateGpuRequest(Quantity gpus, absl::string_view field) {
  if (gpus > Quantity::Whole(1) && !gpus.IsWhole()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", gpus.ToString(),
        " GPUs: a request above 1 GPU must be a whole number (fractions share one GPU)"));
  }
  return absl::OkStatus();
}

Quantity GpuInstances::TotalFree() const {
  int64_t sum = 0;
  for (size_t i = 0; i < free_.size(); ++i) sum += Offered(i);
  return Quantity::FromUnits(sum);
}

bool GpuInstances::SetWithheld(uint32_t index, bool withheld) {
  if (index >= free_.size()) return false;
  if (withheld_.empty()) withheld_.assign(free_.size(), false);
  withheld_[index] = withheld;
  return true;
}

Quantity GpuInstances::OfferedOf(const std::vector<GpuShare>& shares) const {
  int64_t units = 0;
  for (const GpuShare& s : shares) {
    if (!withheld(s.index)) units += s.amount.units();
  }
  return Quantity::FromUnits(units);
}

Quantity GpuInstances::LargestRequest() const {
  int64_t whole = 0;
  int64_t most = 0;
  for (size_t i = 0; i < free_.size(); ++i) {
    const int64_t f = Offered(i);
    whole += f == Quantity::kUnitsPerWhole;
    most = std::max(most, f);
  }
  return whole > 0 ? Quantity::Whole(whole) : Quantity::FromUnits(most);
}

int GpuInstances::BestFitFraction(int64_t units) const {
  int best = -1;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (Offered(i) >= units && (best < 0 || free_[i] < free_[best])) best = static_cast<int>(i);
  }
  return best;
}

bool GpuInstances::CanAllocate(Quantity gpus) const {
  const int64_t units = gpus.units();
  if (units == 0) return true;
  if (units < Quantity::kUnitsPerWhole) return BestFitFraction(units) >= 0;
  int64_t needed = units / Quantity::kUnitsPerWhole;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (Offered(i) == Quantity::kUnitsPerWhole && --needed == 0) return true;
  }
  return false;
}

bool GpuInstances::FitsCapacity(Quantity gpus, uint32_t count) {
  if (gpus.IsZero()) return true;
  if (gpus < Quantity::Whole(1)) return count >= 1;
  return gpus.units() / Quantity::kUnitsPerWhole <= count;
}

absl::StatusOr<std::vector<GpuShare>> GpuInstances::Allocate(Quantity gpus) {
  if (!CanAllocate(gpus)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("not enough free GPU instances for ", gpus.ToString(), " GPU"));
  }
  std::vector<GpuShare> shares;
  const int64_t units = gpus.units();
  if (units == 0) return shares;
  if (units < Quantity::kUnitsPerWhole) {
    const int i = BestFitFraction(units);
    free_[i] -= units;
    shares.push_back({static_cast<uint32_t>(i), gpus});
    return shares;
  }
  int64_t needed = units / Quantity::kUnitsPerWhole;
  for (size_t i = 0; i < free_.size() && needed > 0; ++i) {
    if (Offered(i) != Quantity::kUnitsPerWhole) continue;
    free_[i] = 0;
    shares.push_back({static_cast<uint32_t>(i), Quantity::Whole(1)});
    --needed;
  }
  return shares;
}

absl::Status GpuInstances::Release(const std::vector<GpuShare>& shares) {
  std::vector<int64_t> after = free_;
  for (const GpuShare& s : shares) {
    if (s.index >= after.size()) {
      return absl::InvalidArgumentError(absl::StrCat("GPU instance ", s.index, " does not exist"));
    }
    after[s.index] += s.amount.units();
    if (s.amount.units() <= 0 || after[s.index] > Quantity::kUnitsPerWhole) {
      return absl::FailedPreconditionError(
          absl::StrCat("releasing ", s.amount.ToString(), " of GPU ", s.index,
                       " would exceed its capacity: release does not match an allocation"));
    }
  }
  free_ = std::move(after);
  return absl::OkStatus();
}

absl::Status GpuInstances::Take(const std::vector<GpuShare>& shares) {
  std::vector<int64_t> after = free_;
  for (const GpuShare& s : shares) {
    if (s.index >= after.size()) {
      return absl::InvalidArgumentError(absl::StrCat("GPU instance ", s.index, " does not exist"));
    }
    if (s.amount.units() <= 0 || s.amount > Quantity::Whole(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("share of GPU ", s.index, ": ", s.amount.ToString(), " is not in (0, 1]"));
    }
    if (after[s.index] < s.amount.units()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("GPU ", s.index, " has ", Quantity::FromUnits(after[s.index]).ToString(),
                       " free, needs ", s.amount.ToString()));
    }
    after[s.index] -= s.amount.units();
  }
  free_ = std::move(after);
  return absl::OkStatus();
}

std::string GpuIdsToString(const std::vector<GpuShare>& shares) {
  return absl::StrJoin(shares, ",", [](std::string* out, const GpuShare& s) {
    absl::StrAppend(out, s.index);
    if (s.amount != Quantity::Whole(1)) absl::StrAppend(out, "(", s.amount.ToString(), ")");
  });
}

}  // namespace berth
