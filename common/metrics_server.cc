#include "common/metrics_server.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace berth {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  if (listen.empty() || listen.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: want HOST:PORT, got \"", listen, "\""));
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One thread: scrapes are rare and cheap.
    exposer = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen ", listen, ": cannot listen: ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen ", listen, ": no port bound"));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), ports.front()));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port)
    : exposer_(std::move(exposer)), port_(port) {}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Register(const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

GaugeFamily::GaugeFamily(std::string name, std::string help) {
  family_.name = std::move(name);
  family_.help = std::move(help);
  family_.type = prometheus::MetricType::Gauge;
}

GaugeFamily& GaugeFamily::Add(const MetricLabels& labels, double value) {
  prometheus::ClientMetric m;
  for (const auto& [name, v] : labels) m.label.push_back({name, v});
  m.gauge.value = value;
  family_.metric.push_back(std::move(m));
  return *this;
}

}  // namespace berth
