#include "common/signed_token/signed_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"
#include "common/tls/tls.h"

namespace forge {
namespace {

constexpr absl::string_view kExpiryField = "exp=";
constexpr absl::string_view kIdField = "id=";
constexpr size_t kTokenIdDigits = 16;

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

bool IsTokenId(absl::string_view id) {
  return id.size() == kTokenIdDigits && std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

// The claims of a signed token's payload text, "OWNER ROLE exp=N [id=ID] [caps]"; their id is the
// payload's, or empty.
absl::StatusOr<TokenClaims> ParsePayload(absl::string_view payload) {
  const std::vector<std::string> fields = absl::StrSplit(payload, ' ', absl::SkipEmpty());
  int64_t expires = 0;
  if (fields.size() < 3 || !absl::StartsWith(fields[2], kExpiryField) ||
      !absl::SimpleAtoi(absl::string_view(fields[2]).substr(kExpiryField.size()), &expires)) {
    return Malformed("the payload is not \"OWNER ROLE exp=N [id=ID] [caps]\"");
  }
  TokenClaims claims{.owner = fields[0], .role = fields[1], .expires = absl::FromUnixSeconds(expires)};
  auto rest = fields.begin() + 3;
  if (rest != fields.end() && absl::StartsWith(*rest, kIdField)) {
    claims.id = rest->substr(kIdField.size());
    if (!IsTokenId(claims.id)) return Malformed("the id is not 16 hex digits");
    ++rest;
  }
  claims.caps.assign(rest, fields.end());
  return claims;
}

// The payload text of a signed token (its signature unchecked).
absl::StatusOr<std::string> Payload(absl::string_view token) {
  if (!absl::StartsWith(token, kSignedTokenPrefix)) return Malformed("no forge1. prefix");
  const size_t dot = token.rfind('.');
  if (dot < kSignedTokenPrefix.size()) return Malformed("no signature");
  std::string payload;
  if (!absl::WebSafeBase64Unescape(token.substr(kSignedTokenPrefix.size(),
                                                dot - kSignedTokenPrefix.size()),
                                   &payload)) {
    return Malformed("the payload is not base64url");
  }
  return payload;
}

std::string DigestId(absl::string_view token) {
  return Sha256Hex(token).substr(0, kTokenIdDigits);
}

}  // namespace

std::string MintTokenId() {
  unsigned char bytes[kTokenIdDigits / 2];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's generator failing is no state to mint tokens in.
    std::abort();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::StatusOr<std::string> TokenId(absl::string_view token) {
  if (!absl::StartsWith(token, kSignedTokenPrefix)) return DigestId(token);
  absl::StatusOr<std::string> payload = Payload(token);
  absl::StatusOr<TokenClaims> claims =
      payload.ok() ? ParsePayload(*payload) : absl::StatusOr<TokenClaims>(payload.status());
  if (!claims.ok()) return absl::InvalidArgumentError(claims.status().message());
  return claims->id.empty() ? DigestId(token) : claims->id;
}

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
    if (!IsField(cap) || absl::StartsWith(cap, kExpiryField) || absl::StartsWith(cap, kIdField)) {
      return absl::InvalidArgumentError(absl::StrCat("cap \"", cap, "\" is not KEY=N"));
    }
  }
  if (!claims.id.empty() && !IsTokenId(claims.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id \"", claims.id, "\" is not 16 lower-case hex digits"));
  }
  std::string payload = absl::StrCat(claims.owner, " ", claims.role, " ", kExpiryField,
                                     absl::ToUnixSeconds(claims.expires));
  if (!claims.id.empty()) absl::StrAppend(&payload, " ", kIdField, claims.id);
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
  FORGE_ASSIGN_OR_RETURN(const std::string payload, Payload(token));
  FORGE_ASSIGN_OR_RETURN(TokenClaims claims, ParsePayload(payload));
  if (claims.id.empty()) claims.id = DigestId(token);
  if (claims.expires <= now) {
    return absl::UnauthenticatedError(absl::StrCat("the token of \"", claims.owner,
                                                   "\" expired at ",
                                                   absl::FormatTime(claims.expires)));
  }
  return claims;
}

}  // namespace forge
