// PackageStore: the working-directory packages the head holds for jobs
// (PackageService; common/working_dir_package.h makes them), in memory and
// in the head's state store, so a restarted or failed-over head still
// serves the packages its jobs name.
//
// Promises: a package is stored whole or not at all: Put checks the bytes
// against the digest and the size limit, makes its bytes durable (table
// kChunksTable, key "<digest>/<index>", kChunkBytes each) before its record
// (table kRecordsTable), and Restore drops bytes without a record. Collect
// drops only packages that no unfinished job names and that nobody stored
// or looked up within kUnclaimedGrace (a package uploaded for a job about
// to be submitted stays). Thread-safe; no lock is held during a store
// write.
#ifndef BERTH_SCHEDULER_PACKAGE_STORE_H_
#define BERTH_SCHEDULER_PACKAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/state_store.h"

namespace berth {

class PackageStore {
 public:
  static constexpr char kRecordsTable[] = "packages";
  static constexpr char kChunksTable[] = "package_chunks";
  static constexpr size_t kChunkBytes = 512 << 10;
  static constexpr absl::Duration kUnclaimedGrace = absl::Minutes(10);

  // Writes `batch` to the state store, durable when it returns OK.
  using Persist = std::function<absl::Status(const std::vector<StateStore::Write>& batch)>;

  PackageStore(uint64_t limit_bytes, Persist persist)
      : limit_bytes_(limit_bytes), persist_(std::move(persist)) {}

  // Loads what `store` holds; deletes chunks of packages without a record.
  absl::Status Restore(StateStore& store, absl::Time now);
  // The package's size, and marks it as wanted now; nullopt when not held.
  std::optional<uint64_t> Stat(const std::string& digest, absl::Time now);
  // Stores `bytes` as `digest`: true when new, false when held already.
  // INVALID_ARGUMENT when they do not hash to `digest`; RESOURCE_EXHAUSTED
  // over the limit.
  absl::StatusOr<bool> Put(const std::string& digest, std::string bytes, absl::Time now);
  // The package's bytes; nullptr when not held.
  std::shared_ptr<const std::string> Get(const std::string& digest) const;
  // Drops the packages not in `in_use` and unclaimed; returns their digests.
  std::vector<std::string> Collect(const std::set<std::string>& in_use, absl::Time now);

  uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  struct Package {
    std::shared_ptr<const std::string> bytes;
    absl::Time uploaded;
    absl::Time wanted;  // the last Put or Stat
  };

  const uint64_t limit_bytes_;
  const Persist persist_;
  mutable absl::Mutex mu_;
  std::map<std::string, Package> packages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_PACKAGE_STORE_H_
