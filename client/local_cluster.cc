#include "client/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/processes.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultHeadAddress = "127.0.0.1:6380";

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "<file>:<line>: <key>: <what>", the line 1-based.
absl::Status SpecError(const std::string& file, const YAML::Node& node, const std::string& key,
                       const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ":", node.Mark().line + 1, ": ", key, ": ", what));
}

// A scalar as text; numbers stay as written ("8", "0.5").
absl::StatusOr<std::string> Scalar(const std::string& file, const YAML::Node& node,
                                   const std::string& key) {
  if (!node.IsScalar()) return SpecError(file, node, key, "must be a string or a number");
  return node.Scalar();
}

absl::StatusOr<int> Int(const std::string& file, const YAML::Node& node, const std::string& key,
                        int min) {
  int value = 0;
  if (!node.IsScalar() || !YAML::convert<int>::decode(node, value)) {
    return SpecError(file, node, key,
                     absl::StrCat("must be an integer, not \"", node.Scalar(), "\""));
  }
  if (value < min) return SpecError(file, node, key, absl::StrCat("must be >= ", min));
  return value;
}

absl::StatusOr<NodeSpec> ParseNode(const std::string& file, const YAML::Node& node,
                                   const std::string& at) {
  if (!node.IsMap()) return SpecError(file, node, at, "each node must be a map");
  NodeSpec spec;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const std::string path = absl::StrCat(at, ".", key);
    const YAML::Node& value = entry.second;
    absl::Status status;
    if (key == "name" || key == "accelerator_type" || key == "cpus" || key == "memory") {
      absl::StatusOr<std::string> text = Scalar(file, value, path);
      if (!text.ok()) return text.status();
      if (key == "name") spec.name = *text;
      if (key == "accelerator_type") spec.accelerator_type = *text;
      if (key == "cpus") spec.cpus = *text;
      if (key == "memory") spec.memory = *text;
    } else if (key == "gpus" || key == "count") {
      absl::StatusOr<int> n = Int(file, value, path, key == "count" ? 1 : 0);
      if (!n.ok()) return n.status();
      (key == "gpus" ? spec.gpus : spec.count) = *n;
    } else if (key == "labels") {
      if (!value.IsMap()) return SpecError(file, value, path, "must be a map of key: value");
      for (const auto& label : value) {
        absl::StatusOr<std::string> text =
            Scalar(file, label.second, absl::StrCat(path, ".", label.first.Scalar()));
        if (!text.ok()) return text.status();
        spec.labels[label.first.Scalar()] = *text;
      }
    } else {
      return SpecError(file, entry.first, path,
                       "unknown key (expected name, gpus, accelerator_type, cpus, memory, "
                       "labels, count)");
    }
  }
  if (spec.name.empty()) return SpecError(file, node, absl::StrCat(at, ".name"), "is required");
  return spec;
}

}  // namespace

absl::StatusOr<std::vector<NodeSpec>> ParseNodeSpecs(const std::string& text,
                                                     const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  if (!root.IsSequence() || root.size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": must be a non-empty list of nodes (- name: ..., gpus: ...)"));
  }
  std::vector<NodeSpec> specs;
  for (size_t i = 0; i < root.size(); ++i) {
    absl::StatusOr<NodeSpec> spec = ParseNode(name, root[i], absl::StrCat("[", i, "]"));
    if (!spec.ok()) return spec.status();
    specs.push_back(*std::move(spec));
  }
  std::set<std::string> ids;
  for (const auto& [id, spec] : ExpandNodes(specs)) {
    if (!ids.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": node id \"", id, "\" is used twice; names must be unique"));
    }
  }
  return specs;
}

absl::StatusOr<std::vector<NodeSpec>> LoadNodeSpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseNodeSpecs(*text, path);
}

std::vector<std::pair<std::string, NodeSpec>> ExpandNodes(const std::vector<NodeSpec>& specs) {
  std::vector<std::pair<std::string, NodeSpec>> nodes;
  for (const NodeSpec& spec : specs) {
    for (int i = 1; i <= spec.count; ++i) {
      nodes.emplace_back(spec.count == 1 ? spec.name : absl::StrCat(spec.name, "-", i), spec);
    }
  }
  return nodes;
}

std::vector<std::string> RayletFlags(const std::string& node_id, const NodeSpec& spec) {
  std::vector<std::string> flags = {"--node-id", node_id, "--num-gpus", absl::StrCat(spec.gpus)};
  if (!spec.accelerator_type.empty()) {
    flags.insert(flags.end(), {"--accelerator-type", spec.accelerator_type});
  }
  if (!spec.cpus.empty()) flags.insert(flags.end(), {"--num-cpus", spec.cpus});
  if (!spec.memory.empty()) flags.insert(flags.end(), {"--memory", spec.memory});
  if (!spec.labels.empty()) {
    flags.insert(flags.end(),
                 {"--labels", absl::StrJoin(spec.labels, ",", absl::PairFormatter("="))});
  }
  return flags;
}

absl::StatusOr<std::string> FindBinary(const std::string& binary, const std::string& build_subdir,
                                       const std::string& self_exe, const std::string& path_env) {
  const std::vector<std::string> beside = {binary, absl::StrCat("../", build_subdir, "/", binary)};
  if (!self_exe.empty()) {
    if (std::optional<std::string> found = FindBesideBinary(beside, "", self_exe)) return *found;
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    const fs::path candidate = fs::path(std::string(dir)) / binary;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) {
      return fs::absolute(candidate).lexically_normal().string();
    }
  }
  const fs::path self_dir = fs::path(self_exe).parent_path();
  return absl::NotFoundError(
      absl::StrCat("cannot find ", binary, "; tried ", (self_dir / beside[0]).string(), ", ",
                   (self_dir / beside[1]).lexically_normal().string(), " and $PATH"));
}

