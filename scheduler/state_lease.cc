#include "scheduler/state_lease.h"

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace berth {

absl::StatusOr<absl::Duration> TakeLeaseTtlOption(absl::string_view& rest, absl::string_view url) {
  const size_t query = rest.find('?');
  if (query == absl::string_view::npos) return kDefaultLeaseTtl;
  absl::string_view option = rest.substr(query + 1);
  rest = rest.substr(0, query);
  int64_t seconds = 0;
  if (!absl::ConsumePrefix(&option, "lease-ttl=") || !absl::SimpleAtoi(option, &seconds) ||
      seconds < 2 || seconds > 600) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\": lease-ttl: want whole seconds from 2 to 600"));
  }
  return absl::Seconds(seconds);
}

}  // namespace berth
