// Who is calling the coordinator and what they may do: bearer tokens from a static token file,
// roles, per-owner caps, and the coordinator's TLS server credentials.
//
// Token file (auth.tokens): one grant per line, "TOKEN OWNER ROLE [max-priority=N]
// [max-trials=N] [max-wall-seconds=N]"; '#' starts a comment, blank lines are skipped. ROLE is
//   read    list and read its owner's jobs (graph, events, results) and the fleet
//   submit  read, plus submit jobs and cancel its owner's jobs
//   admin   everything on every owner's jobs; no caps
//   worker  the WorkerService only (Register, Heartbeat, Lease, Report); OWNER is the worker
//           identity, and the worker ids it may use are OWNER and OWNER/anything
// Tokens are at least 16 characters, do not start with "forge1." (signed tokens do), and may
// appear once. The caps bound a job's priority and
// budget (0 or absent: no cap); a job over a cap is refused, not trimmed.
//
// Signed tokens (auth.token-secret, common/signed_token): with a secret set, a token
// "forge1.<payload>.<mac>" is accepted when the secret signed it and it has not expired; its
// payload names OWNER, ROLE and caps as a token file line does. `forge admin mint-token` makes
// them. The token file and signed tokens work side by side.
//
// Revocation (server/revocation): with a Revocations list set, a token whose id (TokenId: a
// signed token's id=, else the first 16 hex digits of its SHA-256) is revoked, and any token of
// role worker whose identity is revoked, is UNAUTHENTICATED, checked on every call.
//
// A call sends its token as gRPC metadata "authorization: Bearer TOKEN". With neither a token file
// nor a secret the Authenticator is open: every caller is the anonymous caller, who passes every
// check and keeps the owner the client names (the loopback development mode; the coordinator warns
// at start).
//
// Errors: UNAUTHENTICATED without a known token, PERMISSION_DENIED for a role that may not make
// the call or a job of another owner.
#ifndef FORGE_SERVER_AUTH_AUTH_H_
#define FORGE_SERVER_AUTH_AUTH_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/signed_token/signed_token.h"
#include "grpcpp/grpcpp.h"
#include "server/revocation/revocation.h"

namespace forge::server {

enum class Role { kRead, kSubmit, kAdmin, kWorker };

// "read", "submit", "admin", "worker".
absl::string_view RoleName(Role role);
// The role of that name; InvalidArgument naming the roles otherwise.
absl::StatusOr<Role> ParseRole(absl::string_view name);

struct Caller {
  // False for the anonymous caller of an open Authenticator.
  bool authenticated = false;
  std::string owner;
  Role role = Role::kAdmin;
  // Caps on a submitted job; 0: none.
  int32_t max_priority = 0;
  int64_t max_trials = 0;
  int64_t max_wall_seconds = 0;
  // The id of the token that authenticated the call (TokenId); empty for the anonymous caller.
  std::string token_id;

  // The anonymous caller, or an admin: sees every owner's jobs.
  bool SeesAll() const { return !authenticated || role == Role::kAdmin; }
};

// The caller a signed token's claims describe (role and caps checked); InvalidArgument for an
// unknown role or a malformed cap.
absl::StatusOr<Caller> CallerFromClaims(const TokenClaims& claims);

class Authenticator {
 public:
  // Open: no tokens, every caller anonymous.
  Authenticator() = default;
  // Parses a token file's text; `origin` names it in errors ("line 3 of tokens.txt: ...").
  static absl::StatusOr<Authenticator> Parse(absl::string_view text, absl::string_view origin);
  static absl::StatusOr<Authenticator> FromFile(const std::string& path);

  // Also accepts tokens signed with `secret` (at least kMinTokenSecretBytes).
  void AcceptSignedTokens(std::string secret) { secret_ = std::move(secret); }

  // Consults `revocations` on every authenticated call (shared by the copies of this
  // Authenticator that the services hold).
  void CheckRevocations(std::shared_ptr<Revocations> revocations) {
    revocations_ = std::move(revocations);
  }
  // The list consulted, or null.
  Revocations* revocations() const { return revocations_.get(); }

  bool open() const { return grants_.empty() && secret_.empty(); }
  size_t size() const { return grants_.size(); }

  // The caller of `context`, checked to hold one of `roles`.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContext& context,
                                   std::initializer_list<Role> roles) const;
  // The caller holding `token` (what follows "Bearer "), checked like Authorize.
  absl::StatusOr<Caller> AuthorizeToken(absl::string_view token,
                                        std::initializer_list<Role> roles) const;

 private:
  // SHA-256 of the token (hex) -> grant: lookups compare digests, not the secrets.
  absl::flat_hash_map<std::string, Caller> grants_;
  std::string secret_;  // signs the tokens accepted besides the file's; empty: none
  std::shared_ptr<Revocations> revocations_;
};

// OK when `caller` may see a job of `owner` (its own, or the caller sees all); PERMISSION_DENIED
// naming the job otherwise.
absl::Status CheckOwner(const Caller& caller, absl::string_view owner, absl::string_view job_id);

// OK when `caller` (role worker) may act as `worker_id`: OWNER or OWNER/... Anonymous: any id.
absl::Status CheckWorkerId(const Caller& caller, absl::string_view worker_id);

// OK when a job's priority and budget fit the caller's caps; PERMISSION_DENIED naming the cap.
absl::Status CheckCaps(const Caller& caller, int32_t priority, int64_t max_trials,
                       int64_t max_wall_seconds);

// The coordinator's TLS settings (file paths; cert and key both set or both empty).
struct TlsFiles {
  std::string cert;
  std::string key;
  // PEM roots that sign client certificates; when set, clients may present one (mTLS), and must
  // when `require_client_cert`.
  std::string client_ca;
  bool require_client_cert = false;
};

// True when HOST of "HOST:PORT" is a loopback address (127.x.x.x, ::1, localhost).
bool IsLoopbackAddress(absl::string_view listen);

// The credentials to listen with: TLS when `tls.cert` is set; plaintext otherwise, which is
// InvalidArgument on a non-loopback `listen` unless `allow_insecure`. InvalidArgument for an
// unreadable file or a cert without a key.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& tls, absl::string_view listen, bool allow_insecure);

}  // namespace forge::server

#endif  // FORGE_SERVER_AUTH_AUTH_H_
