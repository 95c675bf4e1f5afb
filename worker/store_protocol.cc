#include "worker/store_protocol.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace berth {

std::string DoneKey(uint32_t rank) { return absl::StrCat("berth/done/", rank); }

std::string StartupKey(uint32_t rank) { return absl::StrCat("berth/startup/", rank); }

std::string GroupKeyPrefix(uint32_t restart_count) {
  return absl::StrCat("berth/group/", restart_count, "/");
}

StoreWrites ResumePointWrites(const std::optional<std::string>& checkpoint, uint64_t step) {
  if (!checkpoint.has_value()) return {{kResumeReadyKey, "0"}};
  return {
      {kResumeStepKey, absl::StrCat(step)}, {kResumeDataKey, *checkpoint}, {kResumeReadyKey, "1"}};
}

StoreWrites CheckpointWrites(uint64_t step, std::string checkpoint) {
  return {{kCheckpointDataKey, std::move(checkpoint)}, {kCheckpointStepKey, absl::StrCat(step)}};
}

std::vector<uint8_t> ToBytes(absl::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string FromBytes(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string FormatProgress(const Progress& progress) {
  // %.9g round-trips a float loss exactly.
  return absl::StrFormat("%d %.9g", progress.step, progress.loss);
}

absl::StatusOr<uint64_t> ParseStep(absl::string_view text, absl::string_view key) {
  uint64_t step = 0;
  if (text.empty() || text[0] == '-' || text[0] == '+' || !absl::SimpleAtoi(text, &step)) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": \"", text, "\" is not a step number"));
  }
  return step;
}

absl::StatusOr<Progress> ParseProgress(absl::string_view text, absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  Progress progress;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &progress.loss)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": \"", text, "\" is not \"<step> <loss>\""));
  }
  absl::StatusOr<uint64_t> step = ParseStep(parts[0], key);
  if (!step.ok()) return step.status();
  progress.step = *step;
  return progress;
}

std::string FormatRankStartup(const RankStartup& startup) {
  return absl::StrCat(startup.main_unix_us, " ", startup.joined_unix_us);
}

absl::StatusOr<RankStartup> ParseRankStartup(absl::string_view text, absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  RankStartup startup;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &startup.main_unix_us) ||
      !absl::SimpleAtoi(parts[1], &startup.joined_unix_us) || startup.main_unix_us < 0 ||
      startup.joined_unix_us < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": \"", text, "\" is not \"<main_unix_us> <joined_unix_us>\""));
  }
  return startup;
}

uint64_t Fnv1a64(const void* data, size_t size, uint64_t hash) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kPrime;
  }
  return hash;
}

std::string HashToHex(uint64_t hash) { return absl::StrFormat("%016x", hash); }

}  // namespace berth
