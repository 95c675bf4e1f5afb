// The environment of a train job's processes: torchrun's env contract, with
// the same names and meanings as torchrun's agent sets them
// (torch/distributed/elastic/agent/server/local_elastic_agent.py), plus
// berth's own variables. A script that runs under torchrun runs under berth
// unchanged: `init_process_group("env://")`, Lightning's
// TorchElasticEnvironment and Accelerate's PartialState find the run by
// themselves. Pure: the caller adds the user's own env on top (only
// DefaultedEnvNames() may be overridden; ReservedEnvNames() may not).
//
// Rendezvous: the c10d TCPStore at MASTER_ADDR:MASTER_PORT always runs in
// the user's own torch, so its protocol is the script's whatever the
// version (torch 2.1 renumbered it). When the command is a Python
// interpreter, a store host process of that interpreter holds it for the
// whole attempt and the ranks are its clients
// (TORCHELASTIC_USE_AGENT_STORE=True), as under torchrun's agent: no rank
// depends on rank 0 outliving it (with rank 0 hosting, peers still tearing
// down when rank 0 exits abort on torch 2.x: "terminate called without an
// active exception"). Otherwise rank 0 hosts it
// (TORCHELASTIC_USE_AGENT_STORE=False), as Kubeflow's PyTorchJob does. The
// built-in berth-worker ranks use the trainer's store.
#ifndef BERTH_TRAIN_WORKER_ENV_H_
#define BERTH_TRAIN_WORKER_ENV_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "train/rank_assignment.h"

namespace berth {

// What every process of one attempt of a job shares.
struct AttemptEnv {
  std::string job_id;
  std::string placement_group_id;
  std::string head_address;
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t world_size = 0;
  uint32_t num_nodes = 0;
  uint32_t attempt = 0;           // TORCHELASTIC_RESTART_COUNT
  int32_t max_restarts = 0;       // failure_config.max_failures; -1 = unlimited
  bool agent_store = false;       // another process hosts the store (trainer or store host)
  std::string storage_path;       // the job's folder for checkpoints (BERTH_STORAGE_PATH)
  std::string report_file;        // where berth.train.report() writes (rank 0's node)
  std::string latest_checkpoint;  // berth.train.get_checkpoint(); "" = none
  double cpus_per_worker = 0;     // OMP_NUM_THREADS, floor, at least 1
  std::vector<double> rank_cpus;  // by world rank: a rank's own OMP_NUM_THREADS
};

// One rank's environment.
std::map<std::string, std::string> RankEnv(const AttemptEnv& attempt, const RankedWorker& rank);

// The environment of a per-node launcher process (torchrun, accelerate
// launch) that starts `local_world_size` ranks of node `node_rank` itself:
// the node's part of the contract and berth's variables, none of a rank's
// own (RANK, LOCAL_RANK, ...), which the launcher sets for its children;
// ACCELERATE_USE_CPU on a node without GPUs, which the launcher passes on.
std::map<std::string, std::string> NodeEnv(const AttemptEnv& attempt, const std::string& node_id,
                                           uint32_t node_rank, uint32_t local_world_size,
                                           uint32_t first_bundle_index, bool has_gpus);

// A launcher whose command line berth completes from the placement, so an
// existing `torchrun ... train.py` or `accelerate launch --config_file F
// train.py` line runs unchanged across nodes.
enum class Launcher { kNone, kTorchrun, kAccelerate };

// One node's part of a launch.
struct NodeLaunch {
  uint32_t node_rank = 0;
  uint32_t num_nodes = 0;
  uint32_t nproc_per_node = 0;
  uint32_t world_size = 0;
  std::string master_addr;
  uint16_t master_port = 0;
};

// `argv` with the launcher's flags inserted where the launcher reads them:
// after the program (torchrun, `python -m torch.distributed.run`) or after
// `launch` (`accelerate launch`, `python -m accelerate.commands.launch`).
// torchrun: --nnodes --node_rank --nproc_per_node --master_addr
// --master_port; accelerate: --num_machines --machine_rank --num_processes
// --main_process_ip --main_process_port. kNone: argv as it is.
absl::StatusOr<std::vector<std::string>> LauncherArgv(Launcher launcher,
                                                      const std::vector<std::string>& argv,
                                                      const NodeLaunch& node);
// Whether `argv` suits the launcher and leaves its flags to berth;
// INVALID_ARGUMENT naming `field` (e.g. "spec.entrypoint.command.argv") if
// not. LauncherArgv succeeds on every argv this accepts.
absl::Status ValidateLauncherArgv(Launcher launcher, const std::vector<std::string>& argv,
                                  absl::string_view field);

// Whether `program` (argv[0]) is a Python interpreter ("python",
// "/venv/bin/python3.11"): then a store host runs with it.
bool IsPythonInterpreter(absl::string_view program);

// The store host's argv: `python -c <script> <port> <world size>`. It
// serves a c10d TCPStore on every interface until SIGTERM or until the
// raylet that started it dies, and only waits when the interpreter has no
// torch (the command then needs no store).
std::vector<std::string> StoreHostArgv(const std::string& python, uint16_t port,
                                       uint32_t world_size);

// Names berth sets that a job's own env may not set: the contract's and
// berth's, and TORCHELASTIC_ERROR_FILE (the raylet's, one per process).
const std::vector<std::string>& ReservedEnvNames();
// Names berth sets only when the job's env does not (OMP_NUM_THREADS,
// TORCH_NCCL_ASYNC_ERROR_HANDLING, PYTHONUNBUFFERED, PATH, and
// ACCELERATE_USE_CPU for a rank without GPUs).
const std::vector<std::string>& DefaultedEnvNames();

}  // namespace berth

#endif  // BERTH_TRAIN_WORKER_ENV_H_
