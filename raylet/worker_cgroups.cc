#include "raylet/worker_cgroups.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/working_dir_package.h"

namespace berth {
namespace {

// What berth confines with; cpuacct and freezer are used where mounted.
constexpr const char* kRequiredControllers[] = {"memory", "cpu", "pids", "devices"};
constexpr const char* kOptionalControllers[] = {"cpuacct"};
constexpr int64_t kCfsPeriodUs = 100000;
// The kernel's smallest CFS quota.
constexpr int64_t kMinCfsQuotaUs = 1000;
// cgroup v1 shows "no limit" as a page-rounded LONG_MAX.
constexpr int64_t kNoLimitAbove = int64_t{1} << 62;

bool IsControllerWeUse(absl::string_view name) {
  for (const char* c : kRequiredControllers) {
    if (name == c) return true;
  }
  for (const char* c : kOptionalControllers) {
    if (name == c) return true;
  }
  return false;
}

absl::Status WriteValue(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("opening ", path, ": ", std::strerror(errno)));
  const ssize_t n = write(fd, value.data(), value.size());
  const int error = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::InternalError(
        absl::StrCat("writing \"", value, "\" to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

int64_t ReadInt64(const std::string& path) {
  int64_t value = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(path)), &value) ? value : 0;
}

// Node ids may hold any character; a cgroup name may not hold '/'.
std::string CgroupName(absl::string_view node_id, absl::string_view state_dir) {
  std::string name(node_id.substr(0, 64));
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') c = '_';
  }
  // "sha256:<hex>": 8 hex digits tell the state dirs of one machine apart.
  return absl::StrCat(name, "-", DigestOf(state_dir).substr(7, 8));
}

// A process's v1 cgroups, from its /proc/<pid>/cgroup ("4:memory:/path",
// "2:cpu,cpuacct:/path"): controller -> path in its hierarchy.
std::map<std::string, std::string> CgroupPaths(absl::string_view proc_cgroup) {
  std::map<std::string, std::string> paths;
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    for (absl::string_view controller : absl::StrSplit(fields[1], ',', absl::SkipEmpty())) {
      paths[std::string(controller)] = std::string(fields[2]);
    }
  }
  return paths;
}

// Why there are no v1 hierarchies to use: which one is missing, and whether
// the controllers are on cgroup v2 instead.
std::string MissingControllerReason(absl::string_view mounts, absl::string_view controller) {
  for (absl::string_view line : absl::StrSplit(mounts, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 3 || fields[2] != "cgroup2") continue;
    const std::string controllers = ReadFileOrEmpty(absl::StrCat(fields[1], "/cgroup.controllers"));
    for (absl::string_view c : absl::StrSplit(controllers, absl::ByAnyChar(" \n"))) {
      if (c == controller) {
        return absl::StrCat("the ", controller,
                            " controller is on cgroup v2, which berth does not confine with yet");
      }
    }
  }
  return absl::StrCat("no cgroup v1 ", controller, " hierarchy is mounted");
}

}  // namespace

std::map<std::string, CgroupHierarchy> ParseCgroupV1(absl::string_view mounts,
                                                     absl::string_view self_cgroup) {
  std::map<std::string, std::string> mount_of;
  for (absl::string_view line : absl::StrSplit(mounts, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 4 || fields[2] != "cgroup") continue;
    for (absl::string_view option : absl::StrSplit(fields[3], ',')) {
      if (IsControllerWeUse(option)) mount_of[std::string(option)] = std::string(fields[1]);
    }
  }
  std::map<std::string, CgroupHierarchy> hierarchies;
  for (const auto& [controller, path] : CgroupPaths(self_cgroup)) {
    auto it = mount_of.find(controller);
    if (it != mount_of.end()) hierarchies[controller] = {it->second, path};
  }
  return hierarchies;
}

CgroupJoin::~CgroupJoin() {
  for (int fd : fds_) close(fd);
}

