// MetricsServer: the HTTP /metrics endpoint of a berth daemon (Prometheus
// text format, prometheus-cpp's exposer), plus helpers to build metric
// families that are computed from the daemon's state at scrape time.
//
// Promises: Start() binds before returning (port 0 picks a free port) and
// reports a bind failure as a Status naming the address; a scrape calls each
// registered collectable on the exposer's thread, so collectables must be
// thread safe. Scrape-time families (GaugeFamily) never leave stale series
// behind, unlike long-lived labelled gauges.
#ifndef BERTH_COMMON_METRICS_SERVER_H_
#define BERTH_COMMON_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace prometheus {
class Exposer;
}

namespace berth {

class MetricsServer {
 public:
  // Serves http://`listen`/metrics, `listen` being HOST:PORT.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port.
  int port() const { return port_; }
  // Adds a source of metric families; the caller keeps it alive.
  void Register(const std::weak_ptr<prometheus::Collectable>& collectable);

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port);
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
};

// A collectable that calls `collect` at every scrape.
class CallbackCollectable final : public prometheus::Collectable {
 public:
  explicit CallbackCollectable(std::function<std::vector<prometheus::MetricFamily>()> collect)
      : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  std::function<std::vector<prometheus::MetricFamily>()> collect_;
};

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Builds one gauge family sample by sample.
class GaugeFamily {
 public:
  GaugeFamily(std::string name, std::string help);
  GaugeFamily& Add(const MetricLabels& labels, double value);
  prometheus::MetricFamily Take() { return std::move(family_); }

 private:
  prometheus::MetricFamily family_;
};

}  // namespace berth

#endif  // BERTH_COMMON_METRICS_SERVER_H_
