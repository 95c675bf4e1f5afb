// ServeOnLoopback: a real gRPC server for a unit test, on 127.0.0.1 at a
// port the kernel picks, serving one service (a fake raylet, a head
// service); the test talks to it through a stub over LoopbackChannel.
#ifndef BERTH_TESTS_UNIT_LOOPBACK_SERVER_H_
#define BERTH_TESTS_UNIT_LOOPBACK_SERVER_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace berth::testing {

// Null when it could not listen; *port is where it listens.
inline std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

inline std::shared_ptr<grpc::Channel> LoopbackChannel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

// A context for one call: every RPC has a deadline.
inline std::unique_ptr<grpc::ClientContext> CallContext(
    absl::Duration deadline = absl::Seconds(20)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return context;
}

}  // namespace berth::testing

#endif  // BERTH_TESTS_UNIT_LOOPBACK_SERVER_H_
