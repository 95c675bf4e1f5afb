// What every `berth` command shares: the global flags, exit codes, errors
// and output, the connection to the head, and how a command registers the
// action it runs once parsing succeeded.
//
// Each command group is one file of client/cmd/ that registers its own
// subcommands (Add*Commands below); berth_main.cc adds the global flags and
// calls them. A command's action runs with a connected HeadClient
// (OnChosen) or without one (OnChosenLocal). The head is --address, else
// $BERTH_ADDRESS, else the local cluster's (`berth up`), else
// 127.0.0.1:6380.
//
// Exit codes: 0 ok, 1 the head returned an error (stderr: `berth: CODE:
// message`), a followed job did not succeed or a local process failed, 2
// usage error (stderr names the flag).
#ifndef BERTH_CLIENT_CMD_COMMAND_H_
#define BERTH_CLIENT_CMD_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "auth/cluster_tls.h"
#include "google/protobuf/message.h"
#include "wire/head_client.h"

namespace berth {

constexpr int kExitOk = 0;
constexpr int kExitHeadError = 1;
constexpr int kExitUsage = 2;

// The global flags, as every action sees them.
struct Globals {
  std::string address;     // --address; empty = discover
  std::string token_file;  // --token-file; empty = discover
  TlsFiles tls;            // --tls-*-file; empty = discover
  double timeout_seconds = 10;
  bool json = false;
};

// What every action that talks to the head gets.
struct Context {
  HeadClient& client;
  const std::string& address;  // one head, or the active head and its standbys
  bool json;
  absl::Duration timeout;
  const HeadClientOptions& options;  // how `client` was made
};

// A chosen command, run once parsing succeeded.
using Action = std::function<int(const Globals&)>;

// The flags of a command that has none.
struct NoFlags {};

// Prints `berth: CODE: message`; returns kExitHeadError.
int HeadError(const absl::Status& status);
// Prints `berth: message`; returns kExitUsage.
int UsageError(const absl::Status& status);
int PrintJson(const google::protobuf::Message& message);

// `--wait [DURATION]` (command_words.h, WithWaitValues) on `cmd`, into
// `wait`: "" when not given. `what` says what it waits for.
void AddWaitFlag(CLI::App* cmd, std::string& wait, const std::string& what);
// How long `--wait`'s value waits at most: InfiniteDuration for a bare
// `--wait`; INVALID_ARGUMENT naming --wait for a bad duration.
absl::StatusOr<absl::Duration> WaitDuration(const std::string& wait);

// Prints a successful response as JSON or as `table(response)`.
template <typename Response, typename Table>
int Print(const Context& ctx, const absl::StatusOr<Response>& response, Table table) {
  if (!response.ok()) return HeadError(response.status());
  if (ctx.json) return PrintJson(*response);
  std::cout << table(*response);
  return kExitOk;
}

// This user's local cluster: its state directory ($BERTH_HOME or the
// default), its token (`berth up` and `berth start --head` write it) and
// its CA and certificates (auth/cluster_tls.h).
std::string StateDir();
std::string LocalTokenPath();
std::string LocalTlsDir();

// Token and TLS to the head: the flags, else $BERTH_TOKEN_FILE and
// $BERTH_TLS_*_FILE, else the local cluster's when it has them; none =
// no token, plaintext.
absl::StatusOr<HeadClientOptions> ResolveClientOptions(const std::string& token_file,
                                                       const TlsFiles& tls_files);

// Connects to the head the globals name and runs `run` with it.
int WithHead(const Globals& globals, const std::function<int(const Context&)>& run);

// Registers `cmd`'s action: `run(ctx, flags)` with the flags parsed and the
// head connected.
template <typename Flags>
void OnChosen(CLI::App* cmd, Action* action, std::shared_ptr<Flags> flags,
              int (*run)(const Context&, const Flags&)) {
  cmd->callback([=] {
    *action = [=](const Globals& globals) {
      return WithHead(globals, [&](const Context& ctx) { return run(ctx, *flags); });
    };
  });
}

// The same for commands that need no running head (up, down, start).
template <typename Flags>
void OnChosenLocal(CLI::App* cmd, Action* action, std::shared_ptr<Flags> flags,
                   int (*run)(const Globals&, const Flags&)) {
  cmd->callback([=] { *action = [=](const Globals& globals) { return run(globals, *flags); }; });
}

// The command groups, one file each.
void AddClusterCommands(CLI::App& app, Action* action);     // status
void AddNodeCommands(CLI::App& app, Action* action);        // nodes, drain, undrain, node ...
void AddPgCommands(CLI::App& app, Action* action);          // pg create|get|list|remove
void AddJobCommands(CLI::App& app, Action* action);         // job ..., submit, jobs, logs, stop
void AddLocalCommands(CLI::App& app, Action* action);       // up, down, start
void AddCredentialsCommand(CLI::App& app, Action* action);  // credentials
void AddQueueCommands(CLI::App& app, Action* action);       // queue ..., queues

}  // namespace berth

#endif  // BERTH_CLIENT_CMD_COMMAND_H_
