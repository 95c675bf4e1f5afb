#include "bench/replay/report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {

double Quantile(std::vector<double> values, double q, double if_empty) {
  if (values.empty()) return if_empty;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

std::string MarkdownRow(const std::vector<std::string>& cells) {
  return absl::StrCat("| ", absl::StrJoin(cells, " | "), " |\n");
}

}  // namespace berth
