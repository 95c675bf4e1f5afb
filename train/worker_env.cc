#include "train/worker_env.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace berth {
namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// torchrun's rule: a process's CPUs, whole, at least 1.
std::string OmpThreads(double cpus) { return absl::StrCat(std::max(1.0, std::floor(cpus))); }

// What a rank and a per-node launcher share.
std::map<std::string, std::string> CommonEnv(const AttemptEnv& a, const std::string& node_id,
                                             uint32_t node_rank, uint32_t local_world_size,
                                             uint32_t bundle_index) {
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultPath;
  env["MASTER_ADDR"] = a.master_addr;
  env["MASTER_PORT"] = absl::StrCat(a.master_port);
  env["WORLD_SIZE"] = absl::StrCat(a.world_size);
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(local_world_size);
  env["NODE_RANK"] = absl::StrCat(node_rank);
  env["GROUP_RANK"] = absl::StrCat(node_rank);
  env["GROUP_WORLD_SIZE"] = absl::StrCat(a.num_nodes);
  env["ROLE_NAME"] = "default";  // torchrun's default --role
  env["ROLE_WORLD_SIZE"] = absl::StrCat(a.world_size);
  env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(a.attempt);
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(a.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = a.job_id;
  env["TORCHELASTIC_USE_AGENT_STORE"] = a.agent_store ? "True" : "False";
  // torchrun's defaults, which a job's env may override.
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  env["OMP_NUM_THREADS"] = OmpThreads(a.cpus_per_worker);
  // Lines reach `berth logs` as they are printed.
  env["PYTHONUNBUFFERED"] = "1";
  env["BERTH_JOB_ID"] = a.job_id;
  env["BERTH_PLACEMENT_GROUP_ID"] = a.placement_group_id;
  env["BERTH_BUNDLE_INDEX"] = absl::StrCat(bundle_index);
  env["BERTH_HEAD_ADDRESS"] = a.head_address;
  env["BERTH_NODE_ID"] = node_id;
  env["BERTH_ATTEMPT"] = absl::StrCat(a.attempt);
  env["BERTH_STORAGE_PATH"] = a.storage_path;
  env["BERTH_REPORT_FILE"] = a.report_file;
  env["BERTH_LATEST_CHECKPOINT"] = a.latest_checkpoint;
  return env;
}

const std::vector<std::string>& LauncherFlagNames(Launcher launcher) {
  static const std::vector<std::string> torchrun = {"--nnodes", "--node_rank", "--nproc_per_node",
                                                    "--master_addr", "--master_port"};
  static const std::vector<std::string> accelerate = {"--num_machines", "--machine_rank",
                                                      "--num_processes", "--main_process_ip",
                                                      "--main_process_port"};
  static const std::vector<std::string> none;
  switch (launcher) {
    case Launcher::kTorchrun:
      return torchrun;
    case Launcher::kAccelerate:
      return accelerate;
    default:
      return none;
  }
}

// Index in argv after which the launcher's flags go.
absl::StatusOr<size_t> FlagPosition(Launcher launcher, const std::vector<std::string>& argv,
                                    absl::string_view field) {
  if (argv.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": give the program to run"));
  // `python -m <module>`: the module's own arguments follow it.
  for (size_t i = 1; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-m") return i + 1;
  }
  if (launcher == Launcher::kAccelerate) {
    if (argv.size() < 2 || argv[1] != "launch") {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": the accelerate launcher runs `accelerate launch ...` (argv[1] is \"",
          argv.size() < 2 ? "" : argv[1], "\", not \"launch\")"));
    }
    return 1;
  }
  return 0;
}

}  // namespace