absl::StatusOr<std::unique_ptr<WorkerCgroups>> WorkerCgroups::Open(const Options& options) {
  const std::string mounts = ReadFileOrEmpty(options.mounts_file);
  std::map<std::string, CgroupHierarchy> hierarchies =
      ParseCgroupV1(mounts, ReadFileOrEmpty(options.self_cgroup_file));
  for (const char* controller : kRequiredControllers) {
    if (hierarchies.count(controller) == 0) {
      return absl::FailedPreconditionError(MissingControllerReason(mounts, controller));
    }
  }
  std::unique_ptr<WorkerCgroups> cgroups(new WorkerCgroups(
      std::move(hierarchies), "/berth/" + CgroupName(options.node_id, options.state_dir)));
  for (const auto& [controller, hierarchy] : cgroups->hierarchies_) {
    const std::string base = cgroups->Dir(controller, "");
    std::error_code error;
    std::filesystem::create_directories(base, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("creating cgroup ", base, ": ", error.message()));
    }
  }
  return cgroups;
}

WorkerCgroups::~WorkerCgroups() {
  for (const auto& [controller, hierarchy] : hierarchies_) {
    const std::string base = Dir(controller, "");
    rmdir(base.c_str());
    rmdir(std::filesystem::path(base).parent_path().c_str());
  }
}

std::string WorkerCgroups::Path(const std::string& controller, const std::string& worker_id) const {
  const CgroupHierarchy& hierarchy = hierarchies_.at(controller);
  std::string path = absl::StrCat(absl::StripSuffix(hierarchy.own, "/"), node_path_);
  if (!worker_id.empty()) absl::StrAppend(&path, "/", worker_id);
  return path;
}

std::string WorkerCgroups::Dir(const std::string& controller, const std::string& worker_id) const {
  auto it = hierarchies_.find(controller);
  if (it == hierarchies_.end()) return "";
  return it->second.mount + Path(controller, worker_id);
}

std::vector<std::string> WorkerCgroups::Dirs(const std::string& worker_id) const {
  std::set<std::string> dirs;
  for (const auto& [controller, hierarchy] : hierarchies_) dirs.insert(Dir(controller, worker_id));
  return {dirs.begin(), dirs.end()};
}

absl::StatusOr<CgroupJoin> WorkerCgroups::Create(const std::string& worker_id,
                                                 const CgroupLimits& limits) {
  if (!Remove(worker_id)) {
    KillAll(worker_id);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!Remove(worker_id)) {
      return absl::InternalError(
          absl::StrCat("cgroup ", Dir("memory", worker_id), " of an earlier worker is busy"));
    }
  }
  auto apply = [&]() -> absl::StatusOr<CgroupJoin> {
    for (const std::string& dir : Dirs(worker_id)) {
      if (mkdir(dir.c_str(), 0755) != 0) {
        return absl::InternalError(absl::StrCat("creating ", dir, ": ", std::strerror(errno)));
      }
    }
    const std::string memory = Dir("memory", worker_id);
    if (limits.memory_bytes > 0) {
      const std::string bytes = absl::StrCat(limits.memory_bytes);
      if (absl::Status s = WriteValue(memory + "/memory.limit_in_bytes", bytes); !s.ok()) return s;
      // Where the kernel counts swap, the worker may not swap past it either.
      const std::string swap = memory + "/memory.memsw.limit_in_bytes";
      if (access(swap.c_str(), F_OK) == 0) {
        if (absl::Status s = WriteValue(swap, bytes); !s.ok()) return s;
      }
    }
    const std::string cpu = Dir("cpu", worker_id);
    if (limits.cpus > 0) {
      const int64_t quota =
          std::max(kMinCfsQuotaUs, static_cast<int64_t>(std::llround(limits.cpus * kCfsPeriodUs)));
      if (absl::Status s = WriteValue(cpu + "/cpu.cfs_period_us", absl::StrCat(kCfsPeriodUs));
          !s.ok()) {
        return s;
      }
      if (absl::Status s = WriteValue(cpu + "/cpu.cfs_quota_us", absl::StrCat(quota)); !s.ok()) {
        return s;
      }
    }
    if (limits.pids > 0) {
      const std::string pids = Dir("pids", worker_id) + "/pids.max";
      if (absl::Status s = WriteValue(pids, absl::StrCat(limits.pids)); !s.ok()) return s;
    }
    const std::string deny = Dir("devices", worker_id) + "/devices.deny";
    for (const DeviceNumber& device : limits.denied_devices) {
      if (absl::Status s =
              WriteValue(deny, absl::StrCat("c ", device.major, ":", device.minor, " rwm"));
          !s.ok()) {
        return s;
      }
    }
    std::vector<int> fds;
    for (const std::string& dir : Dirs(worker_id)) {
      const std::string procs = dir + "/cgroup.procs";
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        CgroupJoin opened(std::move(fds));  // closes them
        return absl::InternalError(absl::StrCat("opening ", procs, ": ", std::strerror(errno)));
      }
      fds.push_back(fd);
    }
    return CgroupJoin(std::move(fds));
  };
  absl::StatusOr<CgroupJoin> join = apply();
  if (!join.ok()) Remove(worker_id);
  return join;
}

