// The SQLite backend of StateStore (state_store.h): one file, WAL mode,
// fsync per transaction, claimed by an exclusive OS lock on PATH.lock.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "scheduler/state_store.h"

namespace berth {
namespace {

// One table `records(tbl, key, value)`; statements prepared once.
class SqliteStateStore final : public StateStore {
 public:
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      std::string message = db ? sqlite3_errmsg(db) : "out of memory";
      sqlite3_close(db);
      return absl::UnavailableError(absl::StrCat("state store ", path, ": ", message));
    }
    auto store = std::unique_ptr<SqliteStateStore>(new SqliteStateStore(db, path));
    for (const char* sql :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
          "CREATE TABLE IF NOT EXISTS records (tbl TEXT NOT NULL, key TEXT NOT NULL, value BLOB "
          "NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID"}) {
      if (absl::Status s = store->Exec(sql); !s.ok()) return s;
    }
    if (absl::Status s = store->Prepare(); !s.ok()) return s;
    return std::unique_ptr<StateStore>(std::move(store));
  }

  ~SqliteStateStore() override {
    for (sqlite3_stmt* s : {put_, delete_, scan_}) sqlite3_finalize(s);
    sqlite3_close(db_);
    if (lock_fd_ >= 0) close(lock_fd_);
  }

  absl::Status Claim(absl::string_view holder) override {
    const std::string lock_path = path_ + ".lock";
    if (lock_fd_ < 0) {
      const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0) {
        return absl::UnavailableError(
            absl::StrCat("state store ", lock_path, ": ", std::strerror(errno)));
      }
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        std::string held_by;
        char buffer[512];
        const ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
        if (n > 0) held_by.assign(buffer, static_cast<size_t>(n));
        close(fd);
        if (error != EWOULDBLOCK) {
          return absl::UnavailableError(
              absl::StrCat("state store ", lock_path, ": ", std::strerror(error)));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "state store sqlite:", path_, " is held by another head (",
            held_by.empty() ? "starting" : held_by, "); one head writes a state store at a time"));
      }
      lock_fd_ = fd;
    }
    if (ftruncate(lock_fd_, 0) != 0 ||
        pwrite(lock_fd_, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
      return absl::UnavailableError(
          absl::StrCat("state store ", lock_path, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  absl::Status Apply(const std::vector<Write>& batch) override {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    absl::Status s = CheckFence();
    for (size_t i = 0; s.ok() && i < batch.size(); ++i) {
      const Write& w = batch[i];
      s = w.value ? PutRow(w.table, w.key, *w.value) : DeleteRow(w.table, w.key);
    }
    if (!s.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return s;
    }
    return Exec("COMMIT");
  }

  absl::StatusOr<uint64_t> AdvanceEpoch() override {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    absl::StatusOr<uint64_t> last = ReadEpoch();
    absl::Status s = last.status();
    if (s.ok()) s = PutRow(kMetaTable, kEpochKey, absl::StrCat(*last + 1));
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return s;
    }
    fence_ = *last + 1;
    return fence_;
  }

  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    sqlite3_reset(scan_);
    sqlite3_bind_text(scan_, 1, table.data(), static_cast<int>(table.size()), SQLITE_TRANSIENT);
    std::vector<Record> out;
    int rc;
    while ((rc = sqlite3_step(scan_)) == SQLITE_ROW) {
      const char* key = reinterpret_cast<const char*>(sqlite3_column_text(scan_, 0));
      const char* value = static_cast<const char*>(sqlite3_column_blob(scan_, 1));
      out.emplace_back(key ? key : "",
                       std::string(value ? value : "", sqlite3_column_bytes(scan_, 1)));
    }
    sqlite3_reset(scan_);
    if (rc != SQLITE_DONE)
      return absl::UnavailableError(absl::StrCat("state store scan: ", sqlite3_errmsg(db_)));
    return out;
  }

  std::string Describe() const override { return "sqlite:" + path_; }

 private:
  SqliteStateStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  absl::Status PutRow(absl::string_view table, absl::string_view key, absl::string_view value) {
    Bind(put_, table, key);
    sqlite3_bind_blob(put_, 3, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return Step(put_, "put");
  }

  absl::Status DeleteRow(absl::string_view table, absl::string_view key) {
    Bind(delete_, table, key);
    return Step(delete_, "delete");
  }

  absl::StatusOr<uint64_t> ReadEpoch() {
    absl::StatusOr<std::vector<Record>> meta = Scan(kMetaTable);
    if (!meta.ok()) return meta.status();
    return ParseEpoch(*meta);
  }

  // Inside a write transaction: the store's epoch is still the one this
  // process advanced it to (always, while the lock is held; the check
  // stops a process that lost the lock file from writing).
  absl::Status CheckFence() {
    if (fence_ == 0) return absl::OkStatus();
    absl::StatusOr<uint64_t> epoch = ReadEpoch();
    if (!epoch.ok()) return epoch.status();
    if (*epoch == fence_) return absl::OkStatus();
    return absl::AbortedError(absl::StrCat("state store sqlite:", path_, ": epoch ", fence_,
                                           " was superseded by epoch ", *epoch));
  }

  absl::Status Exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      absl::Status s =
          absl::UnavailableError(absl::StrCat("state store ", path_, ": ", error ? error : "?"));
      sqlite3_free(error);
      return s;
    }
    return absl::OkStatus();
  }

  absl::Status Prepare() {
    const std::pair<const char*, sqlite3_stmt**> statements[] = {
        {"INSERT OR REPLACE INTO records (tbl, key, value) VALUES (?, ?, ?)", &put_},
        {"DELETE FROM records WHERE tbl = ? AND key = ?", &delete_},
        {"SELECT key, value FROM records WHERE tbl = ? ORDER BY key", &scan_}};
    for (const auto& [sql, stmt] : statements) {
      if (sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) != SQLITE_OK) {
        return absl::UnavailableError(
            absl::StrCat("state store ", path_, ": ", sqlite3_errmsg(db_)));
      }
    }
    return absl::OkStatus();
  }

  static void Bind(sqlite3_stmt* stmt, absl::string_view table, absl::string_view key) {
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, table.data(), static_cast<int>(table.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  }

  absl::Status Step(sqlite3_stmt* stmt, absl::string_view what) {
    const int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE)
      return absl::UnavailableError(absl::StrCat("state store ", what, ": ", sqlite3_errmsg(db_)));
    return absl::OkStatus();
  }

  sqlite3* db_;
  std::string path_;
  int lock_fd_ = -1;    // PATH.lock, flock()ed once Claim()ed
  uint64_t fence_ = 0;  // the epoch every write checks; 0 = none yet
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* delete_ = nullptr;
  sqlite3_stmt* scan_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(const std::string& path) {
  return SqliteStateStore::Open(path);
}

}  // namespace berth
