#include "train/job_timers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

constexpr BackoffPolicy kRestartBackoff{absl::Seconds(1), 2, absl::Minutes(5)};
// An attempt that ran this long was healthy: the next failure waits 1 s again.
constexpr absl::Duration kHealthyRun = absl::Minutes(10);

}  // namespace

absl::Duration StopGrace(const v1::TrainJobSpec& spec, absl::Duration head_default) {
  return spec.has_stop_grace_period_s() ? absl::Seconds(spec.stop_grace_period_s()) : head_default;
}

JobTimers::JobTimers(const v1::TrainJobSpec& spec)
    : time_limit_(absl::Seconds(std::max<int64_t>(spec.time_limit_s(), 0))),
      progress_timeout_(spec.failure_config().progress_timeout_s() > 0
                            ? absl::Seconds(spec.failure_config().progress_timeout_s())
                            : absl::InfiniteDuration()),
      restart_backoff_(kRestartBackoff) {}

void JobTimers::Placed(absl::Time now, v1::TrainJobInfo* info) const {
  if (time_limit_ == absl::ZeroDuration() || info->time_limit_ends_unix_ms() != 0) return;
  info->set_time_limit_ends_unix_ms(absl::ToUnixMillis(now + time_limit_));
}

std::optional<std::string> JobTimers::TimedOut(absl::Time now, const v1::TrainJobInfo& info) const {
  if (now < LimitEnds(info)) return std::nullopt;
  return absl::StrCat("time limit ", absl::FormatDuration(time_limit_), " reached");
}

void JobTimers::AttemptStarted(absl::Time now) {
  attempt_started_ = now;
  last_progress_ = absl::InfiniteFuture();
}

void JobTimers::Progressed(absl::Time now) { last_progress_ = now; }

std::optional<std::string> JobTimers::Hung(absl::Time now) const {
  if (now < ProgressDue()) return std::nullopt;
  return absl::StrCat("no progress for ", absl::FormatDuration(progress_timeout_),
                      " (failure_config.progress_timeout_s)");
}

absl::Time JobTimers::LimitEnds(const v1::TrainJobInfo& info) {
  return info.time_limit_ends_unix_ms() == 0 ? absl::InfiniteFuture()
                                             : absl::FromUnixMillis(info.time_limit_ends_unix_ms());
}

absl::Duration JobTimers::RestartDelay(absl::Time now) {
  // Counted once per attempt that ran: a launch failing after it did not.
  if (now - std::exchange(attempt_started_, absl::InfiniteFuture()) >= kHealthyRun) {
    restart_backoff_.Reset();
  }
  return restart_backoff_.Next();
}

}  // namespace berth
