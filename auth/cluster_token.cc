#include "auth/cluster_token.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace berth {
namespace {

constexpr char kBearer[] = "Bearer ";

// Compares without stopping at the first difference.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::string> LoadClusterToken(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, flag);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < 16)
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": token shorter than 16 characters"));
  return token;
}

std::string NewSecretToken() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 8; ++i) absl::StrAppendFormat(&token, "%08x", random());
  return token;
}

std::optional<std::string> BearerToken(const grpc::ServerContextBase* context) {
  if (context == nullptr) return std::nullopt;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, kBearer)) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<std::string> CreateClusterToken(const std::string& path) {
  const std::string token = NewSecretToken();
  if (absl::Status s = WriteSecretFile(path, token + "\n"); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot write the cluster token"));
  }
  return token;
}

grpc::Status CheckClusterToken(const grpc::ServerContextBase* context, const std::string& token) {
  if (token.empty() || context == nullptr) return grpc::Status::OK;
  if (std::optional<std::string> carried = BearerToken(context);
      carried && SameSecret(*carried, token)) {
    return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      "missing or wrong cluster token (authorization: Bearer metadata; berth --token-file)");
}

void AttachClusterToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", kBearer + token);
}

}  // namespace berth
