#include "common/log.h"

#include <atomic>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace berth {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
// Set once by InitLog before any thread logs.
std::string& Program() {
  static std::string* program = new std::string("berth");
  return *program;
}

char Letter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name, absl::string_view field) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat(field, field.empty() ? "" : ": ", "'", name,
                   "' is not a log level (debug, info, warning, error)"));
}

void InitLog(absl::string_view program, LogLevel level) {
  Program() = std::string(program);
  min_level.store(static_cast<int>(level));
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

void WriteLogLine(LogLevel level, absl::string_view text) {
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ",
                   Program(), " ", std::string(1, Letter(level)), " ", text, "\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace berth