std::string LocalStateDir(const char* berth_home, uid_t uid) {
  const std::string home = berth_home != nullptr && *berth_home != '\0'
                               ? std::string(berth_home)
                               : absl::StrCat("/tmp/berth-", uid);
  return (fs::path(home) / "local").string();
}

std::string StateFilePath(const std::string& state_dir) {
  return (fs::path(state_dir) / "cluster.json").string();
}

std::string SerializeState(const LocalState& state) {
  nlohmann::json json = {{"head_address", state.head_address},
                         {"log_dir", state.log_dir},
                         {"processes", nlohmann::json::array()}};
  for (const LocalProcess& p : state.processes) {
    json["processes"].push_back({{"role", p.role},
                                 {"name", p.name},
                                 {"pid", p.pid},
                                 {"binary", p.binary},
                                 {"log", p.log},
                                 {"start_ticks", p.start_ticks}});
  }
  return json.dump(2) + "\n";
}

absl::StatusOr<LocalState> ParseState(const std::string& text, const std::string& name) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    LocalState state;
    state.head_address = json.at("head_address").get<std::string>();
    state.log_dir = json.at("log_dir").get<std::string>();
    for (const nlohmann::json& p : json.at("processes")) {
      state.processes.push_back({p.at("role").get<std::string>(), p.at("name").get<std::string>(),
                                 p.at("pid").get<pid_t>(), p.at("binary").get<std::string>(),
                                 p.at("log").get<std::string>(),
                                 p.value("start_ticks", uint64_t{0})});
    }
    return state;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a berth state file (", e.what(), "); remove it if stale"));
  }
}

absl::StatusOr<std::optional<LocalState>> ReadStateFile(const std::string& path) {
  if (!fs::exists(path)) return std::nullopt;
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<LocalState> state = ParseState(*text, path);
  if (!state.ok()) return state.status();
  return std::optional<LocalState>(*std::move(state));
}

absl::Status WriteStateFile(const std::string& path, const LocalState& state) {
  std::error_code error;
  fs::create_directories(fs::path(path).parent_path(), error);
  if (error) return absl::InternalError(absl::StrCat(path, ": ", error.message()));
  // A reader never sees half a file.
  const std::string temp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << SerializeState(state);
    if (!out.flush()) return absl::InternalError(absl::StrCat(temp, ": ", std::strerror(errno)));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string ResolveHeadAddress(const std::string& flag, const char* env,
                               const std::optional<LocalState>& state) {
  if (!flag.empty()) return flag;
  if (env != nullptr && *env != '\0') return env;
  if (state.has_value() && !state->head_address.empty()) return state->head_address;
  return kDefaultHeadAddress;
}

absl::StatusOr<pid_t> SpawnDaemon(const std::string& binary, const std::vector<std::string>& args,
                                  const std::string& log) {
  std::error_code error;
  fs::create_directories(fs::path(log).parent_path(), error);
  if (error) return absl::InternalError(absl::StrCat(log, ": ", error.message()));
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat(log, ": ", std::strerror(errno)));
  // The child writes exec's errno here; a successful exec closes it empty.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    setsid();  // survives the terminal and `berth` itself
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(binary.c_str(), argv.data());
    const int exec_errno = errno;
    (void)!write(report[1], &exec_errno, sizeof(exec_errno));
    _exit(127);
  }
  close(log_fd);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  int exec_errno = 0;
  const ssize_t n = read(report[0], &exec_errno, sizeof(exec_errno));
  close(report[0]);
  if (n == sizeof(exec_errno)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", binary, ": ", std::strerror(exec_errno)));
  }
  return pid;
}

bool IsRunning(const LocalProcess& process) {
  if (process.pid <= 0) return false;
  std::error_code error;
  std::string exe = fs::read_symlink(absl::StrCat("/proc/", process.pid, "/exe"), error).string();
  if (error) return false;  // gone, or a zombie
  // A rebuilt binary shows as deleted but is still ours.
  constexpr absl::string_view kDeleted = " (deleted)";
  if (absl::EndsWith(exe, kDeleted)) exe.resize(exe.size() - kDeleted.size());
  if (exe != process.binary) return false;
  return process.start_ticks == 0 || SameProcess(process.pid, process.start_ticks);
}

void StopProcesses(const std::vector<LocalProcess>& processes, absl::Duration grace) {
  // Signalled together, they shut down in parallel.
  auto signal_running = [&](int signal) {
    bool any = false;
    for (const LocalProcess& p : processes) {
      if (IsRunning(p)) any = kill(p.pid, signal) == 0 || any;
    }
    return any;
  };
  auto wait_gone = [&](absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    auto running = [&] {
      for (const LocalProcess& p : processes) {
        if (IsRunning(p)) return true;
      }
      return false;
    };
    while (running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    return !running();
  };
  if (!signal_running(SIGTERM) || wait_gone(grace)) return;
  signal_running(SIGKILL);
  wait_gone(absl::Seconds(5));
}

std::string LogTail(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace berth
