// Test helper: looks up one sample in rendered Prometheus metric families.
#ifndef BERTH_COMMON_METRIC_SAMPLES_H_
#define BERTH_COMMON_METRIC_SAMPLES_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace berth::testing {

// The gauge value of `name` with exactly `labels`, if there is one.
inline std::optional<double> Sample(const std::vector<prometheus::MetricFamily>& families,
                                    const std::string& name,
                                    const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      if (have == labels) return metric.gauge.value;
    }
  }
  return std::nullopt;
}

// Number of series of `name`.
inline size_t SeriesCount(const std::vector<prometheus::MetricFamily>& families,
                          const std::string& name) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.name == name) return family.metric.size();
  }
  return 0;
}

}  // namespace berth::testing

#endif  // BERTH_COMMON_METRIC_SAMPLES_H_
