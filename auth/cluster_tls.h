// ClusterTls: TLS on berth's gRPC endpoints, and the roles its certificates
// carry. One cluster CA signs three kinds of certificate; the role is the
// certificate's common name and a DNS name in its subjectAltName:
//   berth-head    the head: serves users, nodes and trainers; calls raylets;
//   berth-node    a raylet: serves only the head; registers with the head;
//   berth-client  a user, trainer or autoscaler (optional: the token is
//                 what authenticates them).
// Clients check the server's certificate against the role they expect
// (the TLS target name is the role, not the host), so one head certificate
// serves any address the head is reached at, and a raylet or client
// certificate cannot pass for the head.
//
// Promises: TLS is off when no CA file is given (bare daemons, unit tests);
// when on, a raylet requires a verified client certificate and refuses every
// call whose peer is not the head; private keys are never read from a file
// group or others can read; CreateClusterCertificates writes every file with
// mode 0600.
#ifndef BERTH_AUTH_CLUSTER_TLS_H_
#define BERTH_AUTH_CLUSTER_TLS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace berth {

enum class TlsRole { kHead, kNode, kClient };
// "berth-head", "berth-node", "berth-client".
const char* TlsRoleName(TlsRole role);

// Paths from the --tls-ca-file, --tls-cert-file and --tls-key-file flags.
struct TlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// What a daemon or client speaks: plaintext, or TLS with these PEMs.
struct TlsConfig {
  bool enabled = false;
  std::string ca_pem;    // verifies the other side
  std::string cert_pem;  // our certificate (optional for clients)
  std::string key_pem;

  // Server credentials: insecure when off; else the server's certificate,
  // and client certificates verified against the CA when presented
  // (`require_client_certificate`: refused without one).
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(bool require_client_certificate) const;
  // Channel credentials: insecure when off; else the CA and, if set, our
  // certificate.
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Makes a channel to a server of `server_role` at `address`, or to
  // whichever of a list of heads is active (common/head_addresses.h).
  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, TlsRole server_role,
                                             grpc::ChannelArguments args = {}) const;
};

// Reads the files. No CA file: TLS off (then a certificate or key is an
// error). A certificate needs its key and the other way round; a server
// (`need_certificate`) needs both. Errors name the flag.
absl::StatusOr<TlsConfig> LoadTlsConfig(const TlsFiles& files, bool need_certificate);

// The files of `role` in a directory written by CreateClusterCertificates.
TlsFiles ClusterTlsFiles(const std::string& dir, TlsRole role);

// Writes a fresh CA (ca.crt, ca.key) and a certificate and key per role
// (head.crt, head.key, node.crt, ...) into `dir`, every file mode 0600.
// Certificates name the role, localhost, 127.0.0.1 and `hosts` (DNS names
// or IP addresses). CA valid 10 years, the others 2 years.
absl::Status CreateClusterCertificates(const std::string& dir,
                                       const std::vector<std::string>& hosts = {});

// OK when TLS is off, `context` is null (an in-process call) or the peer
// presented a verified certificate of `role`; PERMISSION_DENIED naming
// `what` (the RPC) otherwise.
grpc::Status CheckPeerRole(const grpc::ServerContextBase* context, const TlsConfig& tls,
                           TlsRole role, absl::string_view what);

}  // namespace berth

#endif  // BERTH_AUTH_CLUSTER_TLS_H_
