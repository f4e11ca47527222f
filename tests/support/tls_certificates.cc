#include "tests/support/tls_certificates.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace forge::testing {

absl::Status WriteTestCertificates(const std::string& directory) {
  const std::string& d = directory;
  std::ofstream(d + "/san.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "(cd ", d, " && openssl req -x509 ", ec, " -keyout ca.key -out ca.pem -days 1",
      " -subj /CN=forge-test-ca && openssl req ", ec,
      " -keyout server.key -out server.csr -subj /CN=localhost && openssl x509 -req",
      " -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1",
      " -extfile san.ext && openssl req ", ec,
      " -keyout client.key -out client.csr -subj /CN=forge-test-client && openssl x509 -req",
      " -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1",
      " && openssl req -x509 ", ec,
      " -keyout other.key -out other.pem -days 1 -subj /CN=other-ca) >", d, "/openssl.log 2>&1");
  if (std::system(script.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("openssl failed; see ", d, "/openssl.log"));
  }
  return absl::OkStatus();
}

}  // namespace forge::testing
