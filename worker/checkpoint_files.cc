#include "worker/checkpoint_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace berth {

std::string CheckpointPath(const std::string& dir, uint64_t step) {
  return absl::StrCat(dir, "/step-", step, ".pt");
}

absl::Status MakeDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("creating ", dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string why = std::strerror(errno);
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    return absl::UnavailableError(absl::StrCat(path, ": ", why));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("reading ", path));
  return bytes.str();
}

}  // namespace berth
