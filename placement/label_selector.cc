#include "placement/label_selector.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth {
namespace {

bool IsLabelChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
         c == '/' || c == '-';
}

absl::Status ValidateLabelText(absl::string_view text, absl::string_view what,
                               absl::string_view field, bool allow_empty) {
  if (text.empty() && !allow_empty) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": empty label ", what));
  }
  if (text.size() > 253) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": label ", what, " longer than 253 characters"));
  }
  for (char c : text) {
    if (!IsLabelChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": label ", what, " '", text, "' may use only letters, digits and _ . : / -"));
    }
  }
  return absl::OkStatus();
}

// Splits "a in (x, y), !b, c notin (z)" at the commas outside parentheses.
absl::StatusOr<std::vector<std::string>> SplitTerms(absl::string_view text,
                                                    absl::string_view field) {
  std::vector<std::string> terms;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth < 0 || depth > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": unbalanced parentheses in '", text, "'"));
    }
    if (c == ',' && depth == 0) {
      terms.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": unbalanced parentheses in '", text, "'"));
  }
  terms.push_back(std::move(current));
  return terms;
}

}  // namespace

absl::Status ValidateLabelKey(absl::string_view key, absl::string_view field) {
  return ValidateLabelText(key, "key", field, /*allow_empty=*/false);
}

absl::Status ValidateLabelValue(absl::string_view value, absl::string_view field) {
  return ValidateLabelText(value, "value", field, /*allow_empty=*/true);
}

bool LabelRequirement::Matches(const Labels& labels) const {
  auto it = labels.find(key);
  const bool has = it != labels.end();
  switch (op) {
    case LabelOperator::kExists:
      return has;
    case LabelOperator::kDoesNotExist:
      return !has;
    case LabelOperator::kIn:
      return has && std::binary_search(values.begin(), values.end(), it->second);
    case LabelOperator::kNotIn:
      return !has || !std::binary_search(values.begin(), values.end(), it->second);
  }
  return false;
}

std::string LabelRequirement::ToString() const {
  // "k in ()" would not parse back: the one way to write an empty value is
  // the equality form.
  const bool set_based = op == LabelOperator::kIn || op == LabelOperator::kNotIn;
  if (set_based && values.size() == 1 && values[0].empty()) {
    return absl::StrCat(key, op == LabelOperator::kIn ? "=" : "!=");
  }
  switch (op) {
    case LabelOperator::kExists:
      return key;
    case LabelOperator::kDoesNotExist:
      return absl::StrCat("!", key);
    case LabelOperator::kIn:
      return absl::StrCat(key, " in (", absl::StrJoin(values, ","), ")");
    case LabelOperator::kNotIn:
      return absl::StrCat(key, " notin (", absl::StrJoin(values, ","), ")");
  }
  return key;
}

absl::StatusOr<LabelSelector> LabelSelector::Create(std::vector<LabelRequirement> requirements,
                                                    absl::string_view field) {
  LabelSelector selector;
  for (size_t i = 0; i < requirements.size(); ++i) {
    LabelRequirement& r = requirements[i];
    const std::string where = absl::StrCat(field, ".requirements[", i, "]");
    if (absl::Status s = ValidateLabelKey(r.key, absl::StrCat(where, ".key")); !s.ok()) return s;
    const bool set_based = r.op == LabelOperator::kIn || r.op == LabelOperator::kNotIn;
    if (set_based && r.values.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".values: '", r.key, "' in/notin needs at least one value"));
    }
    if (!set_based && !r.values.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".values: exists / does-not-exist take no values"));
    }
    for (const std::string& v : r.values) {
      if (absl::Status s = ValidateLabelValue(v, absl::StrCat(where, ".values")); !s.ok()) return s;
    }
    std::sort(r.values.begin(), r.values.end());
    r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text,
                                                   absl::string_view field) {
  std::vector<LabelRequirement> requirements;
  if (absl::StripAsciiWhitespace(text).empty()) return LabelSelector();
  absl::StatusOr<std::vector<std::string>> terms = SplitTerms(text, field);
  if (!terms.ok()) return terms.status();
  for (const std::string& raw : *terms) {
    absl::string_view term = absl::StripAsciiWhitespace(raw);
    auto bad = [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": cannot parse '", term,
          "' (want 'key in (a,b)', 'key notin (a,b)', 'key', '!key', 'key=v' or 'key!=v')"));
    };
    if (term.empty()) return bad();
    LabelRequirement r;
    if (size_t paren = term.find('('); paren != absl::string_view::npos) {
      if (term.back() != ')') return bad();
      std::vector<std::string> head =
          absl::StrSplit(term.substr(0, paren), ' ', absl::SkipWhitespace());
      if (head.size() != 2) return bad();
      r.key = head[0];
      if (head[1] == "in") {
        r.op = LabelOperator::kIn;
      } else if (head[1] == "notin") {
        r.op = LabelOperator::kNotIn;
      } else {
        return bad();
      }
      absl::string_view inside = term.substr(paren + 1, term.size() - paren - 2);
      for (absl::string_view v : absl::StrSplit(inside, ',')) {
        v = absl::StripAsciiWhitespace(v);
        if (v.empty()) return bad();
        r.values.emplace_back(v);
      }
    } else if (size_t ne = term.find("!="); ne != absl::string_view::npos) {
      r.key = std::string(absl::StripAsciiWhitespace(term.substr(0, ne)));
      r.op = LabelOperator::kNotIn;
      r.values.emplace_back(absl::StripAsciiWhitespace(term.substr(ne + 2)));
    } else if (size_t eq = term.find('='); eq != absl::string_view::npos) {
      absl::string_view value = term.substr(eq + 1);
      absl::ConsumePrefix(&value, "=");  // `==` as in Kubernetes
      r.key = std::string(absl::StripAsciiWhitespace(term.substr(0, eq)));
      r.op = LabelOperator::kIn;
      r.values.emplace_back(absl::StripAsciiWhitespace(value));
    } else if (absl::ConsumePrefix(&term, "!")) {
      r.key = std::string(absl::StripAsciiWhitespace(term));
      r.op = LabelOperator::kDoesNotExist;
    } else {
      r.key = std::string(term);
      r.op = LabelOperator::kExists;
    }
    if (r.key.find(' ') != std::string::npos) return bad();
    requirements.push_back(std::move(r));
  }
  return Create(std::move(requirements), field);
}

bool LabelSelector::Matches(const Labels& labels) const {
  for (const LabelRequirement& r : requirements_) {
    if (!r.Matches(labels)) return false;
  }
  return true;
}

std::optional<std::vector<std::string>> LabelSelector::AllowedValues(absl::string_view key) const {
  std::optional<std::vector<std::string>> allowed;
  for (const LabelRequirement& r : requirements_) {
    if (r.key != key || r.op != LabelOperator::kIn) continue;
    if (!allowed) {
      allowed = r.values;
      continue;
    }
    std::vector<std::string> both;
    std::set_intersection(allowed->begin(), allowed->end(), r.values.begin(), r.values.end(),
                          std::back_inserter(both));
    allowed = std::move(both);
  }
  return allowed;
}

std::string LabelSelector::ToString() const {
  return absl::StrJoin(requirements_, ", ", [](std::string* out, const LabelRequirement& r) {
    out->append(r.ToString());
  });
}

}  // namespace berth
