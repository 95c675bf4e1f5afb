// The environment a berth-worker rank runs in: the torchrun env contract
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// NODE_RANK, CUDA_VISIBLE_DEVICES), the torchelastic agent-store switch, and
// the test-only crash hook.
//
// Parsing is pure (variables come through a lookup function) and total: any
// missing or malformed variable is an INVALID_ARGUMENT that names it. No
// torch here; tests and the CLI include this freely.
#ifndef BERTH_WORKER_TORCHRUN_ENV_H_
#define BERTH_WORKER_TORCHRUN_ENV_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// Value of an environment variable, or nullopt if unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// Makes rank `rank` exit with code 3 at step `step`, once: the first crash
// creates `once_file`, and no rank crashes while it exists.
struct CrashHook {
  uint64_t step = 0;
  uint32_t rank = 1;
  std::string once_file;  // empty = crash every time
};

struct TorchrunEnv {
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  // Default to single-node torchrun values: LOCAL_RANK = RANK,
  // LOCAL_WORLD_SIZE = WORLD_SIZE, NODE_RANK = 0.
  uint32_t local_rank = 0;
  uint32_t local_world_size = 0;
  uint32_t node_rank = 0;
  // Entries of CUDA_VISIBLE_DEVICES (indices or UUIDs); nullopt when unset,
  // i.e. every device of the machine is visible.
  std::optional<std::vector<std::string>> cuda_visible_devices;
  // TORCHELASTIC_USE_AGENT_STORE=True: someone else (the berth trainer, or
  // torchrun's agent) hosts the store and every rank is a client.
  bool use_agent_store = false;
  // TORCHELASTIC_RESTART_COUNT: which attempt of the group this is; keeps
  // the collective group's store keys apart between attempts.
  uint32_t restart_count = 0;
  // GLOO_SOCKET_IFNAME: network interface Gloo binds to; empty = choose.
  std::string gloo_socket_ifname;
  // BERTH_TEST_CRASH_AT_STEP / _RANK / _ONCE_FILE.
  std::optional<CrashHook> crash_hook;
};

absl::StatusOr<TorchrunEnv> ParseTorchrunEnv(const EnvLookup& env);

// Whether `host` names this machine's loopback ("localhost", 127.x.x.x, ::1);
// then Gloo binds to 127.0.0.1 whatever the host name resolves to.
bool IsLoopbackHost(absl::string_view host);

// The CUDA device index (as the CUDA runtime numbers the visible devices)
// for this rank: LOCAL_RANK when that many devices are visible, else 0 when
// the rank sees exactly one (a per-worker CUDA_VISIBLE_DEVICES, as berth
// sets it). FAILED_PRECONDITION otherwise.
absl::StatusOr<int> LocalCudaDevice(const TorchrunEnv& env, int visible_device_count);

}  // namespace berth

#endif  // BERTH_WORKER_TORCHRUN_ENV_H_
