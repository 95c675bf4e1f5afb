#include "raylet/node_confinement.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace berth {
namespace {

// <node_dir>/dev/nvidiaN for each simulated GPU; a node that may not make
// device nodes (not root) still denies their numbers.
void MakeSimulatedDeviceNodes(const NodeConfinementOptions& options) {
  const std::string dir = options.node_dir + "/dev";
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  for (const GpuDevice& gpu : *options.gpus) {
    const std::string path = absl::StrCat(dir, "/nvidia", gpu.minor_number);
    struct stat existing = {};
    if (stat(path.c_str(), &existing) == 0) continue;
    if (mknod(path.c_str(), S_IFCHR | 0666, makedev(kNvidiaMajor, gpu.minor_number)) != 0) {
      LogWarning("simulated GPU ", gpu.index, " gets no device node ", path, ": ",
                 std::strerror(errno));
      return;
    }
  }
}

}  // namespace

NodeConfinement ConfineWorkers(const NodeConfinementOptions& options) {
  NodeConfinement confinement;
  for (const GpuDevice& gpu : *options.gpus) {
    confinement.gpu_devices[gpu.index] = {kNvidiaMajor, gpu.minor_number};
  }
  if (options.simulated_gpus) MakeSimulatedDeviceNodes(options);
  if (options.mode == "off") {
    LogInfo("workers run unconfined (--cgroups=off): no memory, CPU or GPU device limits");
    confinement.label = "none";
    return confinement;
  }
  absl::StatusOr<std::unique_ptr<WorkerCgroups>> cgroups =
      WorkerCgroups::Open({options.node_id, options.node_dir});
  if (!cgroups.ok()) {
    LogWarning("workers run unconfined: no memory, CPU or GPU device limits (",
               cgroups.status().message(), ")");
    confinement.label = "none";
    return confinement;
  }
  confinement.cgroups = *std::move(cgroups);
  if (int left = confinement.cgroups->RemoveLeftovers(); left > 0) {
    LogInfo("removed the cgroups of ", left, " worker(s) of an earlier life of this node");
  }
  confinement.label = std::string(WorkerCgroups::kLabel);
  LogInfo("workers confined to their bundles with cgroup v1 (memory, CPU, pids, GPU devices)");
  return confinement;
}

}  // namespace berth
