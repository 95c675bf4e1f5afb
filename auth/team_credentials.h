// TeamCredentials: bearer tokens bound to a team, as `berth credentials
// --team NAME` issues them. A call that carries one is the team's: the head
// admits it only to the methods a team may call (AdmissionPolicy), and its
// handlers let it use only the queues granted to the team
// (QueueConfig::MayUse); the cluster token stays the admin's.
//
// Promises: only a token's SHA-256 is kept, so the head's state store holds
// no usable token; tokens are 32 random bytes (hex); lookups take a lock of
// their own, never the head's; thread-safe.
#ifndef BERTH_AUTH_TEAM_CREDENTIALS_H_
#define BERTH_AUTH_TEAM_CREDENTIALS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"

namespace berth {

class TeamCredentials {
 public:
  struct Issued {
    std::string token;   // given to the team, once
    std::string digest;  // what is kept (hex SHA-256 of the token)
  };
  // A new token, not yet bound to a team (Add binds it).
  static Issued Mint();
  // Binds a token, by its digest, to `team` (a valid team name: the caller
  // checks it): a new one, or one written earlier.
  void Add(const std::string& digest, const std::string& team);
  // Forgets every token of `team`; returns their digests.
  std::vector<std::string> Revoke(const std::string& team);
  // The team whose token the call carries; nullopt when it carries none
  // (the cluster token, no token, an in-process call).
  std::optional<std::string> TeamOf(const grpc::ServerContextBase* context) const;
  // Tokens per team.
  std::map<std::string, size_t> Teams() const;

  static std::string Digest(const std::string& token);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> team_of_digest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth

#endif  // BERTH_AUTH_TEAM_CREDENTIALS_H_
