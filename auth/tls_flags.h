// The TLS flags every berth binary takes (--tls-ca-file, --tls-cert-file,
// --tls-key-file), so they read the same everywhere, and loading them with
// an error a user can act on.
#ifndef BERTH_AUTH_TLS_FLAGS_H_
#define BERTH_AUTH_TLS_FLAGS_H_

#include "CLI/CLI.hpp"
#include "auth/cluster_tls.h"

namespace berth {

inline void AddTlsFlags(CLI::App& app, TlsFiles& files, const char* certificate_role) {
  app.add_option("--tls-ca-file", files.ca_file,
                 "cluster CA (PEM): turns TLS on and verifies the other side; empty = plaintext");
  app.add_option("--tls-cert-file", files.cert_file,
                 std::string("this process's certificate (PEM, signed by the CA, common name ") +
                     certificate_role + ")");
  app.add_option("--tls-key-file", files.key_file, "its private key (PEM, mode 0600)");
}

}  // namespace berth

#endif  // BERTH_AUTH_TLS_FLAGS_H_
