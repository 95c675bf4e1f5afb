#include "common/head_addresses.h"

#include <netdb.h>
#include <sys/socket.h>

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth {

std::vector<std::string> SplitHeadAddresses(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::string> HeadsTarget(absl::string_view list, absl::string_view field) {
  const std::vector<std::string> addresses = SplitHeadAddresses(list);
  if (addresses.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": no address"));
  if (addresses.size() == 1) return addresses[0];
  std::vector<std::string> resolved;
  std::string family;
  for (const std::string& address : addresses) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon + 1 == address.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", address, "' is not HOST:PORT"));
    }
    std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_family = family == "ipv6" ? AF_INET6 : (family == "ipv4" ? AF_INET : AF_UNSPEC);
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": cannot resolve '", host, "' of '", address, "'"));
    }
    char ip[INET6_ADDRSTRLEN] = {};
    if (found->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr, ip,
                sizeof(ip));
      resolved.push_back(absl::StrCat("[", ip, "]:", port));
      family = "ipv6";
    } else {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, ip, sizeof(ip));
      resolved.push_back(absl::StrCat(ip, ":", port));
      family = "ipv4";
    }
    freeaddrinfo(found);
  }
  return absl::StrCat(family, ":", absl::StrJoin(resolved, ","));
}

}  // namespace berth
