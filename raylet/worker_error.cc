#include "raylet/worker_error.h"

#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace berth {
namespace {

// Enough for the error file's message and a dozen traceback lines.
constexpr std::streamoff kMaxReadBytes = 64 * 1024;
constexpr std::streamoff kStderrTailBytes = 8 * 1024;

std::string ReadUpTo(const std::string& path, std::streamoff max_bytes, bool tail) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = tail && size > max_bytes ? size - max_bytes : 0;
  in.seekg(from);
  std::string data(static_cast<size_t>(std::min(size - from, max_bytes)), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
}

// The last `n` non-empty lines of `text`, without a partial first line when
// `text` was cut from a longer file.
std::string LastLines(absl::string_view text, size_t n, bool cut) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (cut && !lines.empty()) lines.erase(lines.begin());
  std::vector<absl::string_view> kept;
  for (auto it = lines.rbegin(); it != lines.rend() && kept.size() < n; ++it) {
    absl::string_view line = absl::StripTrailingAsciiWhitespace(*it);
    if (!line.empty()) kept.push_back(line);
  }
  return absl::StrJoin(kept.rbegin(), kept.rend(), "\n");
}

// At most kMaxWorkerErrorBytes: the headline (first line, cut to half the
// bound) and the end of the rest, where the exception was raised.
std::string Bounded(std::string text) {
  if (text.size() <= kMaxWorkerErrorBytes) return text;
  constexpr size_t kHalf = kMaxWorkerErrorBytes / 2;
  size_t newline = text.find('\n');
  std::string head = text.substr(0, std::min(newline, kHalf));
  if (newline == std::string::npos) return head;
  const size_t room = kMaxWorkerErrorBytes - head.size() - 5;
  return absl::StrCat(head, "\n...", text.substr(text.size() - room));
}

// torch >= 2.2 prefixes a rank's uncaught exception lines with "[rank1]: ";
// the headline reads better without it.
std::string WithoutRankPrefix(const std::string& line) {
  static const std::regex kPrefix(R"(^\[rank\d+\]: ?)");
  return std::regex_replace(line, kPrefix, "", std::regex_constants::format_first_only);
}

// torch's error file: the exception line first, then where it was raised.
std::string FromErrorFile(const std::string& data) {
  nlohmann::json json = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("message")) return "";
  const nlohmann::json& message = json["message"];
  if (message.is_string()) return message.get<std::string>();
  if (!message.is_object() || !message.contains("message") || !message["message"].is_string()) {
    return "";
  }
  std::string out = message["message"].get<std::string>();
  const nlohmann::json* stack = nullptr;
  if (message.contains("extraInfo") && message["extraInfo"].is_object() &&
      message["extraInfo"].contains("py_callstack")) {
    stack = &message["extraInfo"]["py_callstack"];
  }
  if (stack != nullptr && stack->is_string()) {
    // The traceback ends with the exception line again: keep the frames.
    std::string frames = LastLines(stack->get<std::string>(), kWorkerErrorTailLines, false);
    if (!frames.empty()) absl::StrAppend(&out, "\n", frames);
  }
  return out;
}

// A Python traceback's exception line, when the traceback ends near the end
// of `lines`: an interpreter may print a few lines after it as it dies (torch
// 2.x may abort at exit with "terminate called without an active
// exception"), and the exception, not that, is why the process failed.
// Empty when there is none, or when more followed it (the traceback was
// printed and the process went on).
std::string LastTracebackException(const std::vector<std::string>& lines) {
  constexpr size_t kMaxLinesAfterIt = 3;
  for (size_t i = lines.size(); i-- > 0;) {
    if (!absl::StartsWith(lines[i], "Traceback (most recent call last):")) continue;
    for (size_t j = i + 1; j < lines.size(); ++j) {
      if (absl::ascii_isspace(static_cast<unsigned char>(lines[j][0]))) continue;  // a frame
      if (lines.size() - 1 - j > kMaxLinesAfterIt) return "";
      return lines[j];
    }
    return "";
  }
  return "";
}

// The headline of a stderr tail: the exception of a traceback that ends it,
// else its last line.
std::string StderrHeadline(absl::string_view tail) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(tail, '\n')) {
    std::string text = WithoutRankPrefix(std::string(absl::StripTrailingAsciiWhitespace(line)));
    if (!text.empty()) lines.push_back(std::move(text));
  }
  if (lines.empty()) return "";
  std::string exception = LastTracebackException(lines);
  return exception.empty() ? lines.back() : exception;
}

}  // namespace

WorkerError ReadWorkerError(const std::string& error_file, const std::string& stderr_path,
                            absl::Time started, absl::Time exited) {
  WorkerError error;
  error.failed_unix_us = absl::ToUnixMicros(exited);
  struct stat st = {};
  if (!error_file.empty() && stat(error_file.c_str(), &st) == 0) {
    const absl::Time written = absl::TimeFromTimespec(st.st_mtim);
    std::string message =
        written >= started ? FromErrorFile(ReadUpTo(error_file, kMaxReadBytes, false)) : "";
    if (!message.empty()) {
      error.message = Bounded(std::move(message));
      error.failed_unix_us = std::min(error.failed_unix_us, absl::ToUnixMicros(written));
      return error;
    }
  }
  const std::string tail = ReadUpTo(stderr_path, kStderrTailBytes, true);
  struct stat err_st = {};
  if (stat(stderr_path.c_str(), &err_st) != 0) return error;
  const std::string lines =
      LastLines(tail, kWorkerErrorTailLines, err_st.st_size > static_cast<off_t>(kStderrTailBytes));
  // The headline first, as with the error file.
  error.message = Bounded(lines.find('\n') == std::string::npos
                              ? lines
                              : absl::StrCat(StderrHeadline(tail), "\n", lines));
  // The last write to stderr dates the failure better than the exit: a
  // process prints its error and then may take seconds to tear down (torch
  // 2.x does), while the peers its exit disconnects print theirs. A process
  // that wrote nothing failed when it exited.
  const absl::Time written = absl::TimeFromTimespec(err_st.st_mtim);
  if (err_st.st_size > 0 && written >= started && written < exited) {
    error.failed_unix_us = absl::ToUnixMicros(written);
  }
  return error;
}

}  // namespace berth
