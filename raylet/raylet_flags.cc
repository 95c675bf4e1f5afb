#include "raylet/raylet_flags.h"

#include "common/files.h"

namespace berth {
namespace {

// berth's worker-side Python package for this binary: lib/berth/python of
// an install (bin/berth-raylet), else the build tree's python/ (the build
// copies it there); "" when neither has it.
std::string DefaultWorkerPythonPath() {
  return FindBesideBinary({"../lib/berth/python", "../python"}, "berth/train/__init__.py")
      .value_or("");
}

}  // namespace

void AddRayletFlags(CLI::App& app, Flags* flags) {
  flags->worker_pythonpath = DefaultWorkerPythonPath();
  app.add_option("--head", flags->head,
                 "head address, HOST:PORT, or the active head and its standbys, "
                 "HOST:PORT,HOST:PORT (the node follows whichever is active)")
      ->required();
  app.add_option("--listen", flags->listen, "address to serve RayletService on")
      ->capture_default_str();
  app.add_option("--advertise-host", flags->advertise_host,
                 "host the head and other nodes reach this node at")
      ->capture_default_str();
  app.add_option("--port-file", flags->port_file, "write the bound port here once serving");
  app.add_option("--node-id", flags->node_id, "node id (default: <hostname>-<port>)");
  app.add_option("--num-cpus", flags->num_cpus, "logical CPUs (default: hardware concurrency)");
  app.add_option("--memory", flags->memory,
                 "memory in bytes, e.g. 16Gi (default: physical memory)");
  app.add_option("--num-gpus", flags->num_gpus, "simulate this many GPUs instead of asking NVML");
  app.add_option("--accelerator-type", flags->accelerator_type,
                 "accelerator type of the GPUs, e.g. A10G (overrides NVML's)");
  app.add_option("--resources", flags->resources, "custom resources, name=qty,name=qty");
  app.add_option("--labels", flags->labels, "node labels, k=v,k=v");
  app.add_option("--state-dir", flags->state_dir,
                 "the node's folders: jobs' work folders, packages, logs "
                 "(default: /tmp/berth/<node-id>)");
  app.add_option("--log-dir", flags->log_dir, "worker logs (default: <state dir>/logs)");
  app.add_option("--gpu-health-file", flags->gpu_health_file,
                 "GPU faults from an external checker (DCGM, NHC): lines `<gpu index> <kind> "
                 "[<code>] [<detail>]` appended to this file, e.g. `2 xid 79`; an unhealthy GPU "
                 "gets no bundle until `berth node gpu-healthy`");
  app.add_option("--health-check-command", flags->health_check_command,
                 "run under /bin/sh at start and every --health-check-interval-s (Slurm's "
                 "HealthCheckProgram: NHC, dcgmi diag): a non-zero exit drains the node, its "
                 "output the reason");
  app.add_option("--health-check-interval-s", flags->health_check_interval_s,
                 "how often the health check runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--health-check-timeout-s", flags->health_check_timeout_s,
                 "a health check that runs longer fails")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cgroups", flags->cgroups,
                 "confine each worker to its bundle (memory, CPU, pids, GPU devices) with cgroups "
                 "of its own: auto (where the node's cgroups allow it; needs root) or off "
                 "(TorchTrainer's ranks then start warm, forked from one Python per job)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  app.add_option(
         "--worker-pids-max", flags->worker_pids_max,
         "with cgroups, the most tasks (processes and threads) a worker may have; 0 = no cap")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-retention-s", flags->log_retention_s,
                 "keep an ended job's worker logs this long on the node, then remove them")
      ->capture_default_str();
  AddTlsFlags(app, flags->tls, "berth-node");
  app.add_option(
      "--token-file", flags->token_file,
      "cluster token: required on every RPC to this raylet, sent on every call to the head");
  app.add_option("--node-pool", flags->node_pool,
                 "autoscaler node pool of this node (label berth.io/node-pool)");
  app.add_option("--metrics-listen", flags->metrics_listen,
                 "serve Prometheus /metrics on HOST:PORT (port 0 picks one); empty = off");
  app.add_option("--metrics-port-file", flags->metrics_port_file,
                 "write the bound metrics port here");
  app.add_option("--refuse-prepare-file", flags->refuse_prepare_file,
                 "test hook: refuse every prepare while this file exists");
  app.add_option("--hold-starts-file", flags->hold_starts_file,
                 "test hook: StartWorker waits while this file exists");
  app.add_option("--worker-pythonpath", flags->worker_pythonpath,
                 "folder of berth's worker-side Python package (berth.train), added to every "
                 "worker's PYTHONPATH (default: lib/berth/python of an install, or the build's "
                 "python/); empty = none");
  app.add_option("--hold-commits-file", flags->hold_commits_file,
                 "test hook: commits wait while this file exists (30 s at most)");
}

}  // namespace berth
