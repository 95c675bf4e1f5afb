// WorkerCgroups: each worker confined to its bundle by cgroups of its own.
//
// Under this raylet's own cgroup in each hierarchy it keeps
// `berth/<node>-<state>`, and in it one cgroup per worker, named by the
// worker id.
// The worker's keeper joins it between fork and exec (WorkerCgroup's
// descriptors), so every process of the worker is inside, however it forks
// or whatever session it starts, and nothing else is:
//  - memory: the bundle's `memory` (and memory+swap where the kernel counts
//    swap); an OOM kills inside the worker's cgroup only, and OomKills
//    says so afterwards;
//  - cpu: the bundle's `CPU` as a CFS quota (CPU x the period);
//  - pids: a cap on tasks, so a fork bomb stays inside;
//  - devices: the node's GPUs the worker was not given (Slurm's
//    ConstrainDevices: every other device stays allowed, so NICs,
//    InfiniBand and the NVIDIA control devices keep working).
// KillAll signals exactly the processes in the worker's cgroup (each pid
// checked through a pidfd against its own cgroup file first); Remove takes
// the cgroups away once they are empty.
//
// Layouts: cgroup v1, alone or hybrid beside an empty unified hierarchy.
// A node whose controllers are on cgroup v2, or that has no usable
// cgroups (not root, not mounted), runs its workers unconfined, and
// Open's result says why: never silently. Thread-safe: the state is the
// file system, and calls about distinct workers are independent.
#ifndef BERTH_RAYLET_WORKER_CGROUPS_H_
#define BERTH_RAYLET_WORKER_CGROUPS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

struct DeviceNumber {
  uint32_t major = 0;
  uint32_t minor = 0;
};

// The NVIDIA driver's character major: /dev/nvidiaN is (195, N).
inline constexpr uint32_t kNvidiaMajor = 195;

struct CgroupLimits {
  int64_t memory_bytes = 0;                  // 0: no limit
  double cpus = 0;                           // 0: no limit
  int64_t pids = 0;                          // 0: no limit
  std::vector<DeviceNumber> denied_devices;  // character devices
};

struct CgroupUsage {
  int64_t memory_bytes = 0;
  int64_t memory_limit_bytes = 0;  // 0: no limit
  double cpu_seconds = 0;          // 0 without the cpuacct controller
};

// The cgroup v1 hierarchies this process is in, from /proc/self/mounts and
// /proc/self/cgroup: controller -> (mount point, this process's path in it).
struct CgroupHierarchy {
  std::string mount;  // "/sys/fs/cgroup/memory"
  std::string own;    // "/" or "/system.slice/berth-raylet.service"
};
std::map<std::string, CgroupHierarchy> ParseCgroupV1(absl::string_view mounts,
                                                     absl::string_view self_cgroup);

// The descriptors a new worker's keeper writes "0" to, to join its
// cgroups (cgroup.procs of each hierarchy); closed with the object.
class CgroupJoin {
 public:
  CgroupJoin() = default;
  explicit CgroupJoin(std::vector<int> fds) : fds_(std::move(fds)) {}
  CgroupJoin(CgroupJoin&& other) noexcept : fds_(std::move(other.fds_)) { other.fds_.clear(); }
  CgroupJoin& operator=(CgroupJoin&&) = delete;
  CgroupJoin(const CgroupJoin&) = delete;
  ~CgroupJoin();
  const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;
};

class WorkerCgroups {
 public:
  struct Options {
    // Name this raylet's cgroup, "berth/<node id>-<digest of the state
    // dir>": raylets of one machine (tests run several "n0") never share
    // one, and a raylet that starts again finds its earlier life's.
    std::string node_id;
    std::string state_dir;
    std::string mounts_file = "/proc/self/mounts";
    std::string self_cgroup_file = "/proc/self/cgroup";
  };
  // The worker cgroups of this node, or why there are none (no usable
  // cgroup v1 memory, cpu, pids and devices hierarchies, or no right to
  // create cgroups in them).
  static absl::StatusOr<std::unique_ptr<WorkerCgroups>> Open(const Options& options);
  // Removes this raylet's cgroup (and "berth" above it) where empty.
  ~WorkerCgroups();
  WorkerCgroups(const WorkerCgroups&) = delete;
  WorkerCgroups& operator=(const WorkerCgroups&) = delete;

  // "cgroup-v1": the value of the node label berth.io/confinement.
  static constexpr absl::string_view kLabel = "cgroup-v1";

  // Creates the worker's cgroups with `limits`; a leftover of the same id
  // is emptied and replaced. INTERNAL naming the file on failure, with
  // nothing left behind.
  absl::StatusOr<CgroupJoin> Create(const std::string& worker_id, const CgroupLimits& limits);
  // SIGKILLs every process in the worker's cgroup, again until none is
  // left or a few rounds have passed; how many were signalled.
  int KillAll(const std::string& worker_id);
  // How many processes the kernel's OOM killer ended in the worker's cgroup.
  int64_t OomKills(const std::string& worker_id) const;
  CgroupUsage Usage(const std::string& worker_id) const;
  // The worker's memory limit in bytes (0: none).
  int64_t MemoryLimit(const std::string& worker_id) const;
  // Removes the worker's cgroups; false while a process is still in one.
  bool Remove(const std::string& worker_id);
  // The worker cgroups an earlier life of this raylet left: their
  // processes killed, the cgroups removed. How many there were.
  int RemoveLeftovers();

 private:
  WorkerCgroups(std::map<std::string, CgroupHierarchy> hierarchies, std::string node_path)
      : hierarchies_(std::move(hierarchies)), node_path_(std::move(node_path)) {}
  // The worker's cgroup in `controller`'s hierarchy, as the hierarchy
  // names it ("<own>/berth/<node>/<worker>"), and as a directory.
  std::string Path(const std::string& controller, const std::string& worker_id) const;
  std::string Dir(const std::string& controller, const std::string& worker_id) const;
  // The worker's distinct directories, one per hierarchy.
  std::vector<std::string> Dirs(const std::string& worker_id) const;
  // Whether `pid` is in the worker's memory cgroup now.
  bool Holds(int pid, const std::string& worker_id) const;

  // The controllers used (and cpuacct where mounted).
  const std::map<std::string, CgroupHierarchy> hierarchies_;
  const std::string node_path_;  // "/berth/<node>"
};

}  // namespace berth

#endif  // BERTH_RAYLET_WORKER_CGROUPS_H_
