// LabelSelector: Kubernetes set-based label requirements on nodes.
//
// A selector is a conjunction of requirements: `key in (a,b)`,
// `key notin (a,b)`, `key` (exists), `!key` (does not exist), plus the
// equality shorthands `key=v` and `key!=v`. Parse() accepts that text;
// Create() validates structured input (as from the API). Matching is pure.
#ifndef BERTH_PLACEMENT_LABEL_SELECTOR_H_
#define BERTH_PLACEMENT_LABEL_SELECTOR_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

using Labels = std::map<std::string, std::string>;

enum class LabelOperator { kIn, kNotIn, kExists, kDoesNotExist };

struct LabelRequirement {
  std::string key;
  LabelOperator op = LabelOperator::kExists;
  std::vector<std::string> values;  // sorted, unique; empty for (does not) exist

  bool Matches(const Labels& labels) const;
  std::string ToString() const;
  friend bool operator==(const LabelRequirement& a, const LabelRequirement& b) {
    return a.key == b.key && a.op == b.op && a.values == b.values;
  }
  template <typename H>
  friend H AbslHashValue(H h, const LabelRequirement& r) {
    return H::combine(std::move(h), r.key, r.op, r.values);
  }
};

class LabelSelector {
 public:
  LabelSelector() = default;
  // Validates each requirement; `field` prefixes errors, e.g.
  // `bundles[1].selector`.
  static absl::StatusOr<LabelSelector> Create(std::vector<LabelRequirement> requirements,
                                              absl::string_view field);
  // "gpu-type in (A10G,A100), zone notin (b), !spot, team=ml"
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text, absl::string_view field);

  bool Matches(const Labels& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }
  // The values `key` is restricted to by an `in` requirement, if any; several
  // `in` requirements on the key intersect.
  std::optional<std::vector<std::string>> AllowedValues(absl::string_view key) const;
  std::string ToString() const;

  friend bool operator==(const LabelSelector& a, const LabelSelector& b) {
    return a.requirements_ == b.requirements_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const LabelSelector& s) {
    return H::combine(std::move(h), s.requirements_);
  }

 private:
  std::vector<LabelRequirement> requirements_;
};

// Label keys and values: non-empty (keys) and at most 253 characters of
// [A-Za-z0-9_.:/-].
absl::Status ValidateLabelKey(absl::string_view key, absl::string_view field);
absl::Status ValidateLabelValue(absl::string_view value, absl::string_view field);

}  // namespace berth

#endif  // BERTH_PLACEMENT_LABEL_SELECTOR_H_
