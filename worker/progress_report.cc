#include "worker/progress_report.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace berth {

absl::StatusOr<ScriptReport> ParseScriptReport(absl::string_view line) {
  nlohmann::json json = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("report: not a JSON object");
  }
  ScriptReport report;
  if (json.contains("step") && !json["step"].is_null()) {
    const nlohmann::json& step = json["step"];
    if (!step.is_number_integer() || step.get<int64_t>() < 0) {
      return absl::InvalidArgumentError("report.step: not a non-negative integer");
    }
    report.step = step.get<uint64_t>();
  }
  if (json.contains("metrics") && !json["metrics"].is_null()) {
    if (!json["metrics"].is_object())
      return absl::InvalidArgumentError("report.metrics: not an object");
    for (const auto& [name, value] : json["metrics"].items()) {
      if (!value.is_number()) continue;
      const double number = value.get<double>();
      if (std::isfinite(number)) report.metrics[name] = number;
    }
  }
  if (json.contains("checkpoint") && !json["checkpoint"].is_null()) {
    if (!json["checkpoint"].is_string()) {
      return absl::InvalidArgumentError("report.checkpoint: not a string");
    }
    report.checkpoint = json["checkpoint"].get<std::string>();
  }
  return report;
}

std::vector<std::string> ReportFileReader::ReadNewLines() {
  std::vector<std::string> lines;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return lines;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset_ += chunk.size();
  partial_ += chunk;
  size_t start = 0;
  for (size_t newline; (newline = partial_.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    if (newline > start) lines.push_back(partial_.substr(start, newline - start));
  }
  partial_.erase(0, start);
  return lines;
}

}  // namespace berth
