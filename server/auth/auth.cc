#include "server/auth/auth.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"
#include "common/tls/tls.h"

namespace forge::server {
namespace {

constexpr size_t kMinTokenLength = 16;

// Sets the cap named by "KEY=N" on `grant`.
absl::Status ParseCap(absl::string_view field, Caller& grant) {
  std::pair<absl::string_view, absl::string_view> key_value = absl::StrSplit(field, '=');
  int64_t value = 0;
  if (!absl::SimpleAtoi(key_value.second, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", field, "\": a cap is KEY=N with N >= 0"));
  }
  if (key_value.first == "max-priority" && value <= INT32_MAX) {
    grant.max_priority = static_cast<int32_t>(value);
  } else if (key_value.first == "max-trials") {
    grant.max_trials = value;
  } else if (key_value.first == "max-wall-seconds") {
    grant.max_wall_seconds = value;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", field, "\": caps are max-priority, max-trials and max-wall-seconds"));
  }
  return absl::OkStatus();
}

// OK when `value` is within `cap` (0: no cap). For budgets `zero_is_unlimited`: 0 asks for no
// limit, which is over every cap.
absl::Status CheckCap(absl::string_view name, int64_t value, int64_t cap, bool zero_is_unlimited,
                      const Caller& caller) {
  if (cap == 0 || (value <= cap && !(zero_is_unlimited && value == 0))) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(name, " ", value, zero_is_unlimited && value == 0 ? " (unlimited)" : "",
                   " is over the cap of owner \"", caller.owner, "\" (", cap, ")"));
}

}  // namespace

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role role : {Role::kRead, Role::kSubmit, Role::kAdmin, Role::kWorker}) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role \"", name, "\" is none of read, submit, admin, worker"));
}

absl::StatusOr<Caller> CallerFromClaims(const TokenClaims& claims) {
  Caller caller{.authenticated = true, .owner = claims.owner};
  FORGE_ASSIGN_OR_RETURN(caller.role, ParseRole(claims.role));
  for (const std::string& cap : claims.caps) FORGE_RETURN_IF_ERROR(ParseCap(cap, caller));
  return caller;
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kSubmit:
      return "submit";
    case Role::kAdmin:
      return "admin";
    case Role::kWorker:
      return "worker";
  }
  return "unknown";
}

absl::StatusOr<Authenticator> Authenticator::Parse(absl::string_view text,
                                                   absl::string_view origin) {
  Authenticator authenticator;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    auto error = [&](absl::string_view message) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, " of ", origin, ": ", message));
    };
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 3) return error("expected TOKEN OWNER ROLE [caps]");
    if (fields[0].size() < kMinTokenLength) {
      return error(absl::StrCat("a token has at least ", kMinTokenLength, " characters"));
    }
    if (absl::StartsWith(fields[0], kSignedTokenPrefix)) {
      return error(absl::StrCat("a token may not start with \"", kSignedTokenPrefix,
                                "\", the prefix of signed tokens"));
    }
    Caller grant{.authenticated = true, .owner = std::string(fields[1])};
    absl::StatusOr<Role> role = ParseRole(fields[2]);
    if (!role.ok()) return error(role.status().message());
    grant.role = *role;
    for (size_t i = 3; i < fields.size(); ++i) {
      if (absl::Status cap = ParseCap(fields[i], grant); !cap.ok()) return error(cap.message());
    }
    FORGE_ASSIGN_OR_RETURN(grant.token_id, TokenId(fields[0]));
    if (!authenticator.grants_.emplace(Sha256Hex(fields[0]), std::move(grant)).second) {
      return error("the token appears on an earlier line too");
    }
  }
  return authenticator;
}

absl::StatusOr<Authenticator> Authenticator::FromFile(const std::string& path) {
  FORGE_ASSIGN_OR_RETURN(std::string text, ReadPemFile(path, "token file"));
  return Parse(text, path);
}

