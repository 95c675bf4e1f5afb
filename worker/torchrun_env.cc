#include "worker/torchrun_env.h"

#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

absl::Status Invalid(const char* name, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(name, "=\"", value, "\": ", why));
}

absl::StatusOr<std::string> Required(const EnvLookup& env, const char* name) {
  std::optional<std::string> value = env(name);
  if (!value.has_value() || value->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set (torchrun env contract)"));
  }
  return *value;
}

// An unsigned integer in [min, max]; nullopt if the variable is unset or empty.
absl::StatusOr<std::optional<uint64_t>> OptionalUint(const EnvLookup& env, const char* name,
                                                     uint64_t min, uint64_t max) {
  std::optional<std::string> text = env(name);
  if (!text.has_value() || text->empty()) return std::optional<uint64_t>();
  uint64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || absl::StartsWith(*text, "-") ||
      absl::StartsWith(*text, "+")) {
    return Invalid(name, *text, "not a non-negative integer");
  }
  if (value < min || value > max) {
    return Invalid(name, *text, absl::StrCat("must be in [", min, ", ", max, "]"));
  }
  return std::optional<uint64_t>(value);
}

absl::StatusOr<uint64_t> RequiredUint(const EnvLookup& env, const char* name, uint64_t min,
                                      uint64_t max) {
  absl::StatusOr<std::string> present = Required(env, name);
  if (!present.ok()) return present.status();
  absl::StatusOr<std::optional<uint64_t>> value = OptionalUint(env, name, min, max);
  if (!value.ok()) return value.status();
  return **value;
}

absl::StatusOr<bool> ParseAgentStoreFlag(const EnvLookup& env) {
  constexpr const char* kName = "TORCHELASTIC_USE_AGENT_STORE";
  const std::string text = absl::AsciiStrToLower(env(kName).value_or(""));
  if (text == "true" || text == "1") return true;
  if (text.empty() || text == "false" || text == "0") return false;
  return Invalid(kName, text, "must be True or False");
}

absl::StatusOr<std::optional<CrashHook>> ParseCrashHook(const EnvLookup& env) {
  absl::StatusOr<std::optional<uint64_t>> step =
      OptionalUint(env, "BERTH_TEST_CRASH_AT_STEP", 1, std::numeric_limits<uint32_t>::max());
  if (!step.ok()) return step.status();
  if (!step->has_value()) return std::optional<CrashHook>();
  absl::StatusOr<std::optional<uint64_t>> rank =
      OptionalUint(env, "BERTH_TEST_CRASH_RANK", 0, std::numeric_limits<uint32_t>::max());
  if (!rank.ok()) return rank.status();
  CrashHook hook;
  hook.step = **step;
  hook.rank = static_cast<uint32_t>(rank->value_or(1));
  hook.once_file = env("BERTH_TEST_CRASH_ONCE_FILE").value_or("");
  return std::optional<CrashHook>(hook);
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<TorchrunEnv> ParseTorchrunEnv(const EnvLookup& env) {
  constexpr uint64_t kMaxRanks = 1 << 20;
  TorchrunEnv out;
  absl::StatusOr<std::string> addr = Required(env, "MASTER_ADDR");
  if (!addr.ok()) return addr.status();
  out.master_addr = *addr;
  absl::StatusOr<uint64_t> port = RequiredUint(env, "MASTER_PORT", 1, 65535);
  if (!port.ok()) return port.status();
  out.master_port = static_cast<uint16_t>(*port);
  absl::StatusOr<uint64_t> world_size = RequiredUint(env, "WORLD_SIZE", 1, kMaxRanks);
  if (!world_size.ok()) return world_size.status();
  out.world_size = static_cast<uint32_t>(*world_size);
  absl::StatusOr<uint64_t> rank = RequiredUint(env, "RANK", 0, out.world_size - 1);
  if (!rank.ok()) return rank.status();
  out.rank = static_cast<uint32_t>(*rank);

  absl::StatusOr<std::optional<uint64_t>> local_world_size =
      OptionalUint(env, "LOCAL_WORLD_SIZE", 1, out.world_size);
  if (!local_world_size.ok()) return local_world_size.status();
  out.local_world_size = static_cast<uint32_t>(local_world_size->value_or(out.world_size));
  absl::StatusOr<std::optional<uint64_t>> local_rank =
      OptionalUint(env, "LOCAL_RANK", 0, out.local_world_size - 1);
  if (!local_rank.ok()) return local_rank.status();
  out.local_rank = static_cast<uint32_t>(local_rank->value_or(out.rank));
  if (out.local_rank >= out.local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_RANK is unset and defaults to RANK (", out.rank,
                     "), which is not below LOCAL_WORLD_SIZE (", out.local_world_size, ")"));
  }
  absl::StatusOr<std::optional<uint64_t>> node_rank =
      OptionalUint(env, "NODE_RANK", 0, out.world_size - 1);
  if (!node_rank.ok()) return node_rank.status();
  out.node_rank = static_cast<uint32_t>(node_rank->value_or(0));

  if (std::optional<std::string> devices = env("CUDA_VISIBLE_DEVICES"); devices.has_value()) {
    out.cuda_visible_devices = absl::StrSplit(*devices, ',', absl::SkipWhitespace());
  }
  absl::StatusOr<bool> agent_store = ParseAgentStoreFlag(env);
  if (!agent_store.ok()) return agent_store.status();
  out.use_agent_store = *agent_store;
  absl::StatusOr<std::optional<uint64_t>> restart_count =
      OptionalUint(env, "TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<uint32_t>::max());
  if (!restart_count.ok()) return restart_count.status();
  out.restart_count = static_cast<uint32_t>(restart_count->value_or(0));
  out.gloo_socket_ifname = env("GLOO_SOCKET_IFNAME").value_or("");
  absl::StatusOr<std::optional<CrashHook>> crash_hook = ParseCrashHook(env);
  if (!crash_hook.ok()) return crash_hook.status();
  out.crash_hook = *crash_hook;
  return out;
}

bool IsLoopbackHost(absl::string_view host) {
  return absl::EqualsIgnoreCase(host, "localhost") || absl::StartsWith(host, "127.") ||
         host == "::1" || host == "[::1]";
}

absl::StatusOr<int> LocalCudaDevice(const TorchrunEnv& env, int visible_device_count) {
  if (visible_device_count > static_cast<int>(env.local_rank)) {
    return static_cast<int>(env.local_rank);
  }
  if (visible_device_count == 1) return 0;
  return absl::FailedPreconditionError(absl::StrCat("LOCAL_RANK ", env.local_rank,
                                                    " has no GPU: ", visible_device_count,
                                                    " visible (CUDA_VISIBLE_DEVICES)"));
}

}  // namespace berth
