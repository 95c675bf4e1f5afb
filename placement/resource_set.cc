#include "placement/resource_set.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/substitute.h"

namespace berth {
namespace {

// The names' order, with the first byte compared inline: resource names
// mostly differ there, and a set is looked up millions of times a
// scheduling pass. The same order as std::string's (bytes as unsigned).
bool NameLess(absl::string_view a, absl::string_view b) {
  if (!a.empty() && !b.empty() && a[0] != b[0]) {
    return static_cast<unsigned char>(a[0]) < static_cast<unsigned char>(b[0]);
  }
  return a < b;
}

// Three-way NameLess, for merges that then ask whether the names are equal.
int NameCompare(absl::string_view a, absl::string_view b) {
  if (!a.empty() && !b.empty() && a[0] != b[0]) {
    return static_cast<unsigned char>(a[0]) < static_cast<unsigned char>(b[0]) ? -1 : 1;
  }
  return a.compare(b);
}

}  // namespace

bool NodeMaySetLabel(absl::string_view key) {
  if (!absl::StartsWith(key, "berth.io/") || key == kNodePoolLabel || key == kConfinementLabel) {
    return true;
  }
  return std::find(std::begin(kTopologyLabels), std::end(kTopologyLabels), key) !=
         std::end(kTopologyLabels);
}

std::string AcceleratorResourceName(absl::string_view accelerator_type) {
  return absl::StrCat(kAcceleratorResourcePrefix, accelerator_type);
}

std::optional<absl::string_view> PinnedAcceleratorType(absl::string_view resource) {
  if (!absl::ConsumePrefix(&resource, kAcceleratorResourcePrefix)) return std::nullopt;
  return resource;
}

ResourceSet WithoutAcceleratorTypes(const ResourceSet& set) {
  ResourceSet shown;
  for (const auto& [name, amount] : set.entries()) {
    if (!PinnedAcceleratorType(name)) shown.Set(name, amount);
  }
  return shown;
}

std::string InternalAcceleratorResourceText(absl::string_view type, absl::string_view instead) {
  return absl::StrCat("the accelerator_type: resource is internal; ",
                      absl::Substitute(instead, type));
}

absl::Status InternalAcceleratorResource(absl::string_view where, absl::string_view type,
                                         absl::string_view instead) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", InternalAcceleratorResourceText(type, instead)));
}

