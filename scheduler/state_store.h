// StateStore: where berth-head keeps its state across restarts. A store is
// a set of tables of key -> value (serialized state.proto records).
//
// Promises: Put, Delete and Apply are durable when they return OK (the
// head acknowledges a change only after that); Apply writes a batch
// atomically (one transaction, one fsync for SQLite); Scan returns every
// record of a table in key order; a failed call changes nothing. Backends:
//   - memory: for tests, lost with the process;
//   - sqlite: one file (`--state-dir DIR` -> DIR/head.sqlite), WAL mode,
//     fsync per write; the default of `berth up`;
//   - redis: `redis://HOST:PORT[/DB]` (hiredis), for a head that restarts
//     on another machine, as Ray's GCS fault tolerance does it. A store is
//     used by one thread at a time (the head serializes its writes).
#ifndef BERTH_SCHEDULER_STATE_STORE_H_
#define BERTH_SCHEDULER_STATE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

class StateStore {
 public:
  using Record = std::pair<std::string, std::string>;  // key, value

  virtual ~StateStore() = default;
  virtual absl::Status Put(absl::string_view table, absl::string_view key,
                           absl::string_view value) = 0;
  virtual absl::Status Delete(absl::string_view table, absl::string_view key) = 0;
  // One write of a batch: a put, or a delete when `value` is empty.
  struct Write {
    std::string table;
    std::string key;
    std::optional<std::string> value;
  };
  // Writes every record of `batch`, in order. The default applies them one
  // by one (not atomically); backends with transactions override it.
  virtual absl::Status Apply(const std::vector<Write>& batch);
  virtual absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) = 0;
  // For logs: "sqlite:/var/lib/berth/head.sqlite", "redis://10.0.0.5:6379".
  virtual std::string Describe() const = 0;
  // Makes this process the store's one writer, described as `holder` (who
  // and where, for the error a second head gets); a later call only updates
  // the description. SQLite: an exclusive OS lock on PATH.lock, held until
  // the process exits (a kill -9 releases it); FAILED_PRECONDITION naming
  // the holder when another process has it. Memory and Redis: always OK
  // (Redis is not exclusive).
  virtual absl::Status Claim(absl::string_view holder) { return absl::OkStatus(); }
};

std::unique_ptr<StateStore> NewMemoryStateStore();
absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(const std::string& path);
absl::StatusOr<std::unique_ptr<StateStore>> OpenRedisStateStore(const std::string& url);
// "redis://..." -> Redis; "sqlite:PATH" -> that file; "memory:" -> kept
// in memory only (lost with the process, as Ray's GCS without Redis);
// anything else is a directory that gets head.sqlite. Errors name `field`.
absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& spec,
                                                           absl::string_view field);

}  // namespace berth

#endif  // BERTH_SCHEDULER_STATE_STORE_H_