absl::StatusOr<Caller> Authenticator::Authorize(const grpc::ServerContext& context,
                                                std::initializer_list<Role> roles) const {
  if (open()) return Caller{};
  const auto& metadata = context.client_metadata();
  auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    return absl::UnauthenticatedError(
        "no credentials: send \"authorization: Bearer TOKEN\" (forge --token, FORGE_TOKEN)");
  }
  absl::string_view value(header->second.data(), header->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ")) {
    return absl::UnauthenticatedError("the authorization header is not \"Bearer TOKEN\"");
  }
  return AuthorizeToken(value, roles);
}

absl::StatusOr<Caller> Authenticator::AuthorizeToken(absl::string_view token,
                                                     std::initializer_list<Role> roles) const {
  if (open()) return Caller{};
  Caller caller;
  if (!secret_.empty() && absl::StartsWith(token, kSignedTokenPrefix)) {
    FORGE_ASSIGN_OR_RETURN(const TokenClaims claims, VerifyToken(secret_, token, absl::Now()));
    absl::StatusOr<Caller> signed_caller = CallerFromClaims(claims);
    // Signed with our secret but not understood (a role of a newer build): no access.
    if (!signed_caller.ok()) return absl::UnauthenticatedError(signed_caller.status().message());
    caller = *std::move(signed_caller);
    caller.token_id = claims.id;
  } else {
    auto grant = grants_.find(Sha256Hex(token));
    if (grant == grants_.end()) return absl::UnauthenticatedError("unknown token");
    caller = grant->second;
  }
  if (revocations_ != nullptr) {
    FORGE_RETURN_IF_ERROR(
        revocations_->Check(caller.token_id, caller.role == Role::kWorker ? caller.owner : ""));
  }
  if (std::find(roles.begin(), roles.end(), caller.role) == roles.end()) {
    std::vector<std::string> allowed;
    for (Role role : roles) allowed.emplace_back(RoleName(role));
    return absl::PermissionDeniedError(absl::StrCat("\"", caller.owner, "\" has role ",
                                                    RoleName(caller.role), "; the call needs ",
                                                    absl::StrJoin(allowed, " or ")));
  }
  return caller;
}

absl::Status CheckOwner(const Caller& caller, absl::string_view owner, absl::string_view job_id) {
  if (caller.SeesAll() || caller.owner == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("job ", job_id, " belongs to another owner than \"", caller.owner, "\""));
}

absl::Status CheckWorkerId(const Caller& caller, absl::string_view worker_id) {
  if (!caller.authenticated) return absl::OkStatus();
  if (worker_id == caller.owner || absl::StartsWith(worker_id, absl::StrCat(caller.owner, "/"))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("worker identity \"", caller.owner,
                                                  "\" may not act as worker \"", worker_id,
                                                  "\" (only \"", caller.owner, "\" or \"",
                                                  caller.owner, "/...\")"));
}

absl::Status CheckCaps(const Caller& caller, int32_t priority, int64_t max_trials,
                       int64_t max_wall_seconds) {
  if (caller.SeesAll()) return absl::OkStatus();
  FORGE_RETURN_IF_ERROR(CheckCap("priority", priority, caller.max_priority, false, caller));
  FORGE_RETURN_IF_ERROR(
      CheckCap("budget.max_candidate_trials", max_trials, caller.max_trials, true, caller));
  return CheckCap("budget.max_wall_seconds", max_wall_seconds, caller.max_wall_seconds, true,
                  caller);
}

bool IsLoopbackAddress(absl::string_view listen) {
  absl::string_view host = listen.substr(0, listen.rfind(':'));
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& tls, absl::string_view listen, bool allow_insecure) {
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("tls.cert and tls.key go together: set both or neither");
  }
  if (tls.cert.empty()) {
    if (!tls.client_ca.empty()) {
      return absl::InvalidArgumentError("tls.client-ca needs tls.cert and tls.key");
    }
    if (!IsLoopbackAddress(listen) && !allow_insecure) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing plaintext gRPC on ", listen,
          ", which is not loopback: set tls.cert and tls.key, or --insecure to force plaintext"));
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(
      tls.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
      : tls.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  FORGE_ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(tls.key, "tls.key"));
  FORGE_ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(tls.cert, "tls.cert"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca.empty()) {
    FORGE_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPemFile(tls.client_ca, "tls.client-ca"));
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace forge::server
