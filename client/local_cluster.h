// Local clusters: the pieces behind `berth up`, `berth start` and `berth
// down`, which run a berth-head and berth-raylets on this machine as
// background processes and remember them in a state directory.
//
// Promises: parsing, lookup and address resolution are pure functions of
// their arguments (no environment reads); the process functions only touch
// the processes and files they are given. Errors are values and name what
// the user wrote (the file and line of a node spec, the path of a state
// file).
#ifndef BERTH_CLIENT_LOCAL_CLUSTER_H_
#define BERTH_CLIENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth {

// --- Node specs --------------------------------------------------------------

// One kind of node of a local cluster, as in a node spec file:
//
//   - name: a10g            # node id; with count > 1: a10g-1, a10g-2, ...
//     gpus: 4               # simulated GPUs (0 = a CPU node)
//     accelerator_type: A10G
//     cpus: 8               # as berth-raylet --num-cpus takes it
//     memory: 256Gi         # as berth-raylet --memory takes it
//     labels: {zone: a}
//     count: 2
struct NodeSpec {
  std::string name;
  int gpus = 0;
  std::string accelerator_type;  // empty: none
  std::string cpus;              // empty: the raylet's default
  std::string memory;            // empty: the raylet's default
  std::map<std::string, std::string> labels;
  int count = 1;
};

// Parses a node spec file's YAML `text`; `name` stands for its path in
// errors ("<name>:<line>: [<index>].<key>: <what is wrong>"). Unknown keys,
// wrong types, a missing name, a count < 1, negative gpus and duplicate
// node ids are errors.
absl::StatusOr<std::vector<NodeSpec>> ParseNodeSpecs(const std::string& text,
                                                     const std::string& name);
// The same for a file; NOT_FOUND when it cannot be read.
absl::StatusOr<std::vector<NodeSpec>> LoadNodeSpecFile(const std::string& path);

// One raylet per node: the node ids of `specs` expanded by count, in order.
std::vector<std::pair<std::string, NodeSpec>> ExpandNodes(const std::vector<NodeSpec>& specs);

// The berth-raylet flags of node `node_id` of kind `spec` (without --head).
std::vector<std::string> RayletFlags(const std::string& node_id, const NodeSpec& spec);

// --- Binaries ------------------------------------------------------------------

// Where `binary` (e.g. "berth-head") is, for the `berth` at `self_exe`:
// beside it (an install: bin/berth, bin/berth-head), else in the build tree
// (<build>/client/berth, <build>/<build_subdir>/<binary>), else the first
// executable in the directories of `path_env` (like $PATH). NOT_FOUND names
// every place tried.
absl::StatusOr<std::string> FindBinary(const std::string& binary, const std::string& build_subdir,
                                       const std::string& self_exe, const std::string& path_env);

// --- State ---------------------------------------------------------------------

// A process this machine runs for the cluster.
struct LocalProcess {
  std::string role;  // "head", "raylet" or "etcd"
  std::string name;  // "head" or the node id
  pid_t pid = 0;
  std::string binary;  // absolute path; guards against a reused pid
  std::string log;     // its stdout and stderr
  // When it started (common/processes.h): with `binary`, tells it from a
  // later process given the same pid. 0 in state files older than it.
  uint64_t start_ticks = 0;
};

// What `berth up` and `berth start` leave behind for `berth down` and for
// the CLI's address discovery.
struct LocalState {
  std::string head_address;  // empty when only raylets run here
  std::string log_dir;
  std::vector<LocalProcess> processes;
};

// ${BERTH_HOME:-/tmp/berth-<uid>}/local, given $BERTH_HOME (may be null).
std::string LocalStateDir(const char* berth_home, uid_t uid);
// The state file inside a state dir.
std::string StateFilePath(const std::string& state_dir);

std::string SerializeState(const LocalState& state);
// INVALID_ARGUMENT naming `name` when `text` is not a state file.
absl::StatusOr<LocalState> ParseState(const std::string& text, const std::string& name);
// nullopt when there is no state file.
absl::StatusOr<std::optional<LocalState>> ReadStateFile(const std::string& path);
// Writes atomically (temp file + rename), creating the directory.
absl::Status WriteStateFile(const std::string& path, const LocalState& state);

// The head address the CLI uses: the --address flag, else $BERTH_ADDRESS,
// else the local cluster's head, else 127.0.0.1:6380. Empty means unset.
std::string ResolveHeadAddress(const std::string& flag, const char* env,
                               const std::optional<LocalState>& state);

// --- Processes -----------------------------------------------------------------

// Starts `binary args...` in the background in a session of its own, stdin
// from /dev/null, stdout and stderr appended to `log` (created with its
// directory). Fails, with the reason, when the program cannot be executed.
absl::StatusOr<pid_t> SpawnDaemon(const std::string& binary, const std::vector<std::string>& args,
                                  const std::string& log);

// Whether `process` still runs the program it was started as, and is the
// process that was started (not another given its pid since).
bool IsRunning(const LocalProcess& process);

// Stops `processes`: SIGTERM to all, then SIGKILL to those still running
// after `grace`. Returns once they are gone.
void StopProcesses(const std::vector<LocalProcess>& processes, absl::Duration grace);

// The last `max_lines` lines of a log file, for error messages.
std::string LogTail(const std::string& path, int max_lines);

}  // namespace berth

#endif  // BERTH_CLIENT_LOCAL_CLUSTER_H_
