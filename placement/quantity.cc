#include "placement/quantity.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace berth {
namespace {

struct Suffix {
  const char* text;
  int64_t multiplier;
};

constexpr Suffix kSuffixes[] = {
    {"Ki", int64_t{1} << 10},
    {"Mi", int64_t{1} << 20},
    {"Gi", int64_t{1} << 30},
    {"Ti", int64_t{1} << 40},
    {"Pi", int64_t{1} << 50},
    {"k", 1000},
    {"K", 1000},
    {"M", 1000000},
    {"G", 1000000000},
    {"T", 1000000000000},
    {"P", 1000000000000000},
};

absl::Status OutOfRange(absl::string_view field, absl::string_view shown) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", shown, " is larger than the maximum quantity ",
                   Quantity::FromUnits(Quantity::kMaxUnits).ToString()));
}

}  // namespace

absl::StatusOr<Quantity> Quantity::FromDouble(double value, absl::string_view field) {
  if (std::isnan(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": NaN is not a quantity"));
  }
  if (std::isinf(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": infinity is not a quantity"));
  }
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value, " is negative; quantities must be >= 0"));
  }
  const double units = std::round(value * kUnitsPerWhole);
  if (units > static_cast<double>(kMaxUnits)) return OutOfRange(field, absl::StrCat(value));
  return Quantity(static_cast<int64_t>(units));
}

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view text, absl::string_view field) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  int64_t multiplier = 1;
  for (const Suffix& suffix : kSuffixes) {
    if (absl::ConsumeSuffix(&s, suffix.text)) {
      multiplier = suffix.multiplier;
      break;
    }
  }
  absl::string_view whole = s;
  absl::string_view frac;
  if (size_t dot = s.find('.'); dot != absl::string_view::npos) {
    whole = s.substr(0, dot);
    frac = s.substr(dot + 1);
  }
  auto all_digits = [](absl::string_view d) {
    for (char c : d) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  if ((whole.empty() && frac.empty()) || !all_digits(whole) || !all_digits(frac) ||
      whole.size() > 15) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", text, "' is not a quantity (want e.g. 0.5, 8, 200Gi, 1.5G)"));
  }
  // Exact decimal arithmetic: value = (whole + frac) * multiplier, in units.
  // Fraction digits beyond what the multiplier and 1/10000 can hold round
  // half up, like FromDouble.
  int64_t whole_value = 0;
  if (!whole.empty() && !absl::SimpleAtoi(whole, &whole_value)) {
    return OutOfRange(field, text);
  }
  __int128 units = static_cast<__int128>(whole_value) * multiplier * kUnitsPerWhole;
  __int128 scale = static_cast<__int128>(multiplier) * kUnitsPerWhole;
  __int128 frac_units = 0;
  __int128 denominator = 1;
  for (char c : frac.substr(0, 18)) {
    frac_units = frac_units * 10 + (c - '0');
    denominator *= 10;
  }
  units += (frac_units * scale * 2 + denominator) / (denominator * 2);
  if (units > kMaxUnits) return OutOfRange(field, text);
  return Quantity(static_cast<int64_t>(units));
}

std::string Quantity::ToString() const {
  const int64_t whole = units_ / kUnitsPerWhole;
  int64_t frac = std::llabs(units_ % kUnitsPerWhole);
  std::string out = absl::StrCat(units_ < 0 && whole == 0 ? "-" : "", whole);
  if (frac == 0) return out;
  std::string digits = absl::StrCat(frac + kUnitsPerWhole).substr(1);  // 4 digits
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return absl::StrCat(out, ".", digits);
}

absl::StatusOr<Quantity> CheckedAdd(Quantity a, Quantity b, absl::string_view field) {
  int64_t sum;
  if (__builtin_add_overflow(a.units(), b.units(), &sum)) {
    return absl::OutOfRangeError(absl::StrCat(field, ": sum overflows"));
  }
  return Quantity::FromUnits(sum);
}

absl::StatusOr<Quantity> CheckedSub(Quantity a, Quantity b, absl::string_view field) {
  if (b > a) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": ", a.ToString(), " - ", b.ToString(), " would be negative"));
  }
  return Quantity::FromUnits(a.units() - b.units());
}

}  // namespace berth
