// What berth-worker ranks and the trainer say to each other through the job's
// c10d::TCPStore: the keys (all under "berth/") and the format of each value.
// Pure string helpers, no torch, so both sides and the tests share one
// definition.
//
//   berth/resume/ready       "1" if berth/resume/{step,data} are set, else
//                            "0"; set once by whoever hosts the resume point
//                            (the trainer, or rank 0 when run by hand) before
//                            any rank reads the resume keys.
//   berth/resume/step        "<step>" the checkpoint was taken after.
//   berth/resume/data        checkpoint bytes (see train.h).
//   berth/progress           "<step> <loss>", set by rank 0 after every step.
//   berth/checkpoint/data    checkpoint bytes; set by rank 0 before ...
//   berth/checkpoint/step    "<step>", so a reader that sees a new step
//                            finds its data already there.
//   berth/done/<rank>        the rank's final parameter hash (16 hex digits).
//   berth/startup/<rank>     "<main_unix_us> <joined_unix_us>": when the
//                            rank's main() began and when it had joined the
//                            collective group; set once, after joining.
//   berth/group/<attempt>/   prefix of the collective group's own keys
//                            (Gloo rendezvous, backend choice, NCCL id).
#ifndef BERTH_WORKER_STORE_PROTOCOL_H_
#define BERTH_WORKER_STORE_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

inline constexpr char kResumeReadyKey[] = "berth/resume/ready";
inline constexpr char kResumeStepKey[] = "berth/resume/step";
inline constexpr char kResumeDataKey[] = "berth/resume/data";
inline constexpr char kProgressKey[] = "berth/progress";
inline constexpr char kCheckpointDataKey[] = "berth/checkpoint/data";
inline constexpr char kCheckpointStepKey[] = "berth/checkpoint/step";

std::string DoneKey(uint32_t rank);
std::string StartupKey(uint32_t rank);
std::string GroupKeyPrefix(uint32_t restart_count);

// Key/value pairs to set, in this order, to publish a write: the key readers
// watch comes last, so whoever sees it finds the rest already there.
using StoreWrites = std::vector<std::pair<std::string, std::string>>;
// The resume point: a checkpoint (its step and bytes) or none.
StoreWrites ResumePointWrites(const std::optional<std::string>& checkpoint, uint64_t step);
// A new checkpoint taken after `step`.
StoreWrites CheckpointWrites(uint64_t step, std::string checkpoint);

// TCPStore values are byte vectors.
std::vector<uint8_t> ToBytes(absl::string_view text);
std::string FromBytes(const std::vector<uint8_t>& bytes);

struct Progress {
  uint64_t step = 0;
  double loss = 0;
};
std::string FormatProgress(const Progress& progress);
// INVALID_ARGUMENT naming `key` unless `text` is "<step> <loss>".
absl::StatusOr<Progress> ParseProgress(absl::string_view text, absl::string_view key);
// INVALID_ARGUMENT naming `key` unless `text` is a non-negative integer.
absl::StatusOr<uint64_t> ParseStep(absl::string_view text, absl::string_view key);

// A rank's start-up times, Unix epoch microseconds on its clock.
struct RankStartup {
  int64_t main_unix_us = 0;
  int64_t joined_unix_us = 0;
};
std::string FormatRankStartup(const RankStartup& startup);
// INVALID_ARGUMENT naming `key` unless `text` is "<main_unix_us>
// <joined_unix_us>", two non-negative integers.
absl::StatusOr<RankStartup> ParseRankStartup(absl::string_view text, absl::string_view key);

// FNV-1a 64 over `data`, continuing from `hash` (start with kFnvOffsetBasis),
// so a sequence of buffers hashes like their concatenation.
inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
uint64_t Fnv1a64(const void* data, size_t size, uint64_t hash = kFnvOffsetBasis);
// 16 lower-case hex digits.
std::string HashToHex(uint64_t hash);

}  // namespace berth

#endif  // BERTH_WORKER_STORE_PROTOCOL_H_
