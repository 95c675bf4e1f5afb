#include "scheduler/package_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/v1/state.pb.h"
#include "common/log.h"
#include "common/working_dir_package.h"

namespace berth {
namespace {

std::string ChunkKey(const std::string& digest, uint32_t index) {
  return absl::StrFormat("%s/%08u", digest, index);
}

uint32_t ChunkCount(uint64_t size) {
  return static_cast<uint32_t>((size + PackageStore::kChunkBytes - 1) / PackageStore::kChunkBytes);
}

}  // namespace

absl::Status PackageStore::Restore(StateStore& store, absl::Time now) {
  absl::StatusOr<std::vector<StateStore::Record>> records = store.Scan(kRecordsTable);
  if (!records.ok()) return records.status();
  absl::StatusOr<std::vector<StateStore::Record>> chunks = store.Scan(kChunksTable);
  if (!chunks.ok()) return chunks.status();
  std::map<std::string, v1::PackageRecord> complete;
  for (const auto& [digest, value] : *records) {
    v1::PackageRecord record;
    if (!record.ParseFromString(value)) {
      return absl::DataLossError(absl::StrCat("package record ", digest, " does not parse"));
    }
    complete.emplace(digest, record);
  }
  std::map<std::string, std::string> bytes;
  std::vector<StateStore::Write> orphans;
  for (auto& [key, value] : *chunks) {  // in key order: each package's chunks in order
    const std::string digest = key.substr(0, key.rfind('/'));
    if (complete.count(digest) == 0) {
      orphans.push_back({kChunksTable, key, std::nullopt});
      continue;
    }
    bytes[digest].append(value);
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [digest, record] : complete) {
    std::string& data = bytes[digest];
    if (data.size() != record.size_bytes() || DigestOf(data) != digest) {
      return absl::DataLossError(
          absl::StrCat("package ", digest, ": its stored bytes do not match"));
    }
    // Restored as wanted now: the jobs that name it are not running yet.
    packages_[digest] = Package{std::make_shared<const std::string>(std::move(data)),
                                absl::FromUnixMicros(record.uploaded_unix_us()), now};
  }
  if (!orphans.empty()) {
    LogInfo("dropping ", orphans.size(), " chunks of packages whose upload did not finish");
    return store.Apply(orphans);
  }
  return absl::OkStatus();
}

std::optional<uint64_t> PackageStore::Stat(const std::string& digest, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = packages_.find(digest);
  if (it == packages_.end()) return std::nullopt;
  it->second.wanted = now;
  return it->second.bytes->size();
}

absl::StatusOr<bool> PackageStore::Put(const std::string& digest, std::string bytes,
                                       absl::Time now) {
  if (bytes.size() > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "package of ", bytes.size(), " bytes is over the head's limit of ", limit_bytes_,
        " bytes (berth-head --package-limit-mb); leave large files out with excludes"));
  }
  if (const std::string actual = DigestOf(bytes); actual != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("header.digest: the bytes hash to ", actual, ", not ", digest));
  }
  if (Stat(digest, now)) return false;
  // Chunks first, then the record: a restart between them drops the chunks.
  std::vector<StateStore::Write> chunks;
  const uint32_t count = ChunkCount(bytes.size());
  for (uint32_t i = 0; i < count; ++i) {
    chunks.push_back(
        {kChunksTable, ChunkKey(digest, i), bytes.substr(i * kChunkBytes, kChunkBytes)});
  }
  if (absl::Status s = persist_(chunks); !s.ok()) return s;
  v1::PackageRecord record;
  record.set_digest(digest);
  record.set_size_bytes(bytes.size());
  record.set_chunks(count);
  record.set_uploaded_unix_us(absl::ToUnixMicros(now));
  if (absl::Status s = persist_({{kRecordsTable, digest, record.SerializeAsString()}}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  packages_[digest] = Package{std::make_shared<const std::string>(std::move(bytes)), now, now};
  return true;
}

std::shared_ptr<const std::string> PackageStore::Get(const std::string& digest) const {
  absl::MutexLock lock(&mu_);
  auto it = packages_.find(digest);
  return it == packages_.end() ? nullptr : it->second.bytes;
}

std::vector<std::string> PackageStore::Collect(const std::set<std::string>& in_use,
                                               absl::Time now) {
  std::vector<std::pair<std::string, uint32_t>> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = packages_.begin(); it != packages_.end();) {
      if (in_use.count(it->first) == 0 && now - it->second.wanted > kUnclaimedGrace) {
        dropped.emplace_back(it->first, ChunkCount(it->second.bytes->size()));
        it = packages_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<std::string> digests;
  for (const auto& [digest, count] : dropped) {
    // The record first: a restart between the two writes drops the chunks.
    std::vector<StateStore::Write> chunks;
    for (uint32_t i = 0; i < count; ++i) chunks.push_back({kChunksTable, ChunkKey(digest, i), {}});
    if (absl::Status s = persist_({{kRecordsTable, digest, std::nullopt}}); s.ok()) {
      persist_(chunks).IgnoreError();  // what is left goes at the next restore
    }
    LogInfo("package ", digest, " collected: no unfinished job names it");
    digests.push_back(digest);
  }
  return digests;
}

}  // namespace berth
