// NodeConfinement: how this node confines its workers, set up once at start.
//
// With --cgroups=auto (off by default), the node's WorkerCgroups (worker_cgroups.h), after
// killing and removing what an earlier life of this raylet left in them;
// where cgroups cannot be used (or with --cgroups=off), none, and the log
// says why. Either way the node label berth.io/confinement says which, for
// `berth nodes` and for label selectors. Also the device number of each of
// the node's GPUs: a real GPU's /dev/nvidiaN; a simulated GPU gets a device
// node of its own, <state dir>/dev/nvidiaN (char 195:N, made with mknod
// where the raylet may), so the device rule is exercised without a GPU.
#ifndef BERTH_RAYLET_NODE_CONFINEMENT_H_
#define BERTH_RAYLET_NODE_CONFINEMENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "raylet/gpu_discovery.h"
#include "raylet/worker_cgroups.h"

namespace berth {

struct NodeConfinementOptions {
  std::string mode;  // "auto" or "off"
  std::string node_id;
  std::string node_dir;
  const std::vector<GpuDevice>* gpus = nullptr;
  bool simulated_gpus = false;
};

struct NodeConfinement {
  std::unique_ptr<WorkerCgroups> cgroups;  // null: unconfined
  std::string label;                       // berth.io/confinement's value
  std::map<uint32_t, DeviceNumber> gpu_devices;
};

NodeConfinement ConfineWorkers(const NodeConfinementOptions& options);

}  // namespace berth

#endif  // BERTH_RAYLET_NODE_CONFINEMENT_H_
