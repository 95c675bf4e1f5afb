#include "scheduler/etcd_client.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/http_client.h"

namespace berth {
namespace {

// gRPC codes etcd answers when this member cannot serve now (no leader, a
// leader change, a request timed out): another member, or a later try, can.
bool MemberCannotServe(int grpc_code) {
  return grpc_code == 14 /*UNAVAILABLE*/ || grpc_code == 4 /*DEADLINE_EXCEEDED*/;
}

// One try at one member: long enough for a write during a leader election.
constexpr absl::Duration kTryTimeout = absl::Seconds(2);

}  // namespace

std::string EtcdClient::Bytes(const std::string& raw) { return absl::Base64Escape(raw); }

int64_t EtcdClient::IntField(const nlohmann::json& object, const char* name) {
  if (!object.is_object() || !object.contains(name)) return 0;
  const nlohmann::json& field = object[name];
  int64_t value = 0;
  if (field.is_string() && absl::SimpleAtoi(field.get<std::string>(), &value)) return value;
  if (field.is_number_integer()) return field.get<int64_t>();
  return 0;
}

absl::StatusOr<EtcdKeyValue> EtcdClient::ParseKeyValue(const nlohmann::json& kv) {
  EtcdKeyValue out;
  if (!kv.is_object() || !absl::Base64Unescape(kv.value("key", std::string()), &out.key) ||
      !absl::Base64Unescape(kv.value("value", std::string()), &out.value)) {
    return absl::DataLossError(absl::StrCat("etcd: a key-value I cannot read: ", kv.dump()));
  }
  out.create_revision = IntField(kv, "create_revision");
  out.mod_revision = IntField(kv, "mod_revision");
  out.lease = IntField(kv, "lease");
  return out;
}

std::string EtcdClient::endpoints() const { return absl::StrJoin(endpoints_, ","); }

absl::StatusOr<nlohmann::json> EtcdClient::Call(const std::string& path, const nlohmann::json& body,
                                                std::optional<absl::Duration> try_for) {
  const absl::Time deadline = absl::Now() + try_for.value_or(deadline_);
  Backoff backoff({absl::Milliseconds(50), 2, absl::Milliseconds(500)});
  absl::Status last;
  for (;;) {
    for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
      const size_t at = (current_.load() + tried) % endpoints_.size();
      HttpRequest request;
      request.method = "POST";
      request.url = absl::StrCat("http://", endpoints_[at], "/v3/", path);
      request.body = body.dump();
      request.headers = {"Content-Type: application/json"};
      // A stopped member must not take the whole deadline.
      request.timeout = std::clamp(deadline - absl::Now(), absl::Milliseconds(100), kTryTimeout);
      absl::StatusOr<HttpResponse> response = HttpCall(request);
      if (!response.ok()) {
        last = response.status();
        continue;
      }
      nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
      if (answer.is_discarded() || !answer.is_object()) {
        last = absl::UnavailableError(absl::StrCat(request.url, ": HTTP ", response->status,
                                                   ", not JSON: ", response->body.substr(0, 200)));
        continue;
      }
      const nlohmann::json* error = answer.contains("error") ? &answer["error"] : nullptr;
      if (response->status == 200 && error == nullptr) {
        current_.store(at);
        return answer;
      }
      const int code = static_cast<int>(IntField(answer, "code"));
      const std::string message = answer.value("message", error ? error->dump() : "");
      last = absl::UnavailableError(absl::StrCat(request.url, ": ", message));
      if (!MemberCannotServe(code) && response->status != 503) {
        return absl::FailedPreconditionError(absl::StrCat(request.url, ": ", message));
      }
    }
    const absl::Duration wait = backoff.Next();
    if (absl::Now() + wait >= deadline) return last;
    absl::SleepFor(wait);
  }
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdClient::Range(const std::string& key,
                                                            const std::string& range_end) {
  std::vector<EtcdKeyValue> out;
  std::string from = key;
  constexpr int64_t kPage = 1000;
  for (;;) {
    nlohmann::json request = {{"key", Bytes(from)}, {"limit", Int(kPage)}};
    if (!range_end.empty()) request["range_end"] = Bytes(range_end);
    absl::StatusOr<nlohmann::json> answer = Call("kv/range", request);
    if (!answer.ok()) return answer.status();
    const nlohmann::json kvs = answer->value("kvs", nlohmann::json::array());
    for (const nlohmann::json& kv : kvs) {
      absl::StatusOr<EtcdKeyValue> parsed = ParseKeyValue(kv);
      if (!parsed.ok()) return parsed.status();
      out.push_back(*std::move(parsed));
    }
    if (!answer->value("more", false) || kvs.empty() || range_end.empty()) return out;
    from = out.back().key + std::string(1, '\0');  // the next key after the last
  }
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  absl::StatusOr<nlohmann::json> answer =
      Call("lease/grant", {{"TTL", Int(absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1))))}});
  if (!answer.ok()) return answer.status();
  const int64_t id = IntField(*answer, "ID");
  if (id == 0) return absl::DataLossError(absl::StrCat("etcd lease grant: ", answer->dump()));
  return id;
}

absl::StatusOr<int64_t> EtcdClient::KeepLeaseAlive(int64_t lease,
                                                   std::optional<absl::Duration> deadline) {
  // A streaming RPC: the gateway answers one message {"result": ...}.
  absl::StatusOr<nlohmann::json> answer = Call("lease/keepalive", {{"ID", Int(lease)}}, deadline);
  if (!answer.ok()) return answer.status();
  return IntField(answer->value("result", nlohmann::json::object()), "TTL");
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  return Call("lease/revoke", {{"ID", Int(lease)}}).status();
}

}  // namespace berth
