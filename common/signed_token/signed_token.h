// Signed bearer tokens: an owner, a role, an expiry and optional caps, signed with a secret the
// coordinator holds (HMAC-SHA256, OpenSSL's libcrypto), so that tokens can be handed out without
// editing a token file and expire by themselves.
//
// Format: "forge1.<payload>.<mac>", both parts unpadded base64url. The payload is the text
// "OWNER ROLE exp=UNIX_SECONDS [id=ID] [CAP...]" (the token file's fields after the token, plus the
// expiry and the token's id); the mac is HMAC-SHA256(secret, "forge1.<payload>"). Verify
// recomputes the mac and compares it in constant time (CRYPTO_memcmp) before it reads the payload.
//
// Token ids name a token for revocation (server/revocation) without its secret text: SignToken
// writes claims.id (MintTokenId(): 16 random hex digits); a token without one (signed before ids
// existed, or a token file's token) has TokenId() = the first 16 hex digits of its SHA-256, which
// is what its claims' id is too, so every token has exactly one id.
//
// The secret is a file of at least 32 bytes (`openssl rand -hex 32 > token.secret`); trailing
// whitespace is not part of it. Anyone holding it can mint any token, admin included: it is as
// sensitive as the coordinator's key.
//
// Errors: Verify says Unauthenticated for a token that is malformed, signed with another secret,
// or expired (naming when); InvalidArgument for claims Sign cannot encode (an owner or role with
// whitespace, an empty one).
#ifndef FORGE_COMMON_SIGNED_TOKEN_SIGNED_TOKEN_H_
#define FORGE_COMMON_SIGNED_TOKEN_SIGNED_TOKEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace forge {

// What a signed token says. Caps are "KEY=N" strings, as in a token file line; their meaning is
// the server's (server/auth/auth.h).
struct TokenClaims {
  std::string owner;
  std::string role;
  absl::Time expires;
  std::vector<std::string> caps;
  // The token's id (hex digits; empty when signing: the token carries none).
  std::string id;
};

// "forge1.", the prefix every signed token starts with (a token-file token may not).
inline constexpr absl::string_view kSignedTokenPrefix = "forge1.";
inline constexpr size_t kMinTokenSecretBytes = 32;

// 16 random hex digits (OpenSSL's RAND_bytes): the id of a token about to be signed.
std::string MintTokenId();

// The id of `token` without checking its signature: the id= of a signed token's payload, or the
// digest id of a token that carries none. InvalidArgument for a signed token whose payload does
// not decode.
absl::StatusOr<std::string> TokenId(absl::string_view token);

// The secret from `path`; InvalidArgument when it is unreadable or shorter than 32 bytes.
absl::StatusOr<std::string> ReadTokenSecret(const std::string& path);

// A token carrying `claims`, signed with `secret`.
absl::StatusOr<std::string> SignToken(absl::string_view secret, const TokenClaims& claims);

// The claims of `token` when `secret` signed it and it has not expired at `now`; their id is
// TokenId(token).
absl::StatusOr<TokenClaims> VerifyToken(absl::string_view secret, absl::string_view token,
                                        absl::Time now);

}  // namespace forge

#endif  // FORGE_COMMON_SIGNED_TOKEN_SIGNED_TOKEN_H_
