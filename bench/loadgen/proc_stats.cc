#include "bench/loadgen/proc_stats.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth {

int64_t ProcStatus(pid_t pid, absl::string_view field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t value = 0;
    if (absl::StartsWith(line, field) &&
        absl::SimpleAtoi(
            absl::StripAsciiWhitespace(absl::StripSuffix(line.substr(field.size()), "kB")),
            &value)) {
      return value;
    }
  }
  return 0;
}

double CpuSeconds(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (in parentheses, which may hold spaces).
  std::vector<absl::string_view> fields = absl::StrSplit(text.substr(text.rfind(')') + 2), ' ');
  double utime = 0, stime = 0;
  if (fields.size() > 12 && absl::SimpleAtod(fields[11], &utime) &&
      absl::SimpleAtod(fields[12], &stime)) {
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return 0;
}

}  // namespace berth
