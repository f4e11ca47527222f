// Test support: TLS certificates made by the openssl CLI at test time, for tests that speak TLS to
// a real coordinator on loopback.
#ifndef FORGE_TESTS_SUPPORT_TLS_CERTIFICATES_H_
#define FORGE_TESTS_SUPPORT_TLS_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace forge::testing {

// Writes into `directory`: a CA (ca.pem, ca.key), a server certificate it signs for localhost and
// 127.0.0.1 (server.pem, server.key), a client certificate it signs (client.pem, client.key), and
// an unrelated CA (other.pem, other.key); openssl's output goes to openssl.log there. Internal
// naming that log when openssl fails.
absl::Status WriteTestCertificates(const std::string& directory);

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_TLS_CERTIFICATES_H_
