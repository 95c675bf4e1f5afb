#include "common/files.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace berth {

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) return absl::UnavailableError(absl::StrCat("--port-file: writing ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("--port-file: renaming to ", path));
  }
  return absl::OkStatus();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace berth
