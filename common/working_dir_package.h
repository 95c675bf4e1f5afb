// WorkingDirPackage: a job's working directory as one archive (a gzip'd
// tar), named by the SHA-256 of its bytes, as Ray's runtime_env packs a
// working_dir. The CLI packs a folder (Pack), the head stores the bytes,
// each node's raylet checks them (DigestOf) and unpacks them (Unpack).
//
// Promises: Pack is deterministic for the same files (entries sorted by
// path, no owner names, mtimes kept, gzip without a timestamp), so packing
// an unchanged folder again gives the same digest and the head's copy is
// reused; it never follows a symlink out of the folder (a symlink is
// stored as a link). Unpack writes only below `dest`: an entry with an
// absolute path, "..", or a link leading out is refused (the whole unpack
// fails; the caller removes what was written). Errors name the path.
#ifndef BERTH_COMMON_WORKING_DIR_PACKAGE_H_
#define BERTH_COMMON_WORKING_DIR_PACKAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// What every pack leaves out, beside the caller's excludes: version control
// and Python's caches, and berth's own run files (.berth/).
inline const std::vector<std::string>& DefaultPackageExcludes() {
  static const std::vector<std::string> excludes = {".git", "__pycache__", ".berth"};
  return excludes;
}

// The head's default limit on a package's size (Ray's is 100 MiB too).
inline constexpr uint64_t kDefaultPackageLimitBytes = 100ull << 20;

struct PackedDir {
  std::string bytes;   // the archive
  std::string digest;  // "sha256:<64 lowercase hex digits>"
  uint64_t files = 0;  // regular files packed
};

// "sha256:<hex>" of `bytes`.
std::string DigestOf(absl::string_view bytes);
// OK when `digest` is "sha256:" and 64 lowercase hex digits; else
// INVALID_ARGUMENT naming `field`.
absl::Status CheckDigest(absl::string_view digest, absl::string_view field);

// Packs the folder `dir`. `excludes` are glob patterns (fnmatch): one
// without a "/" leaves out every file or folder of that name at any depth
// ("*.ckpt", "data"); one with a "/" is matched against the path relative
// to `dir` ("logs/*.txt"). FAILED_PRECONDITION when the archive would pass
// `limit_bytes`, naming the largest files; NOT_FOUND when `dir` is not a
// folder.
absl::StatusOr<PackedDir> Pack(const std::string& dir, const std::vector<std::string>& excludes,
                               uint64_t limit_bytes);

// Unpacks `archive` into the folder `dest` (created; must not exist yet or
// be empty).
absl::Status Unpack(absl::string_view archive, const std::string& dest);

}  // namespace berth

#endif  // BERTH_COMMON_WORKING_DIR_PACKAGE_H_
