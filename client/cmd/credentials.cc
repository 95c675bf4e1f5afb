// berth credentials: a cluster's token and certificates, or a team's token.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "auth/cluster_token.h"
#include "client/cmd/command.h"
#include "common/files.h"

namespace berth {
namespace {

struct CredentialsFlags {
  std::string dir;
  std::vector<std::string> hosts;
  std::string team;
  std::string out;
  bool revoke = false;
};

// A team's token from the head (the cluster admin's token only), printed
// or written to --out with mode 0600; or every token of the team revoked.
int RunTeamCredentials(const Context& ctx, const CredentialsFlags& flags) {
  if (flags.revoke) {
    v1::RevokeTeamTokensRequest request;
    request.set_team(flags.team);
    return Print(
        ctx, ctx.client.RevokeTeamTokens(request), [&](const v1::RevokeTeamTokensResponse& r) {
          return absl::StrCat("revoked ", r.revoked(), " token(s) of team ", flags.team, "\n");
        });
  }
  v1::IssueTeamTokenRequest request;
  request.set_team(flags.team);
  absl::StatusOr<v1::IssueTeamTokenResponse> issued = ctx.client.IssueTeamToken(request);
  if (!issued.ok()) return HeadError(issued.status());
  if (flags.out.empty()) {
    if (ctx.json) return PrintJson(*issued);
    std::cout << issued->token() << "\n";
    return kExitOk;
  }
  if (absl::Status s = WriteSecretFile(flags.out, issued->token() + "\n"); !s.ok()) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("--out: ", s.message())));
  }
  std::cout << "wrote team " << flags.team << "'s token to " << flags.out
            << " (mode 0600); its users: berth --token-file " << flags.out << " ...\n";
  return kExitOk;
}

// A cluster token and a CA with head, node and client certificates, for
// clusters `berth up` does not start (Kubernetes, systemd); with --team, a
// team's token from the running head.
int RunCredentials(const Globals& globals, const CredentialsFlags& flags) {
  if (!flags.team.empty()) {
    return WithHead(globals, [&](const Context& ctx) { return RunTeamCredentials(ctx, flags); });
  }
  if (flags.dir.empty()) {
    return UsageError(
        absl::InvalidArgumentError("DIR: give a directory to write, or --team for a team token"));
  }
  std::error_code error;
  std::filesystem::create_directories(flags.dir, error);
  if (error)
    return UsageError(
        absl::InvalidArgumentError(absl::StrCat("DIR: ", flags.dir, ": ", error.message())));
  std::filesystem::permissions(flags.dir, std::filesystem::perms::owner_all, error);
  if (access((flags.dir + "/ca.crt").c_str(), F_OK) == 0) {
    return UsageError(absl::AlreadyExistsError(absl::StrCat(
        "DIR: ", flags.dir, " already holds a CA (ca.crt); remove it to make new credentials")));
  }
  if (absl::StatusOr<std::string> token = CreateClusterToken(flags.dir + "/token"); !token.ok()) {
    return UsageError(token.status());
  }
  if (absl::Status s = CreateClusterCertificates(flags.dir, flags.hosts); !s.ok())
    return UsageError(s);
  std::cout << "wrote " << flags.dir
            << "/{token,ca.crt,ca.key,head.crt,head.key,node.crt,node.key,client.crt,"
            << "client.key} (mode 0600)\n"
            << "head:   --token-file token --tls-ca-file ca.crt --tls-cert-file head.crt "
               "--tls-key-file head.key\n"
            << "raylet: --token-file token --tls-ca-file ca.crt --tls-cert-file node.crt "
               "--tls-key-file node.key\n"
            << "users:  BERTH_TOKEN_FILE=token BERTH_TLS_CA_FILE=ca.crt (keep ca.key offline)\n";
  return kExitOk;
}

}  // namespace

void AddCredentialsCommand(CLI::App& app, Action* action) {
  auto credentials = std::make_shared<CredentialsFlags>();
  CLI::App* credentials_cmd = app.add_subcommand(
      "credentials",
      "Write a cluster token, a CA and head/node/client certificates into DIR (mode 0600); "
      "with --team, get a team's token from the head");
  credentials_cmd->add_option("DIR", credentials->dir, "Directory to write");
  credentials_cmd->add_option("--host", credentials->hosts,
                              "Another DNS name or IP address the certificates name (repeatable)");
  credentials_cmd->add_option("--team", credentials->team,
                              "A token for this team: it may use only its queues' jobs and groups");
  credentials_cmd->add_option("--out", credentials->out,
                              "With --team: write the token to this file (mode 0600)");
  credentials_cmd->add_flag("--revoke", credentials->revoke,
                            "With --team: revoke every token of the team");
  OnChosenLocal(credentials_cmd, action, credentials, RunCredentials);
}

}  // namespace berth
