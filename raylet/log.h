// One-line progress log of the raylet, on stderr: registrations, bundle
// changes, worker starts and exits. Lines are written whole (one fprintf),
// so lines from different threads never interleave.
#ifndef BERTH_RAYLET_LOG_H_
#define BERTH_RAYLET_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace berth {

template <typename... Args>
void RayletLog(const Args&... args) {
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                   " berth-raylet: ", args..., "\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace berth

#endif  // BERTH_RAYLET_LOG_H_
