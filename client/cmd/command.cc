#include "client/cmd/command.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "auth/cluster_token.h"
#include "client/command_words.h"
#include "client/format.h"
#include "client/job_args.h"
#include "client/local_cluster.h"

namespace berth {
namespace {

// The cluster token to send: --token-file, else $BERTH_TOKEN_FILE, else the
// local cluster's when it has one; "" = none.
absl::StatusOr<std::string> ResolveClusterToken(const std::string& flag) {
  const char* env = std::getenv("BERTH_TOKEN_FILE");
  if (!flag.empty()) return LoadClusterToken(flag, "--token-file");
  if (env != nullptr && *env != '\0') return LoadClusterToken(env, "$BERTH_TOKEN_FILE");
  if (access(LocalTokenPath().c_str(), F_OK) == 0)
    return LoadClusterToken(LocalTokenPath(), "local cluster token");
  return std::string();
}

// TLS to the head: the --tls-* flags, else $BERTH_TLS_CA_FILE (with
// $BERTH_TLS_CERT_FILE and $BERTH_TLS_KEY_FILE), else the local cluster's
// client certificate when it has one; none = plaintext.
absl::StatusOr<TlsConfig> ResolveTls(const TlsFiles& flags) {
  if (!flags.ca_file.empty() || !flags.cert_file.empty() || !flags.key_file.empty()) {
    return LoadTlsConfig(flags, false);
  }
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value == nullptr ? "" : value);
  };
  if (!env("BERTH_TLS_CA_FILE").empty()) {
    absl::StatusOr<TlsConfig> tls = LoadTlsConfig(
        {env("BERTH_TLS_CA_FILE"), env("BERTH_TLS_CERT_FILE"), env("BERTH_TLS_KEY_FILE")}, false);
    if (!tls.ok())
      return absl::InvalidArgumentError(absl::StrCat("$BERTH_TLS_*: ", tls.status().message()));
    return tls;
  }
  const TlsFiles local = ClusterTlsFiles(LocalTlsDir(), TlsRole::kClient);
  if (access(local.ca_file.c_str(), F_OK) == 0) return LoadTlsConfig(local, false);
  return TlsConfig{};
}

}  // namespace

int HeadError(const absl::Status& status) {
  std::cerr << "berth: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
  return kExitHeadError;
}

void AddWaitFlag(CLI::App* cmd, std::string& wait, const std::string& what) {
  cmd->add_option("--wait", wait,
                  absl::StrCat("Wait until ", what, ", or for at most DURATION (300, 10m)"));
}

absl::StatusOr<absl::Duration> WaitDuration(const std::string& wait) {
  if (wait == kWaitUntilEnd) return absl::InfiniteDuration();
  if (int64_t plain = 0; absl::SimpleAtoi(wait, &plain) && plain >= 0) {
    return absl::Seconds(plain);  // a number is seconds, as it always was
  }
  absl::StatusOr<int64_t> seconds = ParseDurationSeconds(wait, "--wait", 0);
  if (!seconds.ok()) return seconds.status();
  return absl::Seconds(*seconds);
}

int UsageError(const absl::Status& status) {
  std::cerr << "berth: " << status.message() << "\n";
  return kExitUsage;
}

int PrintJson(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return HeadError(json.status());
  std::cout << *json;
  return kExitOk;
}

std::string StateDir() { return LocalStateDir(std::getenv("BERTH_HOME"), getuid()); }

// The local cluster's token: `berth up` and `berth start --head` write it.
std::string LocalTokenPath() { return StateDir() + "/token"; }

// The local cluster's CA and certificates: `berth up` and `berth start
// --head` write them (auth/cluster_tls.h).
std::string LocalTlsDir() { return StateDir() + "/tls"; }

absl::StatusOr<HeadClientOptions> ResolveClientOptions(const std::string& token_file,
                                                       const TlsFiles& tls_files) {
  HeadClientOptions options;
  absl::StatusOr<std::string> token = ResolveClusterToken(token_file);
  if (!token.ok()) return token.status();
  options.cluster_token = *std::move(token);
  absl::StatusOr<TlsConfig> tls = ResolveTls(tls_files);
  if (!tls.ok()) return tls.status();
  options.tls = *std::move(tls);
  return options;
}

int WithHead(const Globals& globals, const std::function<int(const Context&)>& run) {
  std::optional<LocalState> state;
  const char* env = std::getenv("BERTH_ADDRESS");
  // The state file matters only when nothing else names the head.
  if (globals.address.empty() && (env == nullptr || *env == '\0')) {
    absl::StatusOr<std::optional<LocalState>> read = ReadStateFile(StateFilePath(StateDir()));
    if (!read.ok()) return HeadError(read.status());
    state = *std::move(read);
  }
  const std::string address = ResolveHeadAddress(globals.address, env, state);
  absl::StatusOr<HeadClientOptions> resolved =
      ResolveClientOptions(globals.token_file, globals.tls);
  if (!resolved.ok()) return UsageError(resolved.status());
  HeadClientOptions options = *std::move(resolved);
  options.timeout = absl::Seconds(globals.timeout_seconds);
  absl::StatusOr<std::unique_ptr<HeadClient>> client = HeadClient::Create(address, options);
  // HeadClient names the field ("address: ..."); the user typed the flag.
  if (!client.ok()) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("--", client.status().message())));
  }
  return run(Context{**client, address, globals.json, options.timeout, options});
}

}  // namespace berth
