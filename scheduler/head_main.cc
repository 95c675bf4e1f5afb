// berth-head: the cluster's scheduler. Serves NodeService,
// PlacementGroupService and ClusterService (plus gRPC health and
// reflection) and runs the scheduling loop.
//
//   berth-head --listen 127.0.0.1:6380 [--port-file PATH]
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "common/files.h"
#include "scheduler/head_server.h"

int main(int argc, char** argv) {
  CLI::App app{"berth-head: the berth cluster scheduler"};
  std::string listen = "127.0.0.1:6380";
  std::string port_file;
  berth::HeadConfig config;
  int64_t rpc_timeout_ms = 2000;
  app.add_option("--listen", listen, "host:port to serve on (port 0 picks a free port)");
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  app.add_option("--heartbeat-period-ms", config.liveness.heartbeat_period_ms,
                 "how often raylets heartbeat")
      ->check(CLI::Range(10, 600000));
  app.add_option("--heartbeat-misses", config.liveness.misses,
                 "missed heartbeat periods before a node is DEAD")
      ->check(CLI::Range(1, 1000));
  app.add_option("--raylet-rpc-timeout-ms", rpc_timeout_ms, "deadline of each call to a raylet")
      ->check(CLI::Range(10, 600000));
  app.add_option("--committer-threads", config.committer_threads,
                 "two-phase commits run at once")
      ->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  config.raylet_rpc_timeout = absl::Milliseconds(rpc_timeout_ms);

  // Signals are taken by sigwait below, not by whichever thread they hit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  berth::HeadServer head(config);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(static_cast<berth::v1::NodeService::Service*>(&head));
  builder.RegisterService(static_cast<berth::v1::PlacementGroupService::Service*>(&head));
  builder.RegisterService(static_cast<berth::v1::ClusterService::Service*>(&head));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "berth-head: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  head.Start();
  if (!port_file.empty()) {
    if (absl::Status s = berth::WritePortFile(port_file, port); !s.ok()) {
      std::fprintf(stderr, "berth-head: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "berth-head: serving on port %d\n", port);

  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "berth-head: signal %d, shutting down\n", signal);
  head.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