absl::Status ValidateLauncherArgv(Launcher launcher, const std::vector<std::string>& argv,
                                  absl::string_view field) {
  if (launcher == Launcher::kNone) return absl::OkStatus();
  absl::StatusOr<size_t> position = FlagPosition(launcher, argv, field);
  if (!position.ok()) return position.status();
  for (size_t i = *position + 1; i < argv.size(); ++i) {
    for (const std::string& flag : LauncherFlagNames(launcher)) {
      // Also the spellings with dashes (--node-rank) and "=value".
      std::string dashed = flag;
      std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      for (const std::string& name : {flag, dashed}) {
        if (argv[i] == name || absl::StartsWith(argv[i], name + "=")) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, "[", i, "]: ", name, " is filled in by berth from the placement (",
              absl::StrJoin(LauncherFlagNames(launcher), " "), ")"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> LauncherArgv(Launcher launcher,
                                                      const std::vector<std::string>& argv,
                                                      const NodeLaunch& node) {
  if (launcher == Launcher::kNone) return argv;
  if (absl::Status s = ValidateLauncherArgv(launcher, argv, "argv"); !s.ok()) return s;
  absl::StatusOr<size_t> position = FlagPosition(launcher, argv, "argv");
  if (!position.ok()) return position.status();
  const std::vector<std::string>& names = LauncherFlagNames(launcher);
  const std::vector<std::string> values = {
      absl::StrCat(node.num_nodes), absl::StrCat(node.node_rank),
      absl::StrCat(launcher == Launcher::kTorchrun ? node.nproc_per_node : node.world_size),
      node.master_addr, absl::StrCat(node.master_port)};
  std::vector<std::string> out(argv.begin(), argv.begin() + *position + 1);
  for (size_t i = 0; i < names.size(); ++i) out.push_back(absl::StrCat(names[i], "=", values[i]));
  out.insert(out.end(), argv.begin() + *position + 1, argv.end());
  return out;
}

std::map<std::string, std::string> RankEnv(const AttemptEnv& a, const RankedWorker& r) {
  std::map<std::string, std::string> env =
      CommonEnv(a, r.node_id, r.node_rank, r.local_world_size, r.bundle_index);
  if (!r.placement_group_id.empty()) env["BERTH_PLACEMENT_GROUP_ID"] = r.placement_group_id;
  env["RANK"] = absl::StrCat(r.world_rank);
  env["LOCAL_RANK"] = absl::StrCat(r.local_rank);
  if (r.world_rank < a.rank_cpus.size())
    env["OMP_NUM_THREADS"] = OmpThreads(a.rank_cpus[r.world_rank]);
  env["ROLE_RANK"] = absl::StrCat(r.world_rank);
  // Accelerate's PartialState takes a CPU rank for a single process unless
  // told (what `accelerate launch --cpu` tells it).
  if (r.gpu_ids.empty()) env["ACCELERATE_USE_CPU"] = "true";
  return env;
}

std::map<std::string, std::string> NodeEnv(const AttemptEnv& a, const std::string& node_id,
                                           uint32_t node_rank, uint32_t local_world_size,
                                           uint32_t first_bundle_index, bool has_gpus) {
  std::map<std::string, std::string> env =
      CommonEnv(a, node_id, node_rank, local_world_size, first_bundle_index);
  if (!has_gpus) env["ACCELERATE_USE_CPU"] = "true";
  return env;
}

bool IsPythonInterpreter(absl::string_view program) {
  const size_t slash = program.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? program : program.substr(slash + 1);
  if (!absl::ConsumePrefix(&name, "python")) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isdigit(c) || c == '.'; });
}

std::vector<std::string> StoreHostArgv(const std::string& python, uint16_t port,
                                       uint32_t world_size) {
  // Inline, so it needs nothing but the job's own torch. A TorchTrainer
  // job's (BERTH_TRAIN_ZYGOTE=1) runs as a fork of the node's warm Python
  // when it can (python/berth/train/_zygote.py), which imported torch once.
  static constexpr const char* kScript = R"py(import os, sys
BODY = r"""import datetime, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
port, world = int(sys.argv[1]), int(sys.argv[2])
try:
    import torch
    from torch.distributed import TCPStore
except ImportError as e:
    print(f"berth store host: no torch ({e}); no store", flush=True)
else:
    store = TCPStore("0.0.0.0", port, world, True, datetime.timedelta(days=365), wait_for_workers=False)
    print(f"berth store host: c10d TCPStore on port {port} for {world} ranks (torch {torch.__version__})", flush=True)
while True:  # until stopped; the raylet's keeper kills it with its raylet
    time.sleep(3600)
"""
if os.environ.get("BERTH_TRAIN_ZYGOTE") == "1":
    try:
        from berth.train._zygote import run_forked
    except ImportError:
        pass
    else:
        run_forked(["-c", BODY] + sys.argv[1:])
exec(BODY)
)py";
  return {python, "-c", kScript, absl::StrCat(port), absl::StrCat(world_size)};
}

const std::vector<std::string>& ReservedEnvNames() {
  static const std::vector<std::string> names = {"MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "NODE_RANK",
                                                 "GROUP_RANK",
                                                 "GROUP_WORLD_SIZE",
                                                 "ROLE_RANK",
                                                 "ROLE_NAME",
                                                 "ROLE_WORLD_SIZE",
                                                 "CUDA_VISIBLE_DEVICES",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "TORCHELASTIC_MAX_RESTARTS",
                                                 "TORCHELASTIC_RUN_ID",
                                                 "TORCHELASTIC_USE_AGENT_STORE",
                                                 "TORCHELASTIC_ERROR_FILE",
                                                 "BERTH_JOB_ID",
                                                 "BERTH_PLACEMENT_GROUP_ID",
                                                 "BERTH_BUNDLE_INDEX",
                                                 "BERTH_HEAD_ADDRESS",
                                                 "BERTH_NODE_ID",
                                                 "BERTH_ATTEMPT",
                                                 "BERTH_STORAGE_PATH",
                                                 "BERTH_REPORT_FILE",
                                                 "BERTH_LATEST_CHECKPOINT"};
  return names;
}

const std::vector<std::string>& DefaultedEnvNames() {
  static const std::vector<std::string> names = {"PATH", "OMP_NUM_THREADS",
                                                 "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                                 "PYTHONUNBUFFERED", "ACCELERATE_USE_CPU"};
  return names;
}

}  // namespace berth