bool WorkerCgroups::Holds(int pid, const std::string& worker_id) const {
  const std::map<std::string, std::string> paths =
      CgroupPaths(ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cgroup")));
  auto memory = paths.find("memory");
  return memory != paths.end() && memory->second == Path("memory", worker_id);
}

int WorkerCgroups::KillAll(const std::string& worker_id) {
  const std::string procs = ReadFileOrEmpty(Dir("memory", worker_id) + "/cgroup.procs");
  int signalled = 0;
  for (absl::string_view line : absl::StrSplit(procs, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(line, &pid) || pid <= 0) continue;
    // The pidfd pins the process: once it is seen in the cgroup, the signal
    // cannot reach another process that reused the pid.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) continue;
    if (Holds(pid, worker_id) && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0) {
      ++signalled;
    }
    close(pidfd);
  }
  return signalled;
}

int64_t WorkerCgroups::OomKills(const std::string& worker_id) const {
  const std::string control = ReadFileOrEmpty(Dir("memory", worker_id) + "/memory.oom_control");
  for (absl::string_view line : absl::StrSplit(control, '\n')) {
    int64_t kills = 0;
    if (absl::ConsumePrefix(&line, "oom_kill ") && absl::SimpleAtoi(line, &kills)) return kills;
  }
  return 0;
}

CgroupUsage WorkerCgroups::Usage(const std::string& worker_id) const {
  CgroupUsage usage;
  usage.memory_bytes = ReadInt64(Dir("memory", worker_id) + "/memory.usage_in_bytes");
  usage.memory_limit_bytes = MemoryLimit(worker_id);
  const std::string cpuacct = Dir("cpuacct", worker_id);
  if (!cpuacct.empty()) usage.cpu_seconds = ReadInt64(cpuacct + "/cpuacct.usage") / 1e9;
  return usage;
}

int64_t WorkerCgroups::MemoryLimit(const std::string& worker_id) const {
  const int64_t limit = ReadInt64(Dir("memory", worker_id) + "/memory.limit_in_bytes");
  return limit >= kNoLimitAbove ? 0 : limit;
}

bool WorkerCgroups::Remove(const std::string& worker_id) {
  bool removed = true;
  for (const std::string& dir : Dirs(worker_id)) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) removed = false;
  }
  return removed;
}

int WorkerCgroups::RemoveLeftovers() {
  std::set<std::string> names;
  for (const auto& [controller, hierarchy] : hierarchies_) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(Dir(controller, ""), error)) {
      if (entry.is_directory(error)) names.insert(entry.path().filename().string());
    }
  }
  for (const std::string& name : names) {
    // Killed processes take a moment to leave their cgroup.
    for (int attempt = 0; attempt < 50 && !Remove(name); ++attempt) {
      KillAll(name);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return static_cast<int>(names.size());
}

}  // namespace berth
