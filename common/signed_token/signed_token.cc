#include "common/signed_token/signed_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status/status_macros.h"
#include "common/tls/tls.h"

namespace forge {
namespace {

constexpr absl::string_view kExpiryField = "exp=";

// HMAC-SHA256 of `message` under `secret`, raw bytes.
std::string Mac(absl::string_view secret, absl::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  return std::string(reinterpret_cast<const char*>(mac), length);
}

bool IsField(absl::string_view text) {
  return !text.empty() && std::none_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isspace(static_cast<unsigned char>(c));
  });
}

absl::Status Malformed(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("malformed signed token: ", why));
}

}  // namespace

absl::StatusOr<std::string> ReadTokenSecret(const std::string& path) {
  FORGE_ASSIGN_OR_RETURN(std::string secret, ReadPemFile(path, "token secret"));
  absl::StripTrailingAsciiWhitespace(&secret);
  if (secret.size() < kMinTokenSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("token secret ", path, " holds ", secret.size(), " bytes; it needs at least ",
                     kMinTokenSecretBytes, " (openssl rand -hex 32)"));
  }
  return secret;
}

absl::StatusOr<std::string> SignToken(absl::string_view secret, const TokenClaims& claims) {
  if (!IsField(claims.owner) || !IsField(claims.role)) {
    return absl::InvalidArgumentError(
        "a signed token's owner and role are non-empty and without whitespace");
  }
  for (const std::string& cap : claims.caps) {
    if (!IsField(cap) || absl::StartsWith(cap, kExpiryField)) {
      return absl::InvalidArgumentError(absl::StrCat("cap \"", cap, "\" is not KEY=N"));
    }
  }
  std::string payload = absl::StrCat(claims.owner, " ", claims.role, " ", kExpiryField,
                                     absl::ToUnixSeconds(claims.expires));
  for (const std::string& cap : claims.caps) absl::StrAppend(&payload, " ", cap);
  const std::string signed_part =
      absl::StrCat(kSignedTokenPrefix, absl::WebSafeBase64Escape(payload));
  return absl::StrCat(signed_part, ".", absl::WebSafeBase64Escape(Mac(secret, signed_part)));
}

absl::StatusOr<TokenClaims> VerifyToken(absl::string_view secret, absl::string_view token,
                                        absl::Time now) {
  if (!absl::StartsWith(token, kSignedTokenPrefix)) return Malformed("no forge1. prefix");
  const size_t dot = token.rfind('.');
  if (dot < kSignedTokenPrefix.size()) return Malformed("no signature");
  const absl::string_view signed_part = token.substr(0, dot);
  std::string mac;
  if (!absl::WebSafeBase64Unescape(token.substr(dot + 1), &mac)) {
    return Malformed("the signature is not base64url");
  }
  const std::string expected = Mac(secret, signed_part);
  if (mac.size() != expected.size() ||
      CRYPTO_memcmp(mac.data(), expected.data(), expected.size()) != 0) {
    return absl::UnauthenticatedError("the signed token's signature does not verify");
  }
  std::string payload;
  if (!absl::WebSafeBase64Unescape(signed_part.substr(kSignedTokenPrefix.size()), &payload)) {
    return Malformed("the payload is not base64url");
  }
  const std::vector<std::string> fields = absl::StrSplit(payload, ' ', absl::SkipEmpty());
  int64_t expires = 0;
  if (fields.size() < 3 || !absl::StartsWith(fields[2], kExpiryField) ||
      !absl::SimpleAtoi(absl::string_view(fields[2]).substr(kExpiryField.size()), &expires)) {
    return Malformed("the payload is not \"OWNER ROLE exp=N [caps]\"");
  }
  TokenClaims claims{.owner = fields[0],
                     .role = fields[1],
                     .expires = absl::FromUnixSeconds(expires),
                     .caps = std::vector<std::string>(fields.begin() + 3, fields.end())};
  if (claims.expires <= now) {
    return absl::UnauthenticatedError(absl::StrCat("the token of \"", claims.owner,
                                                   "\" expired at ",
                                                   absl::FormatTime(claims.expires)));
  }
  return claims;
}

}  // namespace forge
