// ClusterToken: the shared secret every berth RPC carries as
// `authorization: Bearer <token>` metadata when a cluster runs with
// `--token-file`. Servers refuse a call without the right token with
// UNAUTHENTICATED before doing anything; clients attach it to every call.
//
// Promises: an empty token means authentication is off (the default of a
// bare daemon; `berth up` always sets one); the comparison takes the same
// time whatever the mismatch; a token file must not be readable by group or
// others, so a token is never read from a file others could read.
#ifndef BERTH_AUTH_CLUSTER_TOKEN_H_
#define BERTH_AUTH_CLUSTER_TOKEN_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace berth {

// Reads and trims the token of `path`; errors name `flag`.
absl::StatusOr<std::string> LoadClusterToken(const std::string& path, const std::string& flag);
// Writes a fresh random token (NewSecretToken) to `path` with mode 0600.
absl::StatusOr<std::string> CreateClusterToken(const std::string& path);
// A fresh random token: 32 bytes, hex.
std::string NewSecretToken();
// The bearer token a call carries (`authorization: Bearer <token>`), if any.
std::optional<std::string> BearerToken(const grpc::ServerContextBase* context);

// OK when `token` is empty, `context` is null (an in-process call) or the
// call carries the token; UNAUTHENTICATED otherwise.
grpc::Status CheckClusterToken(const grpc::ServerContextBase* context, const std::string& token);
// Adds the token's metadata to a call (nothing when `token` is empty).
void AttachClusterToken(grpc::ClientContext* context, const std::string& token);

}  // namespace berth

#endif  // BERTH_AUTH_CLUSTER_TOKEN_H_
