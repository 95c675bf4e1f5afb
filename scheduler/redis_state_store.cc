// The Redis backend of StateStore (state_store.h), through hiredis.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "scheduler/state_lease.h"
#include "scheduler/state_store.h"

namespace berth {
namespace {

// Names this process's claim: unique across hosts and restarts.
std::string UniqueToken() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "/", getpid(), "/", absl::ToUnixNanos(absl::Now()));
}

// One Redis hash per table: berth:<table>. Redis persists per its own
// configuration (appendonly yes + appendfsync always for every write).
// The claim is the key berth:leader ("TOKEN holder", expiring after the
// lease's TTL); writes run as one Lua script, atomic and fenced.
class RedisStateStore final : public StateStore {
 public:
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& url) {
    absl::string_view rest = url;
    if (!absl::ConsumePrefix(&rest, "redis://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", url, "\": want redis://HOST:PORT[/DB][?lease-ttl=SECONDS]"));
    }
    absl::StatusOr<absl::Duration> ttl = TakeLeaseTtlOption(rest, url);
    if (!ttl.ok()) return ttl.status();
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
    auto store = std::unique_ptr<RedisStateStore>(new RedisStateStore(c, url, db, *ttl));
    if (db != 0) {
      if (absl::Status s = store->Command({"SELECT", std::to_string(db)}).status(); !s.ok())
        return s;
    }
    return std::unique_ptr<StateStore>(std::move(store));
  }

  ~RedisStateStore() override {
    absl::MutexLock lock(&mu_);
    redisFree(c_);
  }

  absl::Status Apply(const std::vector<Write>& batch) override;
  absl::Status Claim(absl::string_view holder) override;
  absl::Status Keep() override;
  bool ClaimUnexpired() const override { return lease_.Unexpired(); }
  absl::StatusOr<uint64_t> AdvanceEpoch() override;
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    absl::StatusOr<std::vector<std::string>> flat = Command({"HGETALL", Hash(table)});
    if (!flat.ok()) return flat.status();
    std::map<std::string, std::string> sorted;
    for (size_t i = 0; i + 1 < flat->size(); i += 2) sorted[(*flat)[i]] = (*flat)[i + 1];
    return std::vector<Record>(sorted.begin(), sorted.end());
  }
  std::string Describe() const override { return url_; }

 private:
  RedisStateStore(redisContext* c, std::string url, int db, absl::Duration ttl)
      : c_(c), url_(std::move(url)), db_(db), lease_(ttl) {}
  static std::string Hash(absl::string_view table) { return absl::StrCat("berth:", table); }

  // Runs one command; array replies come back flattened, an integer as its
  // digits, nil as nothing; a SUPERSEDED error reply (a fenced write) is
  // ABORTED.
  absl::StatusOr<std::vector<std::string>> Command(const std::vector<std::string>& args) {
    absl::MutexLock lock(&mu_);
    redisReply* reply = Send(args);
    if (reply == nullptr) {
      // The connection is broken; try once more on a fresh one.
      if (redisReconnect(c_) == REDIS_OK &&
          (db_ == 0 || Reply(Send({"SELECT", std::to_string(db_)})).ok())) {
        reply = Send(args);
      }
      if (reply == nullptr)
        return absl::UnavailableError(absl::StrCat("state store ", url_, ": ", c_->errstr));
    }
    return Reply(reply);
  }

  redisReply* Send(const std::vector<std::string>& args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lengths.data()));
  }

  // Takes `reply` (freed here).
  absl::StatusOr<std::vector<std::string>> Reply(redisReply* reply) const {
    if (reply == nullptr) return absl::UnavailableError(absl::StrCat("state store ", url_));
    std::vector<std::string> out;
    absl::Status status;
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string error(reply->str, reply->len);
      status = absl::Status(absl::StartsWith(error, "SUPERSEDED ") ? absl::StatusCode::kAborted
                                                                   : absl::StatusCode::kUnavailable,
                            absl::StrCat("state store ", url_, ": ", error));
    } else if (reply->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < reply->elements; ++i)
        out.emplace_back(reply->element[i]->str, reply->element[i]->len);
    } else if (reply->type == REDIS_REPLY_INTEGER) {
      out.push_back(std::to_string(reply->integer));
    } else if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) {
      out.emplace_back(reply->str, reply->len);
    }
    freeReplyObject(reply);
    if (!status.ok()) return status;
    return out;
  }

  absl::StatusOr<std::vector<std::string>> Eval(const char* script, std::vector<std::string> args) {
    args.insert(args.begin(), {"EVAL", script, "2", kLeaderKey, Hash(kMetaTable)});
    return Command(args);
  }

  static constexpr char kLeaderKey[] = "berth:leader";

  absl::Mutex mu_;  // the connection: Keep runs beside the writer
  redisContext* c_ ABSL_GUARDED_BY(mu_);
  const std::string url_;
  const int db_;
  // Identifies this process's claim in berth:leader.
  const std::string token_ = UniqueToken();
  Lease lease_;
  uint64_t fence_ = 0;  // the epoch every write checks; 0 = none yet
};