absl::Status ValidateResourceName(absl::string_view name, absl::string_view field) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": empty resource name"));
  }
  if (name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": resource name longer than 128 characters"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' &&
        c != '/' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[\"", name, "\"]: resource names may use only letters, digits and _ . : / -"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceSet> ResourceSet::FromDoubles(const std::map<std::string, double>& amounts,
                                                     absl::string_view field) {
  ResourceSet set;
  for (const auto& [name, value] : amounts) {
    if (absl::Status s = ValidateResourceName(name, field); !s.ok()) return s;
    absl::StatusOr<Quantity> q =
        Quantity::FromDouble(value, absl::StrCat(field, "[\"", name, "\"]"));
    if (!q.ok()) return q.status();
    set.Set(name, *q);
  }
  return set;
}

ResourceSet ResourceSet::Of(std::initializer_list<std::pair<absl::string_view, double>> amounts) {
  ResourceSet set;
  for (const auto& [name, value] : amounts) {
    set.Set(name, Quantity::FromDouble(value, name).value());
  }
  return set;
}

ResourceSet::Entries::iterator ResourceSet::Find(absl::string_view name) {
  return std::lower_bound(entries_.begin(), entries_.end(), name,
                          [](const Entry& e, absl::string_view n) { return NameLess(e.first, n); });
}

Quantity ResourceSet::Get(absl::string_view name) const {
  // A set holds a handful of names: a scan that compares the size and the
  // first byte before the bytes beats a binary search of string compares.
  for (const Entry& e : entries_) {
    const std::string& have = e.first.str();
    if (have.size() == name.size() && (name.empty() || have[0] == name[0]) &&
        absl::string_view(have) == name) {
      return e.second;
    }
  }
  return Quantity();
}

void ResourceSet::Set(absl::string_view name, Quantity amount) {
  auto it = Find(name);
  const bool present = it != entries_.end() && it->first == name;
  if (amount.IsZero()) {
    if (present) entries_.erase(it);
  } else if (present) {
    it->second = amount;
  } else {
    entries_.emplace(it, ResourceName(name), amount);
  }
}

absl::Status ResourceSet::Add(const ResourceSet& other) { return Combine(other, false); }

absl::Status ResourceSet::Subtract(const ResourceSet& other) { return Combine(other, true); }

absl::Status ResourceSet::Combine(const ResourceSet& other, bool subtract) {
  absl::InlinedVector<Quantity, 8> results;
  results.reserve(other.entries_.size());
  bool reshaped = false;  // a name added, or one that reaches zero
  auto have = entries_.begin();
  for (const auto& [name, amount] : other.entries_) {
    int order = 1;
    while (have != entries_.end() && (order = NameCompare(have->first, name)) < 0) ++have;
    const bool present = have != entries_.end() && order == 0;
    const Quantity before = present ? have->second : Quantity();
    absl::StatusOr<Quantity> after =
        subtract ? CheckedSub(before, amount, name) : CheckedAdd(before, amount, name);
    if (!after.ok()) return after.status();
    reshaped = reshaped || !present || after->IsZero();
    results.push_back(*after);
  }
  if (!reshaped) {
    have = entries_.begin();
    for (size_t i = 0; i < other.entries_.size(); ++i) {
      while (NameLess(have->first, other.entries_[i].first)) ++have;
      have->second = results[i];
    }
    return absl::OkStatus();
  }
  Entries merged;
  merged.reserve(entries_.size() + other.entries_.size());
  have = entries_.begin();
  for (size_t i = 0; i < other.entries_.size(); ++i) {
    const ResourceName name = other.entries_[i].first;
    for (; have != entries_.end() && NameLess(have->first, name); ++have) merged.push_back(*have);
    if (have != entries_.end() && have->first == name) ++have;
    if (!results[i].IsZero()) merged.emplace_back(name, results[i]);
  }
  merged.insert(merged.end(), have, entries_.end());
  entries_ = std::move(merged);
  return absl::OkStatus();
}

bool ResourceSet::Contains(const ResourceSet& request) const {
  // Both sorted: one merge pass.
  auto have = entries_.begin();
  for (const auto& [name, amount] : request.entries_) {
    int order = 1;
    while (have != entries_.end() && (order = NameCompare(have->first, name)) < 0) ++have;
    if (have == entries_.end() || order != 0 || have->second < amount) return false;
  }
  return true;
}

std::string ResourceSet::FirstShortfall(const ResourceSet& request) const {
  for (const auto& [name, amount] : request.entries_) {
    if (Get(name) < amount) return name.str();
  }
  return "";
}

std::string FormatMemory(Quantity bytes) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  double value = bytes.ToDouble();
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  std::string text = absl::StrFormat("%.2f", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return absl::StrCat(text, kUnits[unit]);
}

std::string ResourceSet::ToString() const {
  return absl::StrCat("{",
                      absl::StrJoin(entries_, ", ",
                                    [](std::string* out, const Entry& e) {
                                      absl::StrAppend(out, e.first.str(), ": ",
                                                      e.first == kMemory ? FormatMemory(e.second)
                                                                         : e.second.ToString());
                                    }),
                      "}");
}

absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> ParseResourceList(
    absl::string_view text, absl::string_view field, absl::string_view example) {
  std::vector<std::pair<std::string, Quantity>> amounts;
  if (absl::StripAsciiWhitespace(text).empty()) return amounts;
  const std::string hint = example.empty() ? "" : absl::StrCat("; ", example);
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", item, "' is not NAME=QUANTITY", hint));
    }
    std::string name(absl::StripAsciiWhitespace(item.substr(0, eq)));
    if (absl::Status s = ValidateResourceName(name, field); !s.ok()) return s;
    for (const auto& [seen, amount] : amounts) {
      if (seen == name)
        return absl::InvalidArgumentError(absl::StrCat(field, ": ", name, " given twice"));
    }
    absl::StatusOr<Quantity> amount = Quantity::Parse(
        absl::StripAsciiWhitespace(item.substr(eq + 1)), absl::StrCat(field, "[\"", name, "\"]"));
    if (!amount.ok()) return amount.status();
    amounts.emplace_back(std::move(name), *amount);
  }
  return amounts;
}

}  // namespace berth
