#include "autoscaler/node_pool_config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "placement/label_selector.h"
#include "placement/quantity.h"
#include "yaml-cpp/yaml.h"

namespace berth {
namespace {

class ConfigParser {
 public:
  explicit ConfigParser(std::string file) : file_(std::move(file)) {}

  absl::StatusOr<AutoscalerConfig> Parse(const YAML::Node& root) {
    AutoscalerConfig config;
    if (!root.IsMap()) return Error(root, "config", "expected a map with provider and pools");
    if (auto s = Keys(root, "config", {"provider", "pools"}); !s.ok()) return s;
    const YAML::Node provider = root["provider"];
    if (!provider) return Error(root, "provider", "required");
    if (auto s = ParseProvider(provider, &config.provider); !s.ok()) return s;
    const YAML::Node pools = root["pools"];
    if (!pools || !pools.IsSequence() || pools.size() == 0) {
      return Error(pools ? pools : root, "pools", "expected a non-empty list of pools");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < pools.size(); ++i) {
      const std::string path = absl::StrCat("pools[", i, "]");
      absl::StatusOr<NodePool> pool = ParsePool(pools[i], path);
      if (!pool.ok()) return pool.status();
      if (!names.insert(pool->name).second) {
        return Error(pools[i]["name"], path + ".name",
                     absl::StrCat("\"", pool->name, "\" is used twice"));
      }
      if (config.provider.type == "kubernetes" && pool->deployment.empty()) {
        return Error(pools[i], path + ".deployment", "required with the kubernetes provider");
      }
      config.pools.push_back(*std::move(pool));
    }
    return config;
  }

 private:
  absl::Status Error(const YAML::Node& node, absl::string_view path, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ":", std::max(node.Mark().line, 0) + 1, ": ", path, ": ", what));
  }

  absl::Status Keys(const YAML::Node& map, const std::string& path,
                    const std::set<std::string>& allowed) const {
    for (const auto& entry : map) {
      const std::string key = entry.first.as<std::string>("");
      if (!allowed.count(key))
        return Error(entry.first, path, absl::StrCat("unknown key \"", key, "\""));
      if (!entry.second || entry.second.IsNull())
        return Error(entry.first, path + "." + key, "has no value");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) return Error(node, path, "expected a string");
    return node.Scalar();
  }

  absl::StatusOr<int64_t> Count(const YAML::Node& node, const std::string& path,
                                int64_t max) const {
    if (!node.IsScalar()) return Error(node, path, "expected a whole number");
    int64_t value = 0;
    try {
      value = node.as<int64_t>();
    } catch (const YAML::Exception&) {
      return Error(node, path,
                   absl::StrCat("expected a whole number, got \"", node.Scalar(), "\""));
    }
    if (value < 0 || value > max) return Error(node, path, absl::StrCat("must be 0..", max));
    return value;
  }

