#include "common/tls/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsOptions& options) {
  if (!options.tls) {
    if (!options.token.empty()) {
      return absl::InvalidArgumentError(
          "a token is configured but TLS is off: refusing to send it in plaintext");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate and its key go together");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.ca_file.empty()) {
    FORGE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(options.ca_file, "tls-ca"));
  }
  if (!options.cert_file.empty()) {
    FORGE_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPemFile(options.cert_file, "tls-cert"));
    FORGE_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPemFile(options.key_file, "tls-key"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(ssl);
  if (options.token.empty()) return credentials;
  return grpc::CompositeChannelCredentials(credentials,
                                           grpc::AccessTokenCredentials(options.token));
}

}  // namespace forge
