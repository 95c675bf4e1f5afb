// The berth-raylet command line: its flags, and where they go.
#ifndef BERTH_RAYLET_RAYLET_FLAGS_H_
#define BERTH_RAYLET_RAYLET_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "auth/tls_flags.h"

namespace berth {

struct Flags {
  std::string head;
  std::string listen = "127.0.0.1:0";
  std::string advertise_host = "127.0.0.1";
  std::string port_file;
  std::string node_id;
  std::string num_cpus;
  std::string memory;
  std::optional<uint32_t> num_gpus;
  std::string accelerator_type;
  std::string resources;
  std::string labels;
  std::string log_dir;
  std::string state_dir;
  std::string gpu_health_file;
  std::string health_check_command;
  int64_t health_check_interval_s = 60;
  int64_t health_check_timeout_s = 60;
  int64_t log_retention_s = 7 * 24 * 3600;
  std::string refuse_prepare_file;
  std::string hold_starts_file;
  std::string hold_commits_file;
  std::string worker_pythonpath;  // AddRayletFlags sets the default
  std::string cgroups = "off";    // auto | off
  int64_t worker_pids_max = 16384;
  std::string node_pool;
  std::string token_file;
  TlsFiles tls;
  std::string metrics_listen;
  std::string metrics_port_file;
};

// Adds every flag of berth-raylet (but --log and --version) to `app`,
// writing to `flags`.
void AddRayletFlags(CLI::App& app, Flags* flags);

}  // namespace berth

#endif  // BERTH_RAYLET_RAYLET_FLAGS_H_