  absl::Status ParseProvider(const YAML::Node& node, ProviderConfig* out) const {
    if (!node.IsMap()) return Error(node, "provider", "expected a map");
    if (auto s = Keys(node, "provider",
                      {"type", "command", "namespace", "api_server", "token_file", "ca_file"});
        !s.ok()) {
      return s;
    }
    if (!node["type"]) return Error(node, "provider.type", "required: command or kubernetes");
    absl::StatusOr<std::string> type = String(node["type"], "provider.type");
    if (!type.ok()) return type.status();
    if (*type != "command" && *type != "kubernetes") {
      return Error(node["type"], "provider.type",
                   absl::StrCat("\"", *type, "\": want command or kubernetes"));
    }
    out->type = *type;
    if (const YAML::Node command = node["command"]) {
      if (!command.IsSequence() || command.size() == 0) {
        return Error(command, "provider.command", "expected a non-empty list (argv)");
      }
      for (size_t i = 0; i < command.size(); ++i) {
        absl::StatusOr<std::string> arg =
            String(command[i], absl::StrCat("provider.command[", i, "]"));
        if (!arg.ok()) return arg.status();
        out->command.push_back(*arg);
      }
    }
    if (out->type == "command" && out->command.empty()) {
      return Error(node, "provider.command", "required with the command provider");
    }
    for (auto [key, field] :
         {std::pair{"namespace", &out->ns}, std::pair{"api_server", &out->api_server},
          std::pair{"token_file", &out->token_file}, std::pair{"ca_file", &out->ca_file}}) {
      if (auto s = OptionalString(node, key, absl::StrCat("provider.", key), field); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Sets `*out` from map[key] if it is there (`path` names the field).
  absl::Status OptionalString(const YAML::Node& map, const char* key, const std::string& path,
                              std::string* out) const {
    if (!map[key]) return absl::OkStatus();
    absl::StatusOr<std::string> value = String(map[key], path);
    if (!value.ok()) return value.status();
    *out = *value;
    return absl::OkStatus();
  }

  absl::StatusOr<NodePool> ParsePool(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap()) return Error(node, path, "expected a map");
    if (auto s =
            Keys(node, path,
                 {"name", "accelerator_type", "gpus", "cpus", "memory", "resources", "labels",
                  "min_nodes", "max_nodes", "idle_timeout_s", "launch_timeout_s", "deployment"});
        !s.ok()) {
      return s;
    }
    NodePool pool;
    for (auto parse_fields : {&ConfigParser::ParsePoolName, &ConfigParser::ParseAccelerator,
                              &ConfigParser::ParseCpusAndMemory,
                              &ConfigParser::ParseCustomResources, &ConfigParser::ParseLabels,
                              &ConfigParser::ParseNodeCounts, &ConfigParser::ParseTimeouts}) {
      if (absl::Status s = (this->*parse_fields)(node, path, &pool); !s.ok()) return s;
    }
    if (auto s = OptionalString(node, "deployment", path + ".deployment", &pool.deployment);
        !s.ok()) {
      return s;
    }
    return pool;
  }

  absl::Status ParsePoolName(const YAML::Node& node, const std::string& path,
                             NodePool* pool) const {
    if (!node["name"]) return Error(node, path + ".name", "required");
    absl::StatusOr<std::string> name = String(node["name"], path + ".name");
    if (!name.ok()) return name.status();
    if (auto s = ValidateLabelValue(*name, path + ".name"); !s.ok() || name->empty()) {
      return Error(node["name"], path + ".name",
                   "must be a non-empty label value ([A-Za-z0-9_.-], 63 chars)");
    }
    pool->name = *name;
    return absl::OkStatus();
  }

  // accelerator_type and gpus: both or neither.
  absl::Status ParseAccelerator(const YAML::Node& node, const std::string& path,
                                NodePool* pool) const {
    if (node["accelerator_type"]) {
      absl::StatusOr<std::string> type =
          String(node["accelerator_type"], path + ".accelerator_type");
      if (!type.ok()) return type.status();
      if (auto s = ValidateLabelValue(*type, path + ".accelerator_type"); !s.ok()) {
        return Error(node["accelerator_type"], path + ".accelerator_type", s.message());
      }
      pool->accelerator_type = *type;
    }
    if (node["gpus"]) {
      absl::StatusOr<int64_t> gpus = Count(node["gpus"], path + ".gpus", 1024);
      if (!gpus.ok()) return gpus.status();
      pool->gpus = static_cast<uint32_t>(*gpus);
    }
    if (pool->gpus > 0 && pool->accelerator_type.empty()) {
      return Error(node, path + ".accelerator_type", "required when gpus > 0");
    }
    if (pool->gpus == 0 && !pool->accelerator_type.empty()) {
      return Error(node["accelerator_type"], path + ".gpus", "an accelerator_type needs gpus > 0");
    }
    if (pool->gpus > 0) pool->resources.Set(kGpu, Quantity::Whole(pool->gpus));
    return absl::OkStatus();
  }

  absl::Status ParseCpusAndMemory(const YAML::Node& node, const std::string& path,
                                  NodePool* pool) const {
    for (auto [key, resource] : {std::pair{"cpus", kCpu}, std::pair{"memory", kMemory}}) {
      const std::string field = absl::StrCat(path, ".", key);
      if (!node[key]) return Error(node, field, "required");
      absl::StatusOr<std::string> text = String(node[key], field);
      if (!text.ok()) return text.status();
      absl::StatusOr<Quantity> amount = Quantity::Parse(*text, field);
      if (!amount.ok()) return Error(node[key], field, amount.status().message());
      pool->resources.Set(resource, *amount);
    }
    return absl::OkStatus();
  }

  absl::Status ParseCustomResources(const YAML::Node& node, const std::string& path,
                                    NodePool* pool) const {
    const YAML::Node resources = node["resources"];
    if (!resources) return absl::OkStatus();
    if (!resources.IsMap())
      return Error(resources, path + ".resources", "expected a map name: amount");
    for (const auto& entry : resources) {
      const std::string key = entry.first.as<std::string>("");
      const std::string field = absl::StrCat(path, ".resources[\"", key, "\"]");
      if (auto s = ValidateResourceName(key, field); !s.ok())
        return Error(entry.first, field, s.message());
      if (key == kGpu || key == kCpu || key == kMemory) {
        return Error(entry.first, field, "set gpus, cpus and memory with their own keys");
      }
      absl::StatusOr<Quantity> amount = Quantity::Parse(entry.second.as<std::string>(""), field);
      if (!amount.ok()) return Error(entry.second, field, amount.status().message());
      pool->resources.Set(key, *amount);
    }
    return absl::OkStatus();
  }

  absl::Status ParseLabels(const YAML::Node& node, const std::string& path, NodePool* pool) const {
    const YAML::Node labels = node["labels"];
    if (!labels) return absl::OkStatus();
    if (!labels.IsMap()) return Error(labels, path + ".labels", "expected a map key: value");
    for (const auto& entry : labels) {
      const std::string key = entry.first.as<std::string>("");
      const std::string value = entry.second.as<std::string>("");
      const std::string field = absl::StrCat(path, ".labels[\"", key, "\"]");
      if (auto s = ValidateLabelKey(key, field); !s.ok())
        return Error(entry.first, field, s.message());
      if (auto s = ValidateLabelValue(value, field); !s.ok())
        return Error(entry.second, field, s.message());
      if (!NodeMaySetLabel(key) || key == kNodePoolLabel)
        return Error(entry.first, field,
                     "berth.io/ labels are set by berth (the topology keys excepted)");
      pool->labels[key] = value;
    }
    return absl::OkStatus();
  }

  absl::Status ParseNodeCounts(const YAML::Node& node, const std::string& path,
                               NodePool* pool) const {
    absl::StatusOr<int64_t> min_nodes =
        node["min_nodes"] ? Count(node["min_nodes"], path + ".min_nodes", 10000) : 0;
    if (!min_nodes.ok()) return min_nodes.status();
    if (!node["max_nodes"]) return Error(node, path + ".max_nodes", "required");
    absl::StatusOr<int64_t> max_nodes = Count(node["max_nodes"], path + ".max_nodes", 10000);
    if (!max_nodes.ok()) return max_nodes.status();
    if (*min_nodes > *max_nodes)
      return Error(node["min_nodes"], path + ".min_nodes", "must be <= max_nodes");
    pool->min_nodes = static_cast<uint32_t>(*min_nodes);
    pool->max_nodes = static_cast<uint32_t>(*max_nodes);
    return absl::OkStatus();
  }

  absl::Status ParseTimeouts(const YAML::Node& node, const std::string& path,
                             NodePool* pool) const {
    for (auto [key, field] : {std::pair{"idle_timeout_s", &pool->idle_timeout_ms},
                              std::pair{"launch_timeout_s", &pool->launch_timeout_ms}}) {
      if (!node[key]) continue;
      absl::StatusOr<int64_t> seconds = Count(node[key], absl::StrCat(path, ".", key), 30 * 86400);
      if (!seconds.ok()) return seconds.status();
      *field = *seconds * 1000;
    }
    return absl::OkStatus();
  }

  std::string file_;
};

}  // namespace

absl::StatusOr<AutoscalerConfig> ParseAutoscalerConfig(const std::string& text,
                                                       const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", e.mark.line + 1, ": ", e.msg));
  }
  return ConfigParser(name).Parse(root);
}

absl::StatusOr<AutoscalerConfig> LoadAutoscalerConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseAutoscalerConfig(text.str(), path);
}

}  // namespace berth
