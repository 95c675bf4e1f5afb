#include "scheduler/state_store.h"

#include <filesystem>
#include <map>

#include "absl/container/btree_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace berth {
absl::Status StateStore::Put(absl::string_view table, absl::string_view key,
                             absl::string_view value) {
  return Apply({{std::string(table), std::string(key), std::string(value)}});
}

absl::Status StateStore::Delete(absl::string_view table, absl::string_view key) {
  return Apply({{std::string(table), std::string(key), std::nullopt}});
}

absl::StatusOr<uint64_t> StateStore::AdvanceEpoch() {
  absl::StatusOr<std::vector<Record>> meta = Scan(kMetaTable);
  if (!meta.ok()) return meta.status();
  absl::StatusOr<uint64_t> last = ParseEpoch(*meta);
  if (!last.ok()) return last.status();
  if (absl::Status s = Put(kMetaTable, kEpochKey, absl::StrCat(*last + 1)); !s.ok()) return s;
  return *last + 1;
}

namespace {

// Locked: a store may be scanned while a writer applies a batch (a test
// looks at what a serving head wrote).
class MemoryStateStore final : public StateStore {
 public:
  absl::Status Apply(const std::vector<Write>& batch) override {
    absl::MutexLock lock(&mu_);
    for (const Write& w : batch) {
      if (w.value) {
        tables_[w.table][w.key] = *w.value;
      } else {
        tables_[w.table].erase(w.key);
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    absl::MutexLock lock(&mu_);
    const auto& rows = tables_[std::string(table)];
    return std::vector<Record>(rows.begin(), rows.end());
  }
  std::string Describe() const override { return "memory (kept)"; }

 private:
  // B-trees: a table holds a record per node and per group, and a tree
  // node per record would cost more than many records.
  absl::Mutex mu_;
  std::map<std::string, absl::btree_map<std::string, std::string>> tables_ ABSL_GUARDED_BY(mu_);
};

class NoStateStore final : public StateStore {
 public:
  absl::Status Apply(const std::vector<Write>& batch) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    return std::vector<Record>();
  }
  std::string Describe() const override { return "memory"; }
  bool KeepsRecords() const override { return false; }
};

}  // namespace

std::unique_ptr<StateStore> NewNoStateStore() { return std::make_unique<NoStateStore>(); }

std::unique_ptr<StateStore> NewMemoryStateStore() { return std::make_unique<MemoryStateStore>(); }

absl::StatusOr<uint64_t> ParseEpoch(const std::vector<StateStore::Record>& meta) {
  uint64_t epoch = 0;
  for (const auto& [key, value] : meta) {
    if (key == StateStore::kEpochKey && !absl::SimpleAtoi(value, &epoch)) {
      return absl::DataLossError(absl::StrCat("state store: epoch '", value, "'"));
    }
  }
  return epoch;
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& spec,
                                                           absl::string_view field) {
  absl::StatusOr<std::unique_ptr<StateStore>> store;
  if (spec == "memory:") {
    store = NewNoStateStore();
  } else if (absl::StartsWith(spec, "etcd://")) {
    store = OpenEtcdStateStore(spec);
  } else if (absl::StartsWith(spec, "redis://")) {
    store = OpenRedisStateStore(spec);
  } else if (absl::StartsWith(spec, "sqlite:")) {
    store = OpenSqliteStateStore(spec.substr(7));
  } else {
    std::error_code error;
    std::filesystem::create_directories(spec, error);
    if (error)
      return absl::UnavailableError(
          absl::StrCat(field, ": cannot create ", spec, ": ", error.message()));
    std::filesystem::permissions(spec, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, error);
    store = OpenSqliteStateStore(spec + "/head.sqlite");
  }
  if (!store.ok())
    return absl::Status(store.status().code(), absl::StrCat(field, ": ", store.status().message()));
  return store;
}

}  // namespace berth
