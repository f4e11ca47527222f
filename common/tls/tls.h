// gRPC client credentials from file paths, shared by the programs that call the coordinator (the
// worker daemon, the coordinator's --probe): TLS with given or system roots, an optional client
// certificate (mTLS), and a bearer token sent as "authorization: Bearer TOKEN" on every call.
//
// A token needs TLS: gRPC sends call credentials only over a secure channel, so a token without
// TLS is InvalidArgument rather than silently dropped.
#ifndef FORGE_COMMON_TLS_TLS_H_
#define FORGE_COMMON_TLS_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace forge {

struct ClientTlsOptions {
  bool tls = false;
  std::string ca_file;    // PEM roots; empty: the system's
  std::string cert_file;  // client certificate chain (mTLS); empty: none
  std::string key_file;   // its private key
  std::string token;      // bearer token; empty: none
};

// The whole file; InvalidArgument naming `what` and the path when it cannot be read.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what);

// Insecure credentials when !tls (and no token); SSL credentials, composed with the token's call
// credentials when there is one, otherwise. InvalidArgument for an unreadable file, a cert without
// a key, or a token without TLS.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsOptions& options);

}  // namespace forge

#endif  // FORGE_COMMON_TLS_TLS_H_
