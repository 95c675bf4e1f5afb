#include "common/working_dir_package.h"

#include <archive.h>
#include <archive_entry.h>
#include <fnmatch.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kDigestPrefix = "sha256:";

struct WriterDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct ReaderDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using Writer = std::unique_ptr<struct archive, WriterDeleter>;
using Reader = std::unique_ptr<struct archive, ReaderDeleter>;
using Entry = std::unique_ptr<archive_entry, EntryDeleter>;

bool Excluded(const fs::path& relative, const std::vector<std::string>& patterns) {
  const std::string path = relative.generic_string();
  const std::string name = relative.filename().string();
  for (const std::string& pattern : patterns) {
    const bool whole_path = absl::StrContains(pattern, '/');
    if (fnmatch(pattern.c_str(), (whole_path ? path : name).c_str(),
                whole_path ? FNM_PATHNAME : 0) == 0) {
      return true;
    }
  }
  return false;
}

// The archive's bytes, refused past the limit (the pack stops there).
struct Output {
  std::string bytes;
  uint64_t limit = 0;
  bool over = false;
};

la_ssize_t WriteOut(struct archive*, void* data, const void* buffer, size_t length) {
  auto* out = static_cast<Output*>(data);
  if (out->bytes.size() + length > out->limit) {
    out->over = true;
    return -1;
  }
  out->bytes.append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

absl::Status ArchiveError(struct archive* a, absl::string_view what) {
  const char* message = archive_error_string(a);
  return absl::InternalError(absl::StrCat(what, ": ", message != nullptr ? message : "failed"));
}

absl::Status AddFile(struct archive* a, const fs::path& file, std::string* buffer) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat("cannot read ", file.string()));
  buffer->resize(1 << 20);
  while (in) {
    in.read(buffer->data(), static_cast<std::streamsize>(buffer->size()));
    const std::streamsize got = in.gcount();
    if (got > 0 && archive_write_data(a, buffer->data(), static_cast<size_t>(got)) != got) {
      return ArchiveError(a, absl::StrCat("packing ", file.string()));
    }
  }
  return absl::OkStatus();
}

std::string LargestFiles(std::vector<std::pair<uint64_t, std::string>> sizes) {
  std::sort(sizes.rbegin(), sizes.rend());
  if (sizes.size() > 3) sizes.resize(3);
  std::vector<std::string> named;
  for (const auto& [size, path] : sizes) named.push_back(absl::StrCat(path, " (", size, " bytes)"));
  return absl::StrJoin(named, ", ");
}

// A relative path that stays below the folder it is unpacked in.
bool StaysInside(absl::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return false;
  }
  return true;
}

// A symlink at `path` whose target is inside the folder too.
bool LinkStaysInside(absl::string_view path, absl::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  int depth = 0;
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  depth = static_cast<int>(parts.size()) - 1;  // the link's folder
  for (absl::string_view part : absl::StrSplit(target, '/', absl::SkipEmpty())) {
    if (part == "..") {
      if (--depth < 0) return false;
    } else if (part != ".") {
      ++depth;
    }
  }
  return true;
}

// The paths below `dir` to pack, relative to it, sorted, without the
// excluded ones (nor anything below an excluded folder).
absl::StatusOr<std::vector<fs::path>> ListEntries(const std::string& dir,
                                                  const std::vector<std::string>& excludes) {
  std::error_code error;
  std::vector<std::string> patterns = DefaultPackageExcludes();
  patterns.insert(patterns.end(), excludes.begin(), excludes.end());
  std::vector<fs::path> entries;
  fs::recursive_directory_iterator it(dir, error), end;
  for (; !error && it != end; it.increment(error)) {
    // Lexically: fs::relative resolves symlinks, naming a link by its target.
    const fs::path relative = it->path().lexically_relative(dir);
    if (Excluded(relative, patterns)) {
      it.disable_recursion_pending();
      continue;
    }
    entries.push_back(relative);
  }
  if (error)
    return absl::PermissionDeniedError(absl::StrCat("listing ", dir, ": ", error.message()));
  std::sort(entries.begin(), entries.end());
  return entries;
}

}  // namespace

std::string DigestOf(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string hex(kDigestPrefix);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : digest) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

absl::Status CheckDigest(absl::string_view digest, absl::string_view field) {
  const bool ok = absl::StartsWith(digest, kDigestPrefix) &&
                  digest.size() == kDigestPrefix.size() + 2 * SHA256_DIGEST_LENGTH &&
                  std::all_of(digest.begin() + kDigestPrefix.size(), digest.end(), [](char c) {
                    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", digest.substr(0, 80),
                                                 "' is not sha256:<64 lowercase hex digits>"));
}

