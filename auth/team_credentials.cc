#include "auth/team_credentials.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "auth/cluster_token.h"

namespace berth {

std::string TeamCredentials::Digest(const std::string& token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

TeamCredentials::Issued TeamCredentials::Mint() {
  Issued issued;
  issued.token = NewSecretToken();
  issued.digest = Digest(issued.token);
  return issued;
}

void TeamCredentials::Add(const std::string& digest, const std::string& team) {
  absl::MutexLock lock(&mu_);
  team_of_digest_[digest] = team;
}

std::vector<std::string> TeamCredentials::Revoke(const std::string& team) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> revoked;
  for (const auto& [digest, owner] : team_of_digest_) {
    if (owner == team) revoked.push_back(digest);
  }
  for (const std::string& digest : revoked) team_of_digest_.erase(digest);
  return revoked;
}

std::optional<std::string> TeamCredentials::TeamOf(const grpc::ServerContextBase* context) const {
  std::optional<std::string> token = BearerToken(context);
  if (!token) return std::nullopt;
  // A digest compared by a hash table lookup leaks nothing of the token.
  const std::string digest = Digest(*token);
  absl::MutexLock lock(&mu_);
  auto it = team_of_digest_.find(digest);
  if (it == team_of_digest_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, size_t> TeamCredentials::Teams() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, size_t> teams;
  for (const auto& [digest, team] : team_of_digest_) ++teams[team];
  return teams;
}

}  // namespace berth