// KEYS: the leader key, the meta hash. ARGV: token, holder, TTL in ms.
// Takes the key when it is free or already this token's.
constexpr char kClaimScript[] = R"lua(
local v = redis.call('GET', KEYS[1])
if v == false or string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
  return 1
end
return v
)lua";

// ARGV: token, TTL in ms. 1 when renewed, 0 when the key is another's.
constexpr char kKeepScript[] = R"lua(
local v = redis.call('GET', KEYS[1])
if v ~= false and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// ARGV: token. The next epoch, when the key is this token's.
constexpr char kEpochScript[] = R"lua(
local v = redis.call('GET', KEYS[1])
if v == false or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return redis.error_reply('SUPERSEDED another head holds the store')
end
local e = tonumber(redis.call('HGET', KEYS[2], 'epoch') or '0') + 1
redis.call('HSET', KEYS[2], 'epoch', tostring(e))
return e
)lua";

// ARGV: token and epoch (both empty: unfenced), then (op, hash, key,
// value) per write, op 'p' (HSET) or 'd' (HDEL).
constexpr char kApplyScript[] = R"lua(
if ARGV[1] ~= '' then
  local v = redis.call('GET', KEYS[1])
  local e = redis.call('HGET', KEYS[2], 'epoch')
  if v == false or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' or e ~= ARGV[2] then
    return redis.error_reply('SUPERSEDED the head of epoch ' .. ARGV[2] .. ' no longer holds the store (its epoch: ' .. tostring(e) .. ')')
  end
end
for i = 3, #ARGV, 4 do
  if ARGV[i] == 'p' then
    redis.call('HSET', ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
  else
    redis.call('HDEL', ARGV[i + 1], ARGV[i + 2])
  end
end
return 1
)lua";

absl::Status RedisStateStore::Apply(const std::vector<Write>& batch) {
  std::vector<std::string> args = {fence_ ? token_ : "", fence_ ? absl::StrCat(fence_) : ""};
  for (const Write& w : batch) {
    args.insert(args.end(), {w.value ? "p" : "d", Hash(w.table), w.key, w.value.value_or("")});
  }
  return Eval(kApplyScript, std::move(args)).status();
}

absl::Status RedisStateStore::Claim(absl::string_view holder) {
  const Lease::Clock::time_point sent = Lease::Clock::now();
  absl::StatusOr<std::vector<std::string>> reply =
      Eval(kClaimScript,
           {token_, std::string(holder), absl::StrCat(absl::ToInt64Milliseconds(lease_.ttl()))});
  if (!reply.ok()) return reply.status();
  if (reply->size() == 1 && (*reply)[0] == "1") {
    lease_.Renewed(sent);
    return absl::OkStatus();
  }
  const std::string held = reply->empty() ? "" : (*reply)[0];
  return absl::FailedPreconditionError(
      absl::StrCat("state store ", url_, " is held by another head (",
                   held.substr(std::min(held.size(), held.find(' ') + 1)),
                   "); one head writes a state store at a time"));
}

absl::Status RedisStateStore::Keep() {
  if (!lease_.held()) return absl::OkStatus();
  if (absl::Status lapsed = lease_.CheckNotLapsed(url_); !lapsed.ok()) return lapsed;
  if (!lease_.RenewalDue()) return absl::OkStatus();
  const Lease::Clock::time_point sent = Lease::Clock::now();
  absl::StatusOr<std::vector<std::string>> reply =
      Eval(kKeepScript, {token_, absl::StrCat(absl::ToInt64Milliseconds(lease_.ttl()))});
  if (!reply.ok()) return lease_.RenewalFailed(url_, reply.status());
  if (reply->size() != 1 || (*reply)[0] != "1") return lease_.Lost(url_);
  lease_.Renewed(sent);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RedisStateStore::AdvanceEpoch() {
  absl::StatusOr<std::vector<std::string>> reply = Eval(kEpochScript, {token_});
  if (!reply.ok()) return reply.status();
  if (reply->size() != 1 || !absl::SimpleAtoi((*reply)[0], &fence_)) {
    return absl::DataLossError(absl::StrCat("state store ", url_, ": epoch reply"));
  }
  return fence_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> OpenRedisStateStore(const std::string& url) {
  return RedisStateStore::Open(url);
}

}  // namespace berth
