#include "raylet/package_cache.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/working_dir_package.h"

namespace berth {

namespace fs = std::filesystem;

PackageCache::PackageCache(std::string root, Download download, FoldersInUse in_use, size_t keep,
                           absl::Duration just_used)
    : root_(std::move(root)),
      download_(std::move(download)),
      in_use_(std::move(in_use)),
      keep_(keep),
      just_used_(just_used) {
  // Folders unpacked by an earlier run of this raylet are trusted only as
  // far as their names go; temporary ones are what a killed run left.
  std::error_code error;
  fs::create_directories(root_, error);
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0) {
      fs::remove_all(entry.path(), error);
    } else if (CheckDigest(absl::StrCat("sha256:", name), "").ok()) {
      used_[absl::StrCat("sha256:", name)] = absl::InfinitePast();
    }
  }
}

std::string PackageCache::FolderOf(const std::string& digest) const {
  return absl::StrCat(root_, "/", digest.substr(digest.find(':') + 1));
}

absl::StatusOr<std::string> PackageCache::Ensure(const std::string& digest, absl::Time deadline) {
  if (absl::Status s = CheckDigest(digest, "spec.working_dir_package"); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    // Another call is downloading it: wait for that one, then look again.
    auto done = [&] { return fetching_.count(digest) == 0; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("package ", digest, " is still downloading"));
    }
    if (auto it = used_.find(digest); it != used_.end()) {
      it->second = absl::Now();
      return FolderOf(digest);
    }
    fetching_.insert(digest);
  }
  absl::StatusOr<std::string> folder = Fetch(digest, deadline);
  {
    absl::MutexLock lock(&mu_);
    fetching_.erase(digest);
    if (folder.ok()) used_[digest] = absl::Now();
  }
  if (folder.ok()) Evict();
  return folder;
}

absl::StatusOr<std::string> PackageCache::Fetch(const std::string& digest, absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> bytes = download_(digest, deadline);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat("downloading package ", digest, ": ",
                                                            bytes.status().message()));
  }
  if (const std::string actual = DigestOf(*bytes); actual != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("package ", digest, ": the head sent bytes that hash to ", actual));
  }
  const std::string folder = FolderOf(digest);
  const std::string temporary =
      absl::StrCat(root_, "/.tmp-", digest.substr(digest.find(':') + 1, 16), "-", getpid());
  std::error_code error;
  fs::remove_all(temporary, error);
  absl::Status unpacked = Unpack(*bytes, temporary);
  if (unpacked.ok()) {
    fs::rename(temporary, folder, error);
    if (error) {
      unpacked = absl::InternalError(absl::StrCat("renaming to ", folder, ": ", error.message()));
    }
  }
  if (!unpacked.ok()) {
    fs::remove_all(temporary, error);
    return absl::Status(unpacked.code(),
                        absl::StrCat("unpacking package ", digest, ": ", unpacked.message()));
  }
  LogInfo("package ", digest, " (", bytes->size(), " bytes) unpacked in ", folder, " in ",
          absl::FormatDuration(absl::Now() - start));
  return folder;
}

void PackageCache::Evict() {
  const std::set<std::string> in_use = in_use_();
  const absl::Time now = absl::Now();
  // Under the lock: an Ensure of the same package waits until it is gone.
  absl::MutexLock lock(&mu_);
  if (used_.size() <= keep_) return;
  std::vector<std::pair<absl::Time, std::string>> by_age;
  for (const auto& [digest, used] : used_) {
    if (in_use.count(FolderOf(digest)) == 0 && now - used >= just_used_) {
      by_age.emplace_back(used, digest);
    }
  }
  std::sort(by_age.begin(), by_age.end());
  for (size_t i = 0; i < by_age.size() && used_.size() > keep_; ++i) {
    const std::string& digest = by_age[i].second;
    used_.erase(digest);
    std::error_code error;
    fs::remove_all(FolderOf(digest), error);
    LogInfo("package ", digest, " removed from this node's cache (unused)");
  }
}

}  // namespace berth
