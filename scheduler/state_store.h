// StateStore: where berth-head keeps its state across restarts. A store is
// a set of tables of key -> value (serialized state.proto records).
//
// Promises: Put, Delete and Apply are durable when they return OK (the
// head acknowledges a change only after that); Apply writes a batch
// atomically (one transaction, one fsync for SQLite); Scan returns every
// record of a table in key order; a failed call changes nothing. Backends:
//   - memory (`memory:`, or no store given): keeps nothing. A head whose
//     state lives only in its memory has nothing to restore in a new
//     process, and a live head never reads its store back, so writes
//     succeed and are dropped (as Ray's GCS without Redis keeps its tables
//     once); Scan finds nothing;
//   - sqlite: one file (`--state-dir DIR` -> DIR/head.sqlite), WAL mode,
//     fsync per write; the default of `berth up`;
//   - etcd: `etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?lease-ttl=SECONDS]`
//     (its v3 API through the JSON gateway), for heads on several
//     machines: a 3-member etcd keeps the state available when a member
//     dies, and elects the active head (a lease, a leader key created in a
//     transaction; its revision fences every write);
//   - redis: `redis://HOST:PORT[/DB][?lease-ttl=SECONDS]` (hiredis), for a head that restarts
//     on another machine, as Ray's GCS fault tolerance does it: the same
//     lease-and-epoch scheme, but one Redis server is one more single
//     point of failure.
// Writes come from one thread at a time (the head serializes them); Keep
// may run beside them.
#ifndef BERTH_SCHEDULER_STATE_STORE_H_
#define BERTH_SCHEDULER_STATE_STORE_H_

#include <cstdint>
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
  // One write of a batch: a put, or a delete when `value` is empty.
  struct Write {
    std::string table;
    std::string key;
    std::optional<std::string> value;
  };
  // Writes every record of `batch`, in order, atomically (etcd: each of its
  // transactions, which hold 128 writes by default).
  virtual absl::Status Apply(const std::vector<Write>& batch) = 0;
  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value);
  absl::Status Delete(absl::string_view table, absl::string_view key);
  virtual absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) = 0;
  // False for a store that keeps nothing (memory:): what would only be
  // written to it need not be serialized.
  virtual bool KeepsRecords() const { return true; }
  // For logs: "sqlite:/var/lib/berth/head.sqlite", "redis://10.0.0.5:6379".
  virtual std::string Describe() const = 0;
  // Makes this process the store's one writer, described as `holder` (who
  // and where, for the error a second head gets); a later call only updates
  // the description. FAILED_PRECONDITION naming the holder when another
  // process has it. SQLite: an exclusive OS lock on PATH.lock, held until
  // the process exits (a kill -9 releases it). etcd and Redis: a lease,
  // renewed by Keep, that lapses when the holder dies or is cut off.
  // Memory: always OK.
  virtual absl::Status Claim(absl::string_view holder) { return absl::OkStatus(); }
  // Renews the claim; call it often (every 100 ms): it talks to the store
  // only when a renewal is due. An error means this process no longer holds
  // the store (its lease lapsed: it was paused or cut off for longer than
  // the lease's TTL, and another head may have taken over) and must stop
  // acting as its writer. SQLite and memory: always OK.
  virtual absl::Status Keep() { return absl::OkStatus(); }
  // False from the moment a claimed lease may have lapsed, by this
  // process's clock and without asking the store (Keep finds out at its
  // next call): a head resumed after a pause stops answering as active at
  // once. Cheap; thread-safe. SQLite and memory: always true.
  virtual bool ClaimUnexpired() const { return true; }
  // Once claimed: the store's epoch + 1, written. From then on every write
  // commits only while this process still holds the store, checked in the
  // same transaction (SQLite: the store's epoch is still this one; etcd: the
  // leader key's revision is still the one this process created; Redis: a
  // Lua script compares both), else ABORTED naming what superseded it: a
  // head that was paused while another took over cannot write. The default
  // reads the epoch and writes the next with Put (atomic where writes are
  // fenced by the claim, as etcd's are).
  virtual absl::StatusOr<uint64_t> AdvanceEpoch();

  static constexpr char kMetaTable[] = "meta";  // the epoch, key kEpochKey
  static constexpr char kEpochKey[] = "epoch";
};

// The store of `memory:` (see above).
std::unique_ptr<StateStore> NewNoStateStore();
// A store that keeps what is written, in memory, lost with the process: for
// tests of what reads a store back.
std::unique_ptr<StateStore> NewMemoryStateStore();
absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(const std::string& path);
absl::StatusOr<std::unique_ptr<StateStore>> OpenRedisStateStore(const std::string& url);
absl::StatusOr<std::unique_ptr<StateStore>> OpenEtcdStateStore(const std::string& url);
// The epoch kept in the meta table (0 when there is none yet).
absl::StatusOr<uint64_t> ParseEpoch(const std::vector<StateStore::Record>& meta);
// "etcd://..." -> etcd; "redis://..." -> Redis; "sqlite:PATH" -> that file; "memory:" -> kept
// in memory only (lost with the process, as Ray's GCS without Redis);
// anything else is a directory that gets head.sqlite. Errors name `field`.
absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& spec,
                                                           absl::string_view field);

}  // namespace berth

#endif  // BERTH_SCHEDULER_STATE_STORE_H_
