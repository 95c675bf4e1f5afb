// Small file helpers the daemons and tests share.
#ifndef BERTH_COMMON_FILES_H_
#define BERTH_COMMON_FILES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace berth {

// Writes `bytes` to `path` through a temporary file in the same directory and
// a rename: a reader sees the old content or the new, never a part; on error
// no file (temporary or partial) is left behind. Errors name the files.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Writes "<port>\n" to `path` through a rename, so a reader polling the file
// never sees a partial number. Errors name the --port-file flag.
absl::Status WritePortFile(const std::string& path, int port);

// The whole content of `path`, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// The content of a secret (a token, a private key): refused when the file
// is readable or writable by group or others. Errors name `flag`.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag);
// Writes `content` to `path` created with mode 0600 (also when it existed).
absl::Status WriteSecretFile(const std::string& path, const std::string& content);

// Where a file that ships with berth is, for the binary `self_exe` (empty:
// this process's, /proc/self/exe): the first of `relative_paths`, taken
// from that binary's folder, that exists and, when `marker` is set, has
// `marker` inside it, e.g. {"berth-relay", "../worker/berth-relay"} (an
// install, then the build tree); an absolute, normal path; nullopt when
// none is there.
std::optional<std::string> FindBesideBinary(const std::vector<std::string>& relative_paths,
                                            const std::string& marker = "",
                                            const std::string& self_exe = "");

}  // namespace berth

#endif  // BERTH_COMMON_FILES_H_
