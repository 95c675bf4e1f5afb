#include "auth/cluster_tls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/head_addresses.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/auth_context.h"

namespace berth {
namespace {

// OpenSSL objects with their free functions.
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Bio = std::unique_ptr<BIO, BioFree>;

constexpr long kDay = 24L * 3600;

// Common name (and DNS name) and file stem of each role.
struct RoleNames {
  const char* common_name;
  const char* file_stem;
};
RoleNames NamesOf(TlsRole role) {
  switch (role) {
    case TlsRole::kHead:
      return {"berth-head", "head"};
    case TlsRole::kNode:
      return {"berth-node", "node"};
    case TlsRole::kClient:
      break;
  }
  return {"berth-client", "client"};
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr)
    return absl::InternalError(absl::StrCat("certificate extension ", OBJ_nid2sn(nid), "=", value));
  const bool added = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added ? absl::OkStatus() : absl::InternalError("adding a certificate extension");
}

// A certificate for `common_name` with `key`, signed by `issuer_key` (and
// `issuer`; null: self-signed).
absl::StatusOr<Cert> MakeCertificate(const std::string& common_name, EVP_PKEY* key, X509* issuer,
                                     EVP_PKEY* issuer_key, long valid_days,
                                     const std::vector<std::pair<int, std::string>>& extensions) {
  Cert cert(X509_new());
  if (!cert) return absl::InternalError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return absl::InternalError("RAND_bytes");
  serial[0] &= 0x7f;  // a positive serial
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // tolerate small clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), valid_days * kDay);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("berth"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  for (const auto& [nid, value] : extensions) {
    if (absl::Status s =
            AddExtension(cert.get(), issuer != nullptr ? issuer : cert.get(), nid, value);
        !s.ok()) {
      return s;
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return absl::InternalError("X509_sign");
  return cert;
}

std::string CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

bool LooksLikeIp(const std::string& host) {
  return !host.empty() && (host.find(':') != std::string::npos ||
                           host.find_first_not_of("0123456789.") == std::string::npos);
}

}  // namespace

const char* TlsRoleName(TlsRole role) { return NamesOf(role).common_name; }

std::shared_ptr<grpc::ServerCredentials> TlsConfig::ServerCredentials(
    bool require_client_certificate) const {
  if (!enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      require_client_certificate ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                 : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ca_pem;
  options.pem_key_cert_pairs.push_back({key_pem, cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> TlsConfig::ChannelCredentials() const {
  if (!enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  options.pem_private_key = key_pem;
  options.pem_cert_chain = cert_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> TlsConfig::MakeChannel(const std::string& address,
                                                      TlsRole server_role,
                                                      grpc::ChannelArguments args) const {
  if (enabled) args.SetSslTargetNameOverride(TlsRoleName(server_role));
  if (SplitHeadAddresses(address).size() < 2) {
    return grpc::CreateCustomChannel(address, ChannelCredentials(), args);
  }
  // A head and its standbys: calls go to the one whose health is SERVING
  // (gRPC's client-side health checking needs round_robin), and wait for
  // one within their deadline: a call made during a failover reaches the
  // new head as soon as it serves (waiting also keeps the channel reading
  // the heads' health, which an idle channel checks only every few seconds).
  absl::StatusOr<std::string> target = HeadsTarget(address, "address");
  // A head cut off by the network sends no reset: pings find its
  // connection dead within seconds, so calls stop going to it (the heads
  // allow pings this often, head_main.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kHeadKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kHeadKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetServiceConfigJSON(
      R"({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""},)"
      R"( "methodConfig": [{"name": [{}], "waitForReady": true}]})");
  // An address that does not resolve makes a channel that fails its calls
  // with the reason, as a single bad address does.
  return grpc::CreateCustomChannel(target.ok() ? *target : address, ChannelCredentials(), args);
}

absl::StatusOr<TlsConfig> LoadTlsConfig(const TlsFiles& files, bool need_certificate) {
  TlsConfig config;
  if (files.ca_file.empty()) {
    if (!files.cert_file.empty() || !files.key_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-ca-file: required with --tls-cert-file and --tls-key-file");
    }
    return config;
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(files.cert_file.empty()
                                          ? "--tls-cert-file: required with --tls-key-file"
                                          : "--tls-key-file: required with --tls-cert-file");
  }
  if (need_certificate && files.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert-file: a server with --tls-ca-file needs its certificate and key");
  }
  config.enabled = true;
  config.ca_pem = ReadFileOrEmpty(files.ca_file);
  if (config.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-ca-file ", files.ca_file, ": no PEM certificate"));
  }
  if (!files.cert_file.empty()) {
    config.cert_pem = ReadFileOrEmpty(files.cert_file);
    if (config.cert_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-cert-file ", files.cert_file, ": no PEM certificate"));
    }
    absl::StatusOr<std::string> key = ReadSecretFile(files.key_file, "--tls-key-file");
    if (!key.ok()) return key.status();
    if (key->find("PRIVATE KEY-----") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-key-file ", files.key_file, ": no PEM private key"));
    }
    config.key_pem = *std::move(key);
  }
  return config;
}

TlsFiles ClusterTlsFiles(const std::string& dir, TlsRole role) {
  return TlsFiles{absl::StrCat(dir, "/ca.crt"),
                  absl::StrCat(dir, "/", NamesOf(role).file_stem, ".crt"),
                  absl::StrCat(dir, "/", NamesOf(role).file_stem, ".key")};
}

absl::Status CreateClusterCertificates(const std::string& dir,
                                       const std::vector<std::string>& hosts) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return absl::UnavailableError(absl::StrCat(dir, ": cannot create"));
  Pkey ca_key(EVP_EC_gen("P-256"));
  if (!ca_key) return absl::InternalError("generating the CA key");
  absl::StatusOr<Cert> ca =
      MakeCertificate("berth-cluster-ca", ca_key.get(), nullptr, ca_key.get(), 3650,
                      {{NID_basic_constraints, "critical,CA:TRUE"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"}});
  if (!ca.ok()) return ca.status();
  if (absl::Status s = WriteSecretFile(absl::StrCat(dir, "/ca.crt"), CertPem(ca->get())); !s.ok())
    return s;
  if (absl::Status s = WriteSecretFile(absl::StrCat(dir, "/ca.key"), KeyPem(ca_key.get())); !s.ok())
    return s;
  for (TlsRole role : {TlsRole::kHead, TlsRole::kNode, TlsRole::kClient}) {
    std::vector<std::string> names = {absl::StrCat("DNS:", TlsRoleName(role)), "DNS:localhost",
                                      "IP:127.0.0.1"};
    for (const std::string& host : hosts)
      names.push_back(absl::StrCat(LooksLikeIp(host) ? "IP:" : "DNS:", host));
    Pkey key(EVP_EC_gen("P-256"));
    if (!key) return absl::InternalError("generating a key");
    absl::StatusOr<Cert> cert =
        MakeCertificate(TlsRoleName(role), key.get(), ca->get(), ca_key.get(), 730,
                        {{NID_basic_constraints, "critical,CA:FALSE"},
                         {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                         {NID_ext_key_usage, "serverAuth,clientAuth"},
                         {NID_authority_key_identifier, "keyid"},
                         {NID_subject_alt_name, absl::StrJoin(names, ",")}});
    if (!cert.ok()) return cert.status();
    const TlsFiles files = ClusterTlsFiles(dir, role);
    if (absl::Status s = WriteSecretFile(files.cert_file, CertPem(cert->get())); !s.ok()) return s;
    if (absl::Status s = WriteSecretFile(files.key_file, KeyPem(key.get())); !s.ok()) return s;
  }
  return absl::OkStatus();
}

grpc::Status CheckPeerRole(const grpc::ServerContextBase* context, const TlsConfig& tls,
                           TlsRole role, absl::string_view what) {
  if (!tls.enabled || context == nullptr) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth != nullptr) {
    for (const grpc::string_ref& name : auth->FindPropertyValues("x509_common_name")) {
      if (absl::string_view(name.data(), name.size()) == TlsRoleName(role)) return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(what, ": only a peer with a ", TlsRoleName(role),
                                   " certificate of this cluster's CA may call this"));
}

}  // namespace berth
