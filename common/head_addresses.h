// A cluster's heads as users and daemons name them: "HOST:PORT", or the
// active head and its standbys, "HOST:PORT,HOST:PORT" (--address,
// BERTH_ADDRESS, a raylet's --head). A client reaches whichever of them is
// active: one channel over all of them sends each call to a head whose gRPC
// health is SERVING (auth/cluster_tls.h MakeChannel), and a standby answers
// NOT_SERVING.
#ifndef BERTH_COMMON_HEAD_ADDRESSES_H_
#define BERTH_COMMON_HEAD_ADDRESSES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// How a standby head's UNAVAILABLE answer to every call begins (it goes on
// to name the active head).
inline constexpr char kStandbyHeadAnswer[] = "this head is a standby";

// How often a client of several heads pings each one's connection (and
// how long it waits for the answer): a head cut off by the network is
// found dead within twice this. Heads accept pings this often.
inline constexpr int kHeadKeepaliveMs = 2000;

// The addresses of a list, in order, blanks dropped.
std::vector<std::string> SplitHeadAddresses(absl::string_view list);

// The gRPC target that reaches every address of `list`: the address itself
// when there is one; else "ipv4:IP:PORT,..." (or ipv6:), host names
// resolved now. INVALID_ARGUMENT naming `field` for an address without a
// port or a name that does not resolve.
absl::StatusOr<std::string> HeadsTarget(absl::string_view list, absl::string_view field);

}  // namespace berth

#endif  // BERTH_COMMON_HEAD_ADDRESSES_H_
