// Admission: who may call a gRPC service, decided once for every method of
// the service before its handler runs, so no handler checks a token or a
// certificate itself.
//
// A call from the network must carry the cluster token (when the cluster has
// one), or a team's token (TeamCredentials) for a method teams may call,
// and, where the policy names a TLS role for the method (or for every
// method), come from a peer with a verified certificate of that role. A
// refused call gets UNAUTHENTICATED (token) or PERMISSION_DENIED (a team's
// token for another method, a role) naming the method, and its handler
// never runs. Calls of a handler from
// inside the process (no ServerContext) are not checked.
//
// gRPC C++ offers no hook that can refuse a call before its handler on an
// insecure server (an AuthMetadataProcessor needs TLS; interceptors cannot
// end a call), so Admitted<Service> wraps every method handler the generated
// service registers, a method added to the proto included: a refused call
// reaches gRPC's handler with an error status, which answers it without
// calling the method, as for a request that does not parse.
//
//   class NodeServiceImpl final : public Admitted<v1::NodeService::Service> {
//    public:
//     explicit NodeServiceImpl(AdmissionPolicy policy) : Admitted(std::move(policy)) {}
//     ...
//   };
#ifndef BERTH_AUTH_ADMISSION_H_
#define BERTH_AUTH_ADMISSION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_set.h"
#include "auth/cluster_tls.h"
#include "auth/team_credentials.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace berth {

struct AdmissionPolicy {
  // Empty: no token is asked for (authentication off).
  std::string cluster_token;
  TlsConfig tls;
  // The TLS role every method asks of its caller, if any...
  std::optional<TlsRole> role_of_every_method;
  // ...and those of single methods, by their short name ("RegisterNode").
  absl::flat_hash_map<std::string, TlsRole> role_of_method;
  // Teams' tokens (not owned; null: none) and the methods they may call.
  const TeamCredentials* teams = nullptr;
  absl::flat_hash_set<std::string> team_methods;
  // Asked first, when set: OK when the service answers calls now, else the
  // status every call gets (a standby head's UNAVAILABLE naming the active
  // one; a raylet's refusal of a head an epoch behind).
  std::function<grpc::Status(const grpc::ServerContextBase&)> gate;

  // OK, or why the call of `method` (short name) is refused.
  grpc::Status Admit(const grpc::ServerContextBase& context, absl::string_view method) const;
};

// Wraps every method `service` has registered so that calls `policy`
// refuses never reach their handlers. Before the service is registered with
// a server.
void AdmitEveryMethod(grpc::Service* service, AdmissionPolicy policy);

// A generated service (v1::X::Service) whose every method is admitted by a
// policy, wrapped once, when the service is constructed.
template <class Service>
class Admitted : public Service {
 protected:
  explicit Admitted(AdmissionPolicy policy) { AdmitEveryMethod(this, std::move(policy)); }
};

}  // namespace berth

#endif  // BERTH_AUTH_ADMISSION_H_
