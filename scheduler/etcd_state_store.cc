// The etcd backend of StateStore (state_store.h), through EtcdClient.
//
// Layout under PREFIX (default "berth"): PREFIX/t/<table>/<key> per record,
// PREFIX/leader for the claim. A claim is the leader key created in a
// transaction (only if absent) with a lease attached: it vanishes when the
// lease lapses. Its create revision is the fencing token: every write is a
// transaction that commits only while the leader key still has it.
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/etcd_client.h"
#include "scheduler/state_lease.h"
#include "scheduler/state_store.h"

namespace berth {
namespace {

// etcd's default --max-txn-ops; its default --max-request-bytes is 1.5 MiB.
constexpr size_t kMaxOpsPerTxn = 128;
constexpr size_t kMaxBytesPerTxn = 1 << 20;
// How long a call may try the members (a leader election takes a second or
// two).
constexpr absl::Duration kCallDeadline = absl::Seconds(5);

class EtcdStateStore final : public StateStore {
 public:
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& url);

  absl::Status Apply(const std::vector<Write>& batch) override;
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override;
  std::string Describe() const override { return url_; }
  absl::Status Claim(absl::string_view holder) override;
  absl::Status Keep() override;
  bool ClaimUnexpired() const override { return lease_.Unexpired(); }

 private:
  EtcdStateStore(std::string url, std::vector<std::string> endpoints, std::string prefix,
                 absl::Duration ttl)
      : url_(std::move(url)),
        etcd_(std::move(endpoints), kCallDeadline),
        prefix_(std::move(prefix)),
        lease_(ttl) {}

  std::string TablePrefix(absl::string_view table) const {
    return absl::StrCat(prefix_, "/t/", table, "/");
  }
  std::string LeaderKey() const { return prefix_ + "/leader"; }
  // The compare that fences a write: the leader key is still ours.
  nlohmann::json StillLeader() const {
    return {{"key", EtcdClient::Bytes(LeaderKey())},
            {"target", "CREATE"},
            {"result", "EQUAL"},
            {"create_revision", EtcdClient::Int(leader_revision_)}};
  }
  absl::Status Txn(const std::vector<nlohmann::json>& ops);
  absl::Status Campaign(absl::string_view holder);
  absl::Status HeldBy(const std::vector<EtcdKeyValue>& leader) const;

  const std::string url_;
  EtcdClient etcd_;
  const std::string prefix_;
  Lease lease_;
  int64_t lease_id_ = 0;
  int64_t leader_revision_ = 0;  // 0 = not claimed; then the fencing token
};

absl::StatusOr<std::unique_ptr<StateStore>> EtcdStateStore::Open(const std::string& url) {
  absl::string_view rest = url;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\": ", why,
                     "; want etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?lease-ttl=SECONDS]"));
  };
  if (!absl::ConsumePrefix(&rest, "etcd://")) return bad("not an etcd:// address");
  absl::StatusOr<absl::Duration> ttl = TakeLeaseTtlOption(rest, url);
  if (!ttl.ok()) return ttl.status();
  std::string prefix = "berth";
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    prefix = std::string(absl::StripSuffix(rest.substr(slash + 1), "/"));
    rest = rest.substr(0, slash);
    if (prefix.empty()) return bad("empty prefix");
  }
  std::vector<std::string> endpoints;
  for (absl::string_view endpoint : absl::StrSplit(rest, ',')) {
    int port = 0;
    const size_t colon = endpoint.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return bad(absl::StrCat("bad endpoint \"", endpoint, "\""));
    }
    endpoints.emplace_back(endpoint);
  }
  auto store = std::unique_ptr<EtcdStateStore>(
      new EtcdStateStore(url, std::move(endpoints), std::move(prefix), *ttl));
  // Reach it now: a wrong address is an error at start, not at the first write.
  if (absl::Status s =
          store->etcd_.Call("maintenance/status", nlohmann::json::object(), absl::Seconds(1))
              .status();
      !s.ok()) {
    return absl::UnavailableError(absl::StrCat("state store ", url, ": ", s.message()));
  }
  return std::unique_ptr<StateStore>(std::move(store));
}

absl::Status EtcdStateStore::Txn(const std::vector<nlohmann::json>& ops) {
  nlohmann::json request = {{"success", ops}};
  if (leader_revision_ != 0) request["compare"] = nlohmann::json::array({StillLeader()});
  absl::StatusOr<nlohmann::json> answer = etcd_.Call("kv/txn", request);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        absl::StrCat("state store ", url_, ": ", answer.status().message()));
  }
  if (leader_revision_ != 0 && !answer->value("succeeded", false)) {
    return absl::AbortedError(absl::StrCat(
        "state store ", url_, ": this head no longer holds the store (its leader key, revision ",
        leader_revision_, ", is gone): another head took over"));
  }
  return absl::OkStatus();
}

