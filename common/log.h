// Log: the one logger of berth's daemons (head, raylet, autoscaler, worker).
//
//   2026-12-01T14:30:00.123 berth-head W node n1 missed its heartbeats: DEAD
//
// One line per call on stderr, written whole (one fputs), so lines from
// different threads never interleave: local time to the millisecond, the
// program (InitLog), the level's letter (D, I, W, E), then the arguments as
// absl::StrCat joins them. Lines below the level InitLog set (default INFO)
// are dropped before their text is built.
#ifndef BERTH_COMMON_LOG_H_
#define BERTH_COMMON_LOG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace berth {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning" or "error" (the --log-level flag); errors name
// `field` when it is not empty.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name, absl::string_view field);

// Names the program in every line and sets the lowest level written. Call
// once, first thing in main.
void InitLog(absl::string_view program, LogLevel level = LogLevel::kInfo);

bool LogEnabled(LogLevel level);
void WriteLogLine(LogLevel level, absl::string_view text);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) WriteLogLine(level, absl::StrCat(args...));
}
template <typename... Args>
void LogDebug(const Args&... args) {
  Log(LogLevel::kDebug, args...);
}
template <typename... Args>
void LogInfo(const Args&... args) {
  Log(LogLevel::kInfo, args...);
}
template <typename... Args>
void LogWarning(const Args&... args) {
  Log(LogLevel::kWarning, args...);
}
template <typename... Args>
void LogError(const Args&... args) {
  Log(LogLevel::kError, args...);
}

}  // namespace berth

#endif  // BERTH_COMMON_LOG_H_
