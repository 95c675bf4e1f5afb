// Lease: the time side of a claim on a shared store (etcd, Redis): when
// the holder must renew it and when it has lapsed, by this process's
// monotonic clock (which runs on while the process is stopped, so a head
// resumed after a SIGSTOP sees at once that its lease is gone).
//
// Promises: a lease counts from when its last successful renewal was sent
// (the store may have started its TTL any time after that), so held()
// within the TTL implies the store still holds it too. Claim and Keep
// update it from one thread at a time; Unexpired may be asked from any.
#ifndef BERTH_SCHEDULER_STATE_LEASE_H_
#define BERTH_SCHEDULER_STATE_LEASE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth {

// The TTL of a store's lease when its address does not set one: a head
// that dies is replaced within it.
inline constexpr absl::Duration kDefaultLeaseTtl = absl::Seconds(5);

// Takes "?lease-ttl=SECONDS" (2 to 600) off the end of `rest`, the rest of
// the store address `url`: the TTL it sets, kDefaultLeaseTtl when there is
// none, INVALID_ARGUMENT naming `url` when it is malformed.
absl::StatusOr<absl::Duration> TakeLeaseTtlOption(absl::string_view& rest, absl::string_view url);

class Lease {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Lease(absl::Duration ttl) : ttl_(absl::ToChronoNanoseconds(ttl)) {}

  absl::Duration ttl() const { return absl::FromChrono(ttl_); }
  bool held() const { return held_.load(); }
  // A renewal (or the claim) sent at `sent` succeeded.
  void Renewed(Clock::time_point sent) {
    renewed_.store(sent);
    held_.store(true);
    claimed_.store(true);
  }
  // False once a lease this process held may have lapsed (by its own
  // clock, before Keep tells the store): an active head stops answering.
  bool Unexpired(Clock::time_point now = Clock::now()) const {
    return !claimed_.load() || (held_.load() && now - renewed_.load() < ttl_);
  }
  // How long until the lease lapses (at least a moment): a renewal tried
  // longer than that is too late anyway.
  absl::Duration Left(Clock::time_point now = Clock::now()) const {
    const Clock::duration left = ttl_ - (now - renewed_.load());
    return std::max(absl::FromChrono(left), absl::Milliseconds(10));
  }
  // A third of the TTL has passed since the last renewal.
  bool RenewalDue(Clock::time_point now = Clock::now()) const {
    return now - renewed_.load() >= ttl_ / 3;
  }
  // ABORTED once the TTL has passed since the last renewal.
  absl::Status CheckNotLapsed(const std::string& store, Clock::time_point now = Clock::now()) {
    const Clock::duration since = now - renewed_.load();
    if (since < ttl_) return absl::OkStatus();
    held_.store(false);
    return absl::AbortedError(absl::StrCat(
        "state store ", store, ": this head's lease lapsed (not renewed for ",
        absl::FormatDuration(absl::Milliseconds(
            std::chrono::duration_cast<std::chrono::milliseconds>(since).count())),
        ", TTL ", absl::FormatDuration(ttl()), "); another head may hold the store now"));
  }
  // A renewal got no answer: retried on the next Keep while time is left.
  absl::Status RenewalFailed(const std::string& store, const absl::Status& error) {
    if (absl::Status lapsed = CheckNotLapsed(store); !lapsed.ok()) {
      return absl::AbortedError(absl::StrCat(lapsed.message(), "; last error: ", error.message()));
    }
    return absl::OkStatus();
  }
  // The store says the lease or the claim is gone (another head holds it).
  absl::Status Lost(const std::string& store) {
    held_.store(false);
    return absl::AbortedError(absl::StrCat("state store ", store,
                                           ": this head's lease is gone; another head holds the "
                                           "store or will"));
  }

 private:
  const Clock::duration ttl_;
  std::atomic<bool> held_{false};
  std::atomic<bool> claimed_{false};  // held at some time
  std::atomic<Clock::time_point> renewed_{Clock::time_point{}};
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_STATE_LEASE_H_