absl::StatusOr<PackedDir> Pack(const std::string& dir, const std::vector<std::string>& excludes,
                               uint64_t limit_bytes) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a folder"));
  }
  absl::StatusOr<std::vector<fs::path>> listed = ListEntries(dir, excludes);
  if (!listed.ok()) return listed.status();
  const std::vector<fs::path>& entries = *listed;

  Output out;
  out.limit = limit_bytes;
  Writer writer(archive_write_new());
  struct archive* a = writer.get();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  archive_write_set_filter_option(a, "gzip", "timestamp", nullptr);  // none: the same bytes again
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open(a, &out, nullptr, WriteOut, nullptr) != ARCHIVE_OK) {
    return ArchiveError(a, "starting the archive");
  }
  PackedDir packed;
  std::vector<std::pair<uint64_t, std::string>> sizes;
  std::string buffer;
  for (const fs::path& relative : entries) {
    const fs::path full = fs::path(dir) / relative;
    struct stat st;
    if (lstat(full.c_str(), &st) != 0) continue;  // gone meanwhile
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    Entry entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), relative.generic_string().c_str());
    archive_entry_set_mode(entry.get(), st.st_mode);
    archive_entry_set_mtime(entry.get(), st.st_mtime, 0);
    if (S_ISREG(st.st_mode)) archive_entry_set_size(entry.get(), st.st_size);
    if (S_ISLNK(st.st_mode)) {
      archive_entry_set_symlink(entry.get(), fs::read_symlink(full, error).c_str());
    }
    bool written = archive_write_header(a, entry.get()) == ARCHIVE_OK;
    if (written && S_ISREG(st.st_mode)) {
      sizes.emplace_back(st.st_size, relative.generic_string());
      ++packed.files;
      if (absl::Status s = AddFile(a, full, &buffer); !s.ok() && !out.over) return s;
      written = !out.over;
    }
    if (!written && !out.over) return ArchiveError(a, absl::StrCat("packing ", full.string()));
    if (out.over) break;
  }
  if (!out.over && archive_write_close(a) != ARCHIVE_OK && !out.over) {
    return ArchiveError(a, "finishing the archive");
  }
  if (out.over) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " packs to more than ", limit_bytes, " bytes (the limit); the largest files: ",
        LargestFiles(std::move(sizes)), " (leave them out with excludes)"));
  }
  packed.digest = DigestOf(out.bytes);
  packed.bytes = std::move(out.bytes);
  return packed;
}

absl::Status Unpack(absl::string_view archive, const std::string& dest) {
  std::error_code error;
  fs::create_directories(dest, error);
  if (error)
    return absl::PermissionDeniedError(absl::StrCat("creating ", dest, ": ", error.message()));
  Reader reader(archive_read_new());
  struct archive* a = reader.get();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_memory(a, archive.data(), archive.size()) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a gzip'd tar: ", archive_error_string(a) ? archive_error_string(a) : ""));
  }
  // Paths become dest/path (absolute, so libarchive's own absolute-path
  // check cannot be asked); the checks below keep every entry and every
  // link target inside dest, so no write goes through a link out of it.
  constexpr int kFlags =
      ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT;
  archive_entry* entry = nullptr;
  int r;
  while ((r = archive_read_next_header(a, &entry)) == ARCHIVE_OK) {
    const std::string path = archive_entry_pathname(entry);
    const mode_t type = archive_entry_filetype(entry);
    if (!StaysInside(path)) {
      return absl::InvalidArgumentError(absl::StrCat("entry '", path, "' leads out of the folder"));
    }
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry '", path, "': only files, folders and symlinks are unpacked"));
    }
    if (type == AE_IFLNK && !LinkStaysInside(path, archive_entry_symlink(entry))) {
      return absl::InvalidArgumentError(absl::StrCat("entry '", path, "' links out of the folder (",
                                                     archive_entry_symlink(entry), ")"));
    }
    archive_entry_set_pathname(entry, (fs::path(dest) / path).c_str());
    if (archive_read_extract(a, entry, kFlags) != ARCHIVE_OK) {
      return ArchiveError(a, absl::StrCat("unpacking '", path, "'"));
    }
  }
  if (r != ARCHIVE_EOF) return ArchiveError(a, "reading the archive");
  return absl::OkStatus();
}

}  // namespace berth
