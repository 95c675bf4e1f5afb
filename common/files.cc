#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      const std::string why = std::strerror(errno);
      std::remove(temporary.c_str());
      return absl::UnavailableError(absl::StrCat("writing ", temporary, ": ", why));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("renaming ", temporary, " to ", path, ": ", why));
  }
  return absl::OkStatus();
}

absl::Status WritePortFile(const std::string& path, int port) {
  absl::Status written = WriteFileAtomically(path, absl::StrCat(port, "\n"));
  if (written.ok()) return written;
  return absl::UnavailableError(absl::StrCat("--port-file: ", written.message()));
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot read"));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(flag, " ", path, ": readable by others (mode ",
                                                    absl::StrFormat("%o", st.st_mode & 0777),
                                                    "); chmod 600 it"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot read"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status WriteSecretFile(const std::string& path, const std::string& content) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(path, ": cannot write"));
  fchmod(fd, 0600);
  const bool written =
      write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  if (!written) return absl::UnavailableError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

std::optional<std::string> FindBesideBinary(const std::vector<std::string>& relative_paths,
                                            const std::string& marker,
                                            const std::string& self_exe) {
  std::error_code error;
  const std::filesystem::path self = self_exe.empty()
                                         ? std::filesystem::read_symlink("/proc/self/exe", error)
                                         : std::filesystem::path(self_exe);
  if (error) return std::nullopt;
  for (const std::string& relative : relative_paths) {
    const std::filesystem::path candidate =
        std::filesystem::absolute(self.parent_path() / relative, error).lexically_normal();
    if (std::filesystem::exists(marker.empty() ? candidate : candidate / marker, error)) {
      return candidate.string();
    }
  }
  return std::nullopt;
}

}  // namespace berth
