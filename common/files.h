// Small file helpers the daemons and tests share.
#ifndef BERTH_COMMON_FILES_H_
#define BERTH_COMMON_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace berth {

// Writes "<port>\n" to `path` through a rename, so a reader polling the file
// never sees a partial number. Errors name the --port-file flag.
absl::Status WritePortFile(const std::string& path, int port);

// The whole content of `path`, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace berth

#endif  // BERTH_COMMON_FILES_H_
