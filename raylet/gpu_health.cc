#include "raylet/gpu_health.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth {
namespace {

// What the XIDs an operator meets most often mean (NVIDIA's XID catalog).
std::string XidName(int64_t xid) {
  static const std::map<int64_t, std::string> kNames = {
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping event"},
      {64, "ECC page retirement or row remapping failure"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
  };
  auto it = kNames.find(xid);
  return it == kNames.end() ? "" : it->second;
}

struct KindName {
  GpuFaultKind kind;
  absl::string_view name;
  bool has_code;
};
constexpr KindName kKinds[] = {
    {GpuFaultKind::kXid, "xid", true},
    {GpuFaultKind::kDoubleBitEcc, "ecc", false},
    {GpuFaultKind::kRowRemapFailed, "remap-failed", false},
    {GpuFaultKind::kRowRemapPending, "remap-pending", false},
    {GpuFaultKind::kFellOffBus, "off-bus", false},
    {GpuFaultKind::kNvlink, "nvlink", true},
    {GpuFaultKind::kRecovery, "recovery", false},
    {GpuFaultKind::kExternal, "external", false},
    {GpuFaultKind::kHealthy, "healthy", false},
};

}  // namespace

absl::string_view GpuFaultKindName(GpuFaultKind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "";
}

std::vector<absl::string_view> GpuFaultKindNames() {
  std::vector<absl::string_view> names;
  for (const KindName& k : kKinds) names.push_back(k.name);
  return names;
}

bool XidIsCritical(int64_t xid) {
  static const std::set<int64_t> kApplication = {13, 31, 43, 45, 68, 109};
  return kApplication.count(xid) == 0;
}

std::string FaultText(const GpuFault& fault) {
  const std::string detail = fault.detail.empty() ? "" : absl::StrCat(": ", fault.detail);
  switch (fault.kind) {
    case GpuFaultKind::kXid: {
      const std::string name = XidName(fault.code);
      return absl::StrCat("XID ", fault.code, name.empty() ? "" : absl::StrCat(", ", name),
                          name.empty() ? detail : "");
    }
    case GpuFaultKind::kDoubleBitEcc:
      return absl::StrCat("double-bit ECC error", detail);
    case GpuFaultKind::kRowRemapFailed:
      return absl::StrCat("row remapping failed", detail);
    case GpuFaultKind::kRowRemapPending:
      return absl::StrCat("row remapping pending (needs a GPU reset)", detail);
    case GpuFaultKind::kFellOffBus:
      return absl::StrCat("fallen off the bus", detail);
    case GpuFaultKind::kNvlink:
      return absl::StrCat("NVLink ", fault.code, " error", detail);
    case GpuFaultKind::kRecovery:
      return absl::StrCat("the driver asks for recovery", detail);
    case GpuFaultKind::kExternal:
      return absl::StrCat("health check failed", detail);
    case GpuFaultKind::kHealthy:
      return absl::StrCat("healthy", detail);
  }
  return "";
}

absl::StatusOr<GpuFault> ParseHealthLine(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  std::vector<absl::string_view> words =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  if (words.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", line, "': expected <gpu index> <kind> [<code>] [<detail>]"));
  }
  GpuFault fault;
  if (!absl::SimpleAtoi(words[0], &fault.gpu_index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", line, "': gpu index '", words[0], "' is not a number"));
  }
  const KindName* kind = nullptr;
  for (const KindName& k : kKinds) {
    if (absl::AsciiStrToLower(words[1]) == k.name) kind = &k;
  }
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", line, "': unknown kind '", words[1],
        "' (xid, ecc, remap-failed, remap-pending, off-bus, nvlink, recovery, external, healthy)"));
  }
  fault.kind = kind->kind;
  size_t next = 2;
  if (kind->has_code) {
    if (words.size() < 3 || !absl::SimpleAtoi(words[2], &fault.code)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", line, "': ", kind->name, " needs its number"));
    }
    next = 3;
  }
  std::vector<absl::string_view> rest(words.begin() + std::min(next, words.size()), words.end());
  fault.detail = absl::StrJoin(rest, " ");
  return fault;
}

std::optional<std::string> GpuHealthBook::OnFault(const GpuFault& fault, int64_t now_ms) {
  if (fault.gpu_index >= gpu_count_ || unhealthy_.count(fault.gpu_index) > 0) return std::nullopt;
  if (fault.kind == GpuFaultKind::kHealthy) return std::nullopt;
  if (fault.kind == GpuFaultKind::kXid && !XidIsCritical(fault.code)) return std::nullopt;
  v1::UnhealthyGpu& gpu = unhealthy_[fault.gpu_index];
  gpu.set_index(fault.gpu_index);
  gpu.set_reason(FaultText(fault));
  gpu.set_since_unix_ms(now_ms);
  return gpu.reason();
}

absl::StatusOr<std::string> GpuHealthBook::Return(uint32_t gpu_index) {
  if (gpu_index >= gpu_count_) {
    return absl::NotFoundError(
        absl::StrCat("gpu_index: the node has ", gpu_count_, " GPU(s); no GPU ", gpu_index));
  }
  auto it = unhealthy_.find(gpu_index);
  if (it == unhealthy_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("gpu_index: GPU ", gpu_index, " is healthy"));
  }
  std::string reason = it->second.reason();
  unhealthy_.erase(it);
  return reason;
}

void GpuHealthBook::Restore(const std::vector<v1::UnhealthyGpu>& unhealthy) {
  for (const v1::UnhealthyGpu& gpu : unhealthy) {
    if (gpu.index() < gpu_count_) unhealthy_[gpu.index()] = gpu;
  }
}

}  // namespace berth