// Split where etcd's limits require: each transaction is atomic and fenced;
// a batch larger than one transaction is not atomic as a whole.
absl::Status EtcdStateStore::Apply(const std::vector<Write>& batch) {
  std::vector<nlohmann::json> ops;
  size_t bytes = 0;
  for (const Write& w : batch) {
    const std::string key = EtcdClient::Bytes(TablePrefix(w.table) + w.key);
    nlohmann::json op =
        w.value ? nlohmann::json{{"request_put",
                                  {{"key", key}, {"value", EtcdClient::Bytes(*w.value)}}}}
                : nlohmann::json{{"request_delete_range", {{"key", key}}}};
    const size_t size = key.size() + (w.value ? w.value->size() * 4 / 3 : 0);
    if (!ops.empty() && (ops.size() == kMaxOpsPerTxn || bytes + size > kMaxBytesPerTxn)) {
      if (absl::Status s = Txn(ops); !s.ok()) return s;
      ops.clear();
      bytes = 0;
    }
    ops.push_back(std::move(op));
    bytes += size;
  }
  return ops.empty() ? absl::OkStatus() : Txn(ops);
}

absl::StatusOr<std::vector<StateStore::Record>> EtcdStateStore::Scan(absl::string_view table) {
  const std::string prefix = TablePrefix(table);
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);  // '/' + 1: just past the prefix
  absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcd_.Range(prefix, end);
  if (!kvs.ok()) {
    return absl::Status(kvs.status().code(),
                        absl::StrCat("state store ", url_, ": ", kvs.status().message()));
  }
  std::vector<Record> out;
  out.reserve(kvs->size());
  for (EtcdKeyValue& kv : *kvs) out.emplace_back(kv.key.substr(prefix.size()), std::move(kv.value));
  return out;
}

absl::Status EtcdStateStore::HeldBy(const std::vector<EtcdKeyValue>& leader) const {
  return absl::FailedPreconditionError(
      absl::StrCat("state store ", url_, " is held by another head (",
                   leader.empty() ? "its lease is ending" : leader[0].value,
                   "); one head writes a state store at a time"));
}

// Creates the leader key with a fresh lease, only if no one has it.
absl::Status EtcdStateStore::Campaign(absl::string_view holder) {
  absl::StatusOr<std::vector<EtcdKeyValue>> leader = etcd_.Range(LeaderKey(), "");
  if (!leader.ok()) return leader.status();
  if (!leader->empty()) return HeldBy(*leader);
  const Lease::Clock::time_point sent = Lease::Clock::now();
  absl::StatusOr<int64_t> lease = etcd_.GrantLease(lease_.ttl());
  if (!lease.ok()) return lease.status();
  const std::string key = EtcdClient::Bytes(LeaderKey());
  absl::StatusOr<nlohmann::json> answer =
      etcd_.Call("kv/txn", {{"compare",
                             {{{"key", key},
                               {"target", "CREATE"},
                               {"result", "EQUAL"},
                               {"create_revision", EtcdClient::Int(0)}}}},
                            {"success",
                             {{{"request_put",
                                {{"key", key},
                                 {"value", EtcdClient::Bytes(std::string(holder))},
                                 {"lease", EtcdClient::Int(*lease)}}}}}},
                            {"failure", {{{"request_range", {{"key", key}}}}}}});
  if (!answer.ok()) return answer.status();
  // Read back, so that a retried transaction that had already won counts.
  absl::StatusOr<std::vector<EtcdKeyValue>> now = etcd_.Range(LeaderKey(), "");
  if (!now.ok()) return now.status();
  if (now->empty() || (*now)[0].lease != *lease) {
    etcd_.RevokeLease(*lease).IgnoreError();  // it would lapse anyway
    return HeldBy(*now);
  }
  lease_id_ = *lease;
  leader_revision_ = (*now)[0].create_revision;
  lease_.Renewed(sent);
  return absl::OkStatus();
}

absl::Status EtcdStateStore::Claim(absl::string_view holder) {
  if (leader_revision_ == 0) return Campaign(holder);
  // Held: a new description on the same key and lease, still fenced.
  const std::string key = EtcdClient::Bytes(LeaderKey());
  return Txn({{{"request_put",
                {{"key", key},
                 {"value", EtcdClient::Bytes(std::string(holder))},
                 {"lease", EtcdClient::Int(lease_id_)}}}}});
}

absl::Status EtcdStateStore::Keep() {
  if (!lease_.held()) return absl::OkStatus();
  if (absl::Status lapsed = lease_.CheckNotLapsed(url_); !lapsed.ok()) return lapsed;
  if (!lease_.RenewalDue()) return absl::OkStatus();
  const Lease::Clock::time_point sent = Lease::Clock::now();
  absl::StatusOr<int64_t> ttl = etcd_.KeepLeaseAlive(lease_id_, lease_.Left());
  if (!ttl.ok()) return lease_.RenewalFailed(url_, ttl.status());
  if (*ttl <= 0) return lease_.Lost(url_);
  lease_.Renewed(sent);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> OpenEtcdStateStore(const std::string& url) {
  return EtcdStateStore::Open(url);
}

}  // namespace berth
