// PackageCache: the working-directory packages (common/working_dir_package.h)
// this node's workers run in, downloaded from the head once per node and
// unpacked under <root>/<hex digits>; a worker's spec names one by digest
// (WorkerSpec.working_dir_package).
//
// Promises: Ensure returns a folder only once the package's bytes hashed to
// its digest and unpacked whole (into a temporary folder, then renamed into
// place, so a raylet killed midway leaves no half folder that a later call
// would trust); callers asking for the same package at once share one
// download; a failed download leaves nothing behind and the next Ensure
// tries again. Beyond `keep` folders, the least recently used that no
// running worker has as its working directory, and that were not handed
// out within `just_used` (their worker may be starting), are removed.
// Thread-safe.
#ifndef BERTH_RAYLET_PACKAGE_CACHE_H_
#define BERTH_RAYLET_PACKAGE_CACHE_H_

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth {

class PackageCache {
 public:
  // The package's bytes from the head, by `deadline`.
  using Download =
      std::function<absl::StatusOr<std::string>(const std::string& digest, absl::Time deadline)>;
  // The working directories of the workers running now.
  using FoldersInUse = std::function<std::set<std::string>()>;

  PackageCache(std::string root, Download download, FoldersInUse in_use, size_t keep = 8,
               absl::Duration just_used = absl::Minutes(1));

  // The folder the package is unpacked in, downloading it first if needed.
  // INVALID_ARGUMENT for a malformed digest or bytes that do not match it;
  // the download's error otherwise (NOT_FOUND: the head does not hold it).
  absl::StatusOr<std::string> Ensure(const std::string& digest, absl::Time deadline);

 private:
  std::string FolderOf(const std::string& digest) const;
  absl::StatusOr<std::string> Fetch(const std::string& digest, absl::Time deadline);
  void Evict() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string root_;
  const Download download_;
  const FoldersInUse in_use_;
  const size_t keep_;
  const absl::Duration just_used_;
  absl::Mutex mu_;
  std::set<std::string> fetching_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> used_ ABSL_GUARDED_BY(mu_);  // unpacked: digest -> last Ensure
};

}  // namespace berth

#endif  // BERTH_RAYLET_PACKAGE_CACHE_H_
