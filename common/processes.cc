#include "common/processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/log.h"

namespace berth {
namespace {

constexpr char kTcpListen[] = "0A";  // /proc/net/tcp's st column

// The socket inodes listening on `port`, from /proc/net/tcp and tcp6.
std::vector<std::string> ListeningInodes(int port) {
  std::vector<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (fields.size() < 10 || fields[3] != kTcpListen) continue;
      const size_t colon = fields[1].rfind(':');
      int local_port = 0;
      if (colon == std::string::npos ||
          !absl::SimpleHexAtoi(fields[1].substr(colon + 1), &local_port) || local_port != port) {
        continue;
      }
      inodes.push_back(fields[9]);
    }
  }
  return inodes;
}

std::string CommandName(const std::string& pid) {
  std::string comm = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/comm"));
  return std::string(absl::StripTrailingAsciiWhitespace(comm));
}

}  // namespace

std::optional<uint64_t> ProcessStartTicks(pid_t pid) {
  const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields are counted from the last ')'. starttime is field 22.
  const size_t end_of_comm = stat.rfind(')');
  if (end_of_comm == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(end_of_comm + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state).
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  if (fields[0] == "Z" || fields[0] == "X") return std::nullopt;  // exited, not yet reaped
  return ticks;
}

bool SameProcess(pid_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  const std::optional<uint64_t> now = ProcessStartTicks(pid);
  return now.has_value() && *now == start_ticks;
}

std::string ListenerOfPort(int port) {
  const std::vector<std::string> inodes = ListeningInodes(port);
  if (inodes.empty()) return "";
  std::vector<std::string> wanted;
  for (const std::string& inode : inodes) wanted.push_back(absl::StrCat("socket:[", inode, "]"));
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return "";
  std::string found;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    const std::string fd_dir = absl::StrCat("/proc/", entry->d_name, "/fd");
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (dirent* fd = readdir(fds)) {
      char target[64];
      const std::string link = absl::StrCat(fd_dir, "/", fd->d_name);
      const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      for (const std::string& w : wanted) {
        if (w == target)
          found = absl::StrCat("pid ", entry->d_name, " (", CommandName(entry->d_name), ")");
      }
      if (!found.empty()) break;
    }
    closedir(fds);
    if (!found.empty()) break;
  }
  closedir(proc);
  return found;
}

void ExecAgain(const std::vector<std::string>& command_line) {
  // Descriptors opened without O_CLOEXEC (by libraries) would outlive the exec.
  if (DIR* fds = opendir("/proc/self/fd")) {
    const int own = dirfd(fds);
    while (dirent* entry = readdir(fds)) {
      int fd = -1;
      if (absl::SimpleAtoi(entry->d_name, &fd) && fd > 2 && fd != own) {
        fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
      }
    }
    closedir(fds);
  }
  std::vector<char*> argv;
  for (const std::string& arg : command_line) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  LogError("cannot start again: exec /proc/self/exe: ", std::strerror(errno));
  _exit(1);
}

}  // namespace berth
