// TCP addresses and ports of the raylet: "host:port" parsing and port
// reservation.
//
// A reservation is a socket bound (never listening) with SO_REUSEPORT: it
// keeps the kernel from handing the port to anyone else while it is open,
// yet lets a gRPC server (which also sets SO_REUSEPORT) bind the same port.
// That is how the raylet learns its port before its server starts, and how
// AllocatePort finds a free one.
#ifndef BERTH_RAYLET_TCP_PORT_H_
#define BERTH_RAYLET_TCP_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

struct HostPort {
  std::string host;  // without brackets, e.g. "127.0.0.1", "::1", "node-3"
  uint16_t port = 0;
  // "host:port", with brackets around IPv6 hosts.
  std::string ToString() const;
};

// "host:port" or "[v6]:port". `field` names the input in errors.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view field);

class TcpPortReservation {
 public:
  // Binds `host`:`port` (0 = any free port). UNAVAILABLE if that fails.
  static absl::StatusOr<TcpPortReservation> Reserve(const std::string& host, uint16_t port);
  TcpPortReservation(TcpPortReservation&& other) noexcept;
  TcpPortReservation& operator=(TcpPortReservation&& other) noexcept;
  ~TcpPortReservation();

  uint16_t port() const { return port_; }

 private:
  TcpPortReservation(int fd, uint16_t port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace berth

#endif  // BERTH_RAYLET_TCP_PORT_H_
