// EtcdClient: etcd's v3 API through its JSON gateway (POST /v3/...), over
// libcurl: what the etcd state store needs (range, txn, leases), no more.
// Keys and values are raw bytes here; the gateway's base64 stays inside.
//
// Promises: a call goes to one endpoint and, when that one does not answer
// or answers that it cannot serve (no leader, a leader change, a timeout),
// to the next, with the backoff between rounds, until the call's deadline;
// any other error of etcd comes back at once, with etcd's message. A call
// whose answer was lost may have been applied: callers make their writes
// safe to repeat. Thread-safe.
#ifndef BERTH_SCHEDULER_ETCD_CLIENT_H_
#define BERTH_SCHEDULER_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace berth {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  // `endpoints`: HOST:PORT of each member (at least one).
  EtcdClient(std::vector<std::string> endpoints, absl::Duration deadline)
      : endpoints_(std::move(endpoints)), deadline_(deadline) {}

  // POST /v3/<path> with `body`; the answer's JSON. `deadline`: how long
  // to try (default: the client's).
  absl::StatusOr<nlohmann::json> Call(const std::string& path, const nlohmann::json& body,
                                      std::optional<absl::Duration> deadline = std::nullopt);

  // Every key in [key, range_end) in key order (range_end empty: `key` only).
  absl::StatusOr<std::vector<EtcdKeyValue>> Range(const std::string& key,
                                                  const std::string& range_end);
  // A lease of `ttl`; its ID.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // The lease's remaining TTL in seconds after the renewal; 0 when it is
  // gone (expired or revoked).
  absl::StatusOr<int64_t> KeepLeaseAlive(int64_t lease,
                                         std::optional<absl::Duration> deadline = std::nullopt);
  absl::Status RevokeLease(int64_t lease);

  // JSON for the gateway: bytes are base64, int64s are strings.
  static std::string Bytes(const std::string& raw);
  static nlohmann::json Int(int64_t value) { return std::to_string(value); }
  // One key-value of a range answer ("kvs" entries).
  static absl::StatusOr<EtcdKeyValue> ParseKeyValue(const nlohmann::json& kv);
  // An int64 field of an answer (a string in the gateway's JSON; 0 when
  // absent, as proto3 leaves zero values out).
  static int64_t IntField(const nlohmann::json& object, const char* name);

  std::string endpoints() const;

 private:
  const std::vector<std::string> endpoints_;
  const absl::Duration deadline_;
  std::atomic<size_t> current_{0};  // the endpoint that answered last
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_ETCD_CLIENT_H_
