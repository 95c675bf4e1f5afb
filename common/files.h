// Small file helpers the daemons and tests share.
#ifndef BERTH_COMMON_FILES_H_
#define BERTH_COMMON_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace berth {

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

}  // namespace berth

#endif  // BERTH_COMMON_FILES_H_
