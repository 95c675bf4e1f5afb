// Quantity: an exact, fixed-point amount of one resource.
//
// Every resource amount in berth (CPU, GPU, memory in bytes, custom
// resources) is an int64 count of 1/10000 of a unit, as in Ray. Fixed point
// keeps allocation and release exact inverses: adding and subtracting the
// same amounts always returns the table to the same bits. Construction from
// user input (double or decimal text) validates: NaN, infinity, negative and
// out-of-range values are errors naming the field, never a crash.
#ifndef BERTH_PLACEMENT_QUANTITY_H_
#define BERTH_PLACEMENT_QUANTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

class Quantity {
 public:
  static constexpr int64_t kUnitsPerWhole = 10000;
  // Largest amount accepted from users (2^58 units: 28 TiB of memory, 28e12
  // CPUs): leaves headroom so that summing 32 maximal amounts cannot
  // overflow; longer sums use the checked functions below.
  static constexpr int64_t kMaxUnits = int64_t{1} << 58;

  constexpr Quantity() = default;
  static constexpr Quantity FromUnits(int64_t units) { return Quantity(units); }
  static constexpr Quantity Whole(int64_t n) { return Quantity(n * kUnitsPerWhole); }

  // Rounds `value` to the nearest 1/10000. `field` names the input in errors,
  // e.g. `bundles[0].resources["GPU"]`.
  static absl::StatusOr<Quantity> FromDouble(double value, absl::string_view field);
  // Parses decimal text with an optional suffix: "0.5", "8", "200Gi", "1.5G",
  // "512Mi". Binary suffixes Ki Mi Gi Ti Pi, decimal k M G T P.
  static absl::StatusOr<Quantity> Parse(absl::string_view text, absl::string_view field);

  constexpr int64_t units() const { return units_; }
  double ToDouble() const { return static_cast<double>(units_) / kUnitsPerWhole; }
  bool IsZero() const { return units_ == 0; }
  bool IsWhole() const { return units_ % kUnitsPerWhole == 0; }
  // Shortest exact decimal form: "0.5", "8", "0.001".
  std::string ToString() const;

  friend constexpr bool operator==(Quantity a, Quantity b) { return a.units_ == b.units_; }
  friend constexpr bool operator!=(Quantity a, Quantity b) { return a.units_ != b.units_; }
  friend constexpr bool operator<(Quantity a, Quantity b) { return a.units_ < b.units_; }
  friend constexpr bool operator<=(Quantity a, Quantity b) { return a.units_ <= b.units_; }
  friend constexpr bool operator>(Quantity a, Quantity b) { return a.units_ > b.units_; }
  friend constexpr bool operator>=(Quantity a, Quantity b) { return a.units_ >= b.units_; }

 private:
  constexpr explicit Quantity(int64_t units) : units_(units) {}
  int64_t units_ = 0;
};

// Checked arithmetic: errors on int64 overflow and on results below zero.
absl::StatusOr<Quantity> CheckedAdd(Quantity a, Quantity b, absl::string_view field);
absl::StatusOr<Quantity> CheckedSub(Quantity a, Quantity b, absl::string_view field);

}  // namespace berth

#endif  // BERTH_PLACEMENT_QUANTITY_H_
