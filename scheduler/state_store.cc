#include "scheduler/state_store.h"

#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth {
absl::Status StateStore::Apply(const std::vector<Write>& batch) {
  for (const Write& w : batch) {
    absl::Status s = w.value ? Put(w.table, w.key, *w.value) : Delete(w.table, w.key);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

class MemoryStateStore final : public StateStore {
 public:
  absl::Status Put(absl::string_view table, absl::string_view key,
                   absl::string_view value) override {
    tables_[std::string(table)][std::string(key)] = std::string(value);
    return absl::OkStatus();
  }
  absl::Status Delete(absl::string_view table, absl::string_view key) override {
    tables_[std::string(table)].erase(std::string(key));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    const auto& rows = tables_[std::string(table)];
    return std::vector<Record>(rows.begin(), rows.end());
  }
  std::string Describe() const override { return "memory"; }

 private:
  std::map<std::string, std::map<std::string, std::string>> tables_;
};

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
            held_by.empty() ? "starting" : held_by,
            "); one head writes a state store at a time"));
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

  absl::Status Put(absl::string_view table, absl::string_view key,
                   absl::string_view value) override {
    Bind(put_, table, key);
    sqlite3_bind_blob(put_, 3, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return Step(put_, "put");
  }

  absl::Status Delete(absl::string_view table, absl::string_view key) override {
    Bind(delete_, table, key);
    return Step(delete_, "delete");
  }

  absl::Status Apply(const std::vector<Write>& batch) override {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    for (const Write& w : batch) {
      absl::Status s = w.value ? Put(w.table, w.key, *w.value) : Delete(w.table, w.key);
      if (!s.ok()) {
        Exec("ROLLBACK").IgnoreError();
        return s;
      }
    }
    return Exec("COMMIT");
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
  int lock_fd_ = -1;  // PATH.lock, flock()ed once Claim()ed
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* delete_ = nullptr;
  sqlite3_stmt* scan_ = nullptr;
};

// One Redis hash per table: berth:<table>. Redis persists per its own
// configuration (appendonly yes + appendfsync always for every write).
class RedisStateStore final : public StateStore {
 public:
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& url) {
    absl::string_view rest = url;
    if (!absl::ConsumePrefix(&rest, "redis://")) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": want redis://HOST:PORT[/DB]"));
    }
    int db = 0;
    if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
      if (!absl::SimpleAtoi(rest.substr(slash + 1), &db) || db < 0) {
        return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad database number"));
      }
      rest = rest.substr(0, slash);
    }
    const size_t colon = rest.rfind(':');
    int port = 6379;
    if (colon != absl::string_view::npos && !absl::SimpleAtoi(rest.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad port"));
    }
    const std::string host(colon == absl::string_view::npos ? rest : rest.substr(0, colon));
    timeval timeout{5, 0};
    redisContext* c = redisConnectWithTimeout(host.c_str(), port, timeout);
    if (c == nullptr || c->err) {
      std::string message = c ? c->errstr : "out of memory";
      redisFree(c);
      return absl::UnavailableError(absl::StrCat("state store ", url, ": ", message));
    }
    redisSetTimeout(c, timeout);
    auto store = std::unique_ptr<RedisStateStore>(new RedisStateStore(c, url));
    if (db != 0) {
      if (absl::Status s = store->Command({"SELECT", std::to_string(db)}).status(); !s.ok())
        return s;
    }
    return std::unique_ptr<StateStore>(std::move(store));
  }

  ~RedisStateStore() override { redisFree(c_); }

  absl::Status Put(absl::string_view table, absl::string_view key,
                   absl::string_view value) override {
    return Command({"HSET", Hash(table), std::string(key), std::string(value)}).status();
  }
  absl::Status Delete(absl::string_view table, absl::string_view key) override {
    return Command({"HDEL", Hash(table), std::string(key)}).status();
  }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    absl::StatusOr<std::vector<std::string>> flat = Command({"HGETALL", Hash(table)});
    if (!flat.ok()) return flat.status();
    std::map<std::string, std::string> sorted;
    for (size_t i = 0; i + 1 < flat->size(); i += 2) sorted[(*flat)[i]] = (*flat)[i + 1];
    return std::vector<Record>(sorted.begin(), sorted.end());
  }
  std::string Describe() const override { return url_; }

 private:
  RedisStateStore(redisContext* c, std::string url) : c_(c), url_(std::move(url)) {}
  static std::string Hash(absl::string_view table) { return absl::StrCat("berth:", table); }

  // Runs one command; array replies come back flattened.
  absl::StatusOr<std::vector<std::string>> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisReply* reply = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lengths.data()));
    if (reply == nullptr) {
      // The connection is broken; try once more on a fresh one.
      if (redisReconnect(c_) == REDIS_OK) {
        reply = static_cast<redisReply*>(
            redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lengths.data()));
      }
      if (reply == nullptr)
        return absl::UnavailableError(absl::StrCat("state store ", url_, ": ", c_->errstr));
    }
    std::vector<std::string> out;
    absl::Status status;
    if (reply->type == REDIS_REPLY_ERROR) {
      status = absl::UnavailableError(
          absl::StrCat("state store ", url_, ": ", std::string(reply->str, reply->len)));
    } else if (reply->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < reply->elements; ++i)
        out.emplace_back(reply->element[i]->str, reply->element[i]->len);
    }
    freeReplyObject(reply);
    if (!status.ok()) return status;
    return out;
  }

  redisContext* c_;
  std::string url_;
};

}  // namespace

std::unique_ptr<StateStore> NewMemoryStateStore() { return std::make_unique<MemoryStateStore>(); }

absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(const std::string& path) {
  return SqliteStateStore::Open(path);
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenRedisStateStore(const std::string& url) {
  return RedisStateStore::Open(url);
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& spec,
                                                           absl::string_view field) {
  absl::StatusOr<std::unique_ptr<StateStore>> store;
  if (spec == "memory:") {
    store = NewMemoryStateStore();
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
