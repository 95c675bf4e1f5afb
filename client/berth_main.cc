// berth: the command-line client of a berth cluster.
//
//   berth [--address HOST:PORT] [--timeout SECONDS] [-o table|json] COMMAND
//
// Commands: up, down, start, credentials (local processes, no head needed;
// cmd/local.cc); submit, jobs, job [ID], logs, stop and job
// {submit,get,list,stop,watch} (train jobs, like `ray job` / sbatch /
// squeue; cmd/job.cc); nodes, drain, undrain (cmd/node.cc); status (cmd/cluster.cc);
// pg {create,get,list,remove} (cmd/pg.cc); queue {create,update,delete,get,
// list,cohort}, queues (cmd/queue.cc); completion (completion.h). What they share, exit codes
// included, is cmd/command.h; a new command group is one more file there
// and one more line below.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "auth/tls_flags.h"
#include "client/cmd/command.h"
#include "client/command_words.h"
#include "client/completion.h"
#include "common/version.h"

namespace berth {
namespace {

int Main(int argc, char** argv) {
  CLI::App app("berth: the client of a berth cluster (placement groups, train jobs, nodes, status)",
               "berth");
  AddVersionFlag(app, "berth");
  // Global flags are accepted after the command too: `berth pg list -o json`.
  app.fallthrough();
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return absl::StrCat("berth: ", e.what(), "\nRun with --help for more information.\n");
  });

  Globals globals;
  std::string output = "table";
  app.add_option("--address", globals.address,
                 "Head address host:port (default: $BERTH_ADDRESS, else the local cluster's, "
                 "else 127.0.0.1:6380)");
  AddTlsFlags(app, globals.tls, "berth-client; optional");
  app.add_option("--token-file", globals.token_file,
                 "Cluster token (default: $BERTH_TOKEN_FILE, else the local cluster's)");
  app.add_option("--timeout", globals.timeout_seconds, "Deadline of each call, seconds")
      ->check(CLI::Range(0.001, 24 * 3600.0))
      ->capture_default_str();
  app.add_option("-o,--output", output, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  Action action;
  AddCredentialsCommand(app, &action);
  AddLocalCommands(app, &action);
  AddNodeCommands(app, &action);
  AddClusterCommands(app, &action);
  AddPgCommands(app, &action);
  AddJobCommands(app, &action);
  AddQueueCommands(app, &action);
  std::string shell;
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script: `source <(berth completion bash)`");
  completion->add_option("SHELL", shell, "The shell (bash)")
      ->required()
      ->check(CLI::IsMember({"bash"}));
  completion->callback([&] {
    action = [&](const Globals&) {
      std::cout << BashCompletion(app);
      return kExitOk;
    };
  });

  std::vector<std::string> args = WithWaitValues(std::vector<std::string>(argv + 1, argv + argc));
  if (std::optional<std::string> unknown = UnknownCommand(app, args)) {
    std::cerr << "berth: " << *unknown << "\n";
    return kExitUsage;
  }
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == kExitOk ? kExitOk : kExitUsage;
  }

  globals.json = output == "json";
  return action(globals);
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) { return berth::Main(argc, argv); }
