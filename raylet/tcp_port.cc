#include "raylet/tcp_port.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {

std::string HostPort::ToString() const {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view field) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", text, "\" is not host:port"));
  }
  absl::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  uint32_t port = 0;
  if (host.empty() || !absl::SimpleAtoi(text.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", text, "\" is not host:port"));
  }
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

absl::StatusOr<TcpPortReservation> TcpPortReservation::Reserve(const std::string& host,
                                                               uint16_t port) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolving ", host, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int on = 1;
    sockaddr_storage bound = {};
    socklen_t length = sizeof(bound);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) == 0 &&
        bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      freeaddrinfo(addresses);
      const uint16_t bound_port =
          bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
      return TcpPortReservation(fd, bound_port);
    }
    error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(addresses);
  return absl::UnavailableError(
      absl::StrCat("binding ", HostPort{host, port}.ToString(), ": ", error));
}

TcpPortReservation::TcpPortReservation(TcpPortReservation&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

TcpPortReservation& TcpPortReservation::operator=(TcpPortReservation&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

TcpPortReservation::~TcpPortReservation() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace berth
