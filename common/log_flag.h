// LogFlag: the --log-level flag every daemon takes, and the logger set up
// from it (common/log.h). Apart from log.h so that only the mains include
// CLI11.
#ifndef BERTH_COMMON_LOG_FLAG_H_
#define BERTH_COMMON_LOG_FLAG_H_

#include <CLI/CLI.hpp>
#include <string>

#include "absl/strings/string_view.h"
#include "common/log.h"

namespace berth {

class LogFlag {
 public:
  explicit LogFlag(CLI::App& app) {
    app.add_option("--log-level", level_, "lowest level logged: debug, info, warning or error")
        ->check([](const std::string& level) {
          // CLI11 puts the flag's name before the message.
          absl::StatusOr<LogLevel> parsed = ParseLogLevel(level, "");
          return parsed.ok() ? std::string() : std::string(parsed.status().message());
        })
        ->capture_default_str();
  }
  // After parsing: names `program` in every line, at the level asked.
  void Init(absl::string_view program) const {
    InitLog(program, ParseLogLevel(level_, "--log-level").value_or(LogLevel::kInfo));
  }

 private:
  std::string level_ = "info";
};

}  // namespace berth

#endif  // BERTH_COMMON_LOG_FLAG_H_
